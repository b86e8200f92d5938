# Setup: the same in every lesson (stamped from pyproject.toml by `make release`; edit tools/templates/setup_cell.py).
import os
import sys

ON_COLAB = "google.colab" in sys.modules
if ON_COLAB:  # Colab opens a notebook alone: install the course's helper package, release v{version}
    import importlib.metadata, tempfile
    pins = {}  # every package Colab already has (torch, tensorflow, numpy, ...) stays at its version
    for dist in importlib.metadata.distributions():  # in import order: the first of a name is the one Python loads
        pins.setdefault((dist.metadata["Name"] or "").lower().replace("_", "-"), dist.version)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as constraints:
        constraints.writelines(f"{name}==={pin}\n" for name, pin in pins.items() if name not in ("", "gpucourse"))
    # the course's own tests set GPUCOURSE_PIP_SOURCE to install a checkout instead of the release
    source = os.environ.get("GPUCOURSE_PIP_SOURCE", "git+https://github.com/{repository}@v{version}")
    get_ipython().system(f"{sys.executable} -m pip install --quiet -c {constraints.name} 'gpucourse[colab] @ {source}'")
try:
    import gpucourse
except ImportError as error:
    fix = ("Run this cell again. If the install above fails again: Runtime > Disconnect and delete runtime, "
           "Runtime > Change runtime type if you want a GPU, then run this setup cell first. Still failing? "
           "Show the install's message above to your instructor." if ON_COLAB else
           "In a terminal at the course folder run `make lab` (or: pip install -e .), then Kernel > Restart Kernel.")
    raise ImportError(f"The course's helper package is missing. {fix}") from error
REPORT = gpucourse.setup()  # prints which device this lesson runs on; silences TensorFlow's start-up lines
