"""nbgrader configuration: solutions/ is the source, notebooks/ the student release."""

import os

from nbclient.exceptions import DeadKernelError
from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor, Preprocessor
from nbformat import NotebookNode, from_dict
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearHiddenTests, ClearMarkScheme,
                                    ClearOutput, ClearSolutions, ComputeChecksums, DeduplicateIds, Execute, GetGrades,
                                    IgnorePattern, IncludeHeaderFooter, InstantiateTests, LimitOutput, LockCells,
                                    OverwriteCells, OverwriteKernelspec, SaveAutoGrades, SaveCells)

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
# ddp_train.py: the script lesson 14's Exercise 3 writes next to the notebook (%%writefile); never part of a release
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "*.db", "ddp_train.py"]

# Students see this in place of the solution.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Lessons measure things; a cell may take longer than nbgrader's default 30 s on a slow laptop. The one per-cell limit
# lives in gpucourse.syllabus (make grade, the GPU check and the tests read it too); a cell that runs past it is
# interrupted and reports, in words, what happened and what to try. (Autograde always runs on after a failing cell:
# nbgrader's Execute.allow_errors is fixed to True, not settable.)
from gpucourse.syllabus import CELL_TIMEOUT_S, cell_timeout_message  # noqa: E402

c.Execute.timeout = CELL_TIMEOUT_S
c.Execute.interrupt_on_timeout = True
c.Execute.error_on_timeout = {"ename": "CellTimeoutError", "evalue": cell_timeout_message(),
                              "traceback": [f"CellTimeoutError: {cell_timeout_message()}"]}


class ExecuteNamingTheCell(Execute):
    """nbgrader's Execute; a kernel that dies under a cell (a crash in native code, or out of memory) is reported at
    once naming the student, the notebook and the cell (nbclient's own message is "Kernel died")."""

    def on_cell_start(self, cell: NotebookNode, cell_index: int) -> None:
        self._running = (cell_index, cell)

    def preprocess(self, nb: NotebookNode, resources: dict | None = None, km=None) -> tuple[NotebookNode, dict]:
        self._running = None
        try:
            return super().preprocess(nb, resources, km)
        except DeadKernelError as died:
            raise DeadKernelError(dead_kernel_message(resources or {}, self._running)) from died


def dead_kernel_message(resources: dict, running: tuple[int, NotebookNode] | None) -> str:
    """Which submission's kernel died, under which cell, and what to do."""
    names = resources.get("nbgrader", {})
    where = "/".join(str(names[k]) for k in ("student", "assignment", "notebook") if names.get(k)) or "a notebook"
    if running is None:
        return f"{where}: the kernel died before any cell ran"
    index, cell = running
    grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
    first_line = next((line for line in cell.source.splitlines() if line.strip()), "")[:80]
    return (f"{where}: the kernel died while running cell {index}" + (f" ({grade_id})" if grade_id else "") +
            f", which starts {first_line!r}: a crash in native code or out of memory. Run that notebook alone to see "
            "it; if a compiled cell crashed after a run under a simulated CPU profile, clear Inductor's cache folder.")


c.Autograde.autograde_preprocessors = [  # nbgrader 0.9.6's list, with Execute naming the cell a dead kernel ran
    ExecuteNamingTheCell, IgnorePattern, ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades, AssignLatePenalties,
    CheckCellMetadata]

# Library start-up lines that can reach stderr although the lesson silences them
# (nbgrader scores any test cell with stderr output as 0).
c.IgnorePattern.enabled = True
c.IgnorePattern.pattern = (
    r"(?:.*oneDNN custom operations are on.*|.*This TensorFlow binary is optimized.*|"
    r".*Unable to register cu(?:DNN|FFT|BLAS) factory.*|.*computation placer already registered.*|"
    r".*Could not initialize NNPACK.*)"
)


HIDDEN_TESTS = ClearHiddenTests()  # nbgrader's own stripping of "### BEGIN HIDDEN TESTS" ... "### END HIDDEN TESTS"


