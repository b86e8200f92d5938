"""nbgrader configuration: solutions/ is the source, notebooks/ the student release."""

import os

c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)

COURSE_ROOT = os.path.dirname(os.path.abspath(__file__))

c.CourseDirectory.course_id = "gpus-for-deep-learning"
c.CourseDirectory.root = COURSE_ROOT
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
# The gradebook holds students' grades: it lives beside the course, never in version control (.gitignore).
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(COURSE_ROOT, "gradebook.db")
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "*.db"]

# Students see this in place of the solution.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Lessons measure things; a cell may take longer than nbgrader's default 30 s on a slow laptop.
c.Execute.timeout = 300
# The test cells use the student's functions: a failure must not stop the rest of the notebook.
c.Execute.allow_errors = True

# Library start-up lines that can reach stderr although the lesson silences them
# (nbgrader scores any test cell with stderr output as 0).
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = (
    r"(?:.*oneDNN custom operations are on.*|.*This TensorFlow binary is optimized.*|"
    r".*Unable to register cu(?:DNN|FFT|BLAS) factory.*|.*computation placer already registered.*|"
    r".*Could not initialize NNPACK.*)"
)
