# @title Setup: install the course's helper package (on Colab and Kaggle) and report this machine. Run it first.
# The same in every lesson: stamped from pyproject.toml by `make release` (edit tools/templates/setup_cell.py).
import os
import sys

ON_COLAB = "google.colab" in sys.modules
ON_KAGGLE = "KAGGLE_KERNEL_RUN_TYPE" in os.environ
if ON_COLAB or ON_KAGGLE:  # a hosted notebook opens alone: install the course's helper package, release v{version}
    import importlib.metadata, tempfile
    pins = {}  # every package the runtime already has (torch, tensorflow, numpy, ...) stays at its version
    for dist in importlib.metadata.distributions():  # in import order: the first of a name is the one Python loads
        pins.setdefault((dist.metadata["Name"] or "").lower().replace("_", "-"), dist.version)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as constraints:
        constraints.writelines(f"{name}==={pin}\n" for name, pin in pins.items() if name not in ("", "gpucourse"))
    # the course's own tests set GPUCOURSE_PIP_SOURCE to install a checkout instead of the release
    sources = ([os.environ["GPUCOURSE_PIP_SOURCE"]] if "GPUCOURSE_PIP_SOURCE" in os.environ else
               ["git+https://github.com/{repository}@v{version}", "git+https://github.com/{repository}@{branch}"])
    for source in sources:
        get_ipython().system(f"{sys.executable} -m pip install --quiet -c {constraints.name} 'gpucourse[colab] @ {source}'")
        if get_ipython().user_ns.get("_exit_code", 0) == 0:
            break
        if source != sources[-1]:
            print("Release v{version} of the course package is not published yet: installing its latest version instead.")
try:
    import gpucourse
except ImportError as error:
    fix = ("Run this cell again. If the install above fails again: Runtime > Disconnect and delete runtime, "
           "Runtime > Change runtime type if you want a GPU, then run this setup cell first. Still failing? "
           "Show the install's message above to your instructor." if ON_COLAB else
           "On Kaggle, turn Internet on (Settings > Internet; it needs a verified phone number) and run this cell "
           "again; if the install above still fails, Run > Restart & clear cell outputs, then this cell first."
           if ON_KAGGLE else
           "In a terminal at the course folder run `make lab` (or: pip install -e .), then Kernel > Restart Kernel.")
    raise ImportError(f"The course's helper package is missing. {fix}") from error
REPORT = gpucourse.setup()  # prints which device this lesson runs on; silences TensorFlow's start-up lines