class OverwriteCellsQuietOnHiddenTests(OverwriteCells):
    """OverwriteCells that warns about a changed test cell only when the student really changed it.

    nbgrader (0.9.6, jupyter/nbgrader#1961) stores a test cell's checksum before stripping its hidden tests, so
    every released test cell with hidden tests "has changed" at autograde. Here a cell whose source equals the
    released one (hidden tests stripped) is not reported; the cell is restored from the gradebook either way.
    """

    def preprocess_cell(self, cell: NotebookNode, resources: dict, cell_index: int) -> tuple[NotebookNode, dict]:
        self._submitted_source = cell.source
        return super().preprocess_cell(cell, resources, cell_index)

    def report_change(self, name: str, attr: str, old: object, new: object) -> None:
        if attr == "checksum" and self._submitted_source == self._released_source(name):
            return
        super().report_change(name, attr, old, new)

    def _released_source(self, grade_id: str) -> str:
        """The source students received for this cell: the gradebook's source without its hidden tests."""
        source_cell = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
        cell = from_dict({"cell_type": source_cell.cell_type, "source": source_cell.source, "metadata": {}})
        HIDDEN_TESTS._remove_hidden_test_region(cell)
        return cell.source


class HideHiddenTests(Preprocessor):
    """Feedback shows no hidden test: their lines are removed, and their failures keep only the error message."""

    def preprocess_cell(self, cell: NotebookNode, resources: dict, cell_index: int) -> tuple[NotebookNode, dict]:
        if cell.cell_type == "code" and HIDDEN_TESTS.begin_test_delimeter in cell.source:
            HIDDEN_TESTS._remove_hidden_test_region(cell)
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":  # a traceback would quote the hidden lines around the failure
                    output["traceback"] = [f"{output['ename']}: {output['evalue']}"]
        return cell, resources


c.Autograde.sanitize_preprocessors = [ClearOutput, DeduplicateIds, OverwriteKernelspec,
                                      OverwriteCellsQuietOnHiddenTests, CheckCellMetadata]
c.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTests, CSSHTMLHeaderPreprocessor]
c.HideHiddenTests.enabled = True  # an nbconvert preprocessor runs only when enabled


class StampAsRelease(Preprocessor):
    """Mark a student notebook as `make release` does (tools/course.py), so that Formgrader's Generate, which writes
    into notebooks/ too, leaves the same bytes there (tests/test_exchange.py checks it; `make check` tells drift)."""

    def preprocess(self, nb: NotebookNode, resources: dict) -> tuple[NotebookNode, dict]:
        lesson, notebook = resources["nbgrader"]["assignment"], resources["nbgrader"]["notebook"]
        nb.metadata["gpucourse"] = {"generated": f"student version of solutions/{lesson}/{notebook}.ipynb by "
                                                 "`make release`; edit that file, not this one"}
        return nb, resources


c.GenerateAssignment.preprocessors = [  # nbgrader 0.9.6's list, then the release stamp
    IncludeHeaderFooter, InstantiateTests, LockCells, ClearSolutions, ClearOutput, CheckCellMetadata, ComputeChecksums,
    SaveCells, ClearHiddenTests, ClearMarkScheme, ComputeChecksums, CheckCellMetadata, StampAsRelease]
c.StampAsRelease.enabled = True

# LMS route (README): `nbgrader zip_collect LESSON` reads downloaded/LESSON/archive/*.zip and names each student from
# the file name. This regexp reads Canvas's "Download Submissions" names: <name>_<user id>_<submission id>_<file>,
# with LATE_ after the name of a late one and -1, -2 ... before ".ipynb" on a resubmission; the student id becomes
# Canvas's name part (e.g. liddellalice). Another LMS: replace it (nbgrader matches it against the whole path).
c.FileNameCollectorPlugin.named_regexp = (
    r".*[/\\](?P<student_id>[^/\\_]+)_(?:LATE_|late_)?\d+_\d+_(?P<file_id>[^/\\]+?)(?:-\d+)?\.ipynb$")
