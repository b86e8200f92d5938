# Setup: the same in every lesson (stamped from pyproject.toml by `make release`; edit tools/templates/setup_cell.py).
import sys

if "google.colab" in sys.modules:  # Colab opens a notebook alone: fetch the course's helper package
    get_ipython().run_line_magic("pip", "install --quiet 'gpucourse @ git+https://github.com/{repository}@{branch}'")
try:
    import gpucourse
except ImportError as error:
    raise ImportError("The course's helper package is missing. In a terminal at the course folder run "
                      "`make lab` (or: pip install -e .), then restart the kernel.") from error
REPORT = gpucourse.setup()  # prints which device this lesson runs on; silences TensorFlow's start-up lines
