# The course's two commands: `make lab` (learn) and `make test` (check). Both set up .venv the first time.
# The interpreter: python3 if it is 3.11 to 3.13, else the first of python3.13, python3.12, python3.11 on PATH (every
# pinned package has wheels for these), else python3: on 3.14 the course installs without TensorFlow, which has no
# wheel for it yet (an environment marker in pyproject.toml), and TensorFlow cells skip. Override with PYTHON=...
SUPPORTED_PYTHON := import sys; sys.exit(not (3, 11) <= sys.version_info[:2] < (3, 14))
PYTHON ?= $(or $(shell for p in python3 python3.13 python3.12 python3.11; do command -v $$p >/dev/null 2>&1 && $$p -c '$(SUPPORTED_PYTHON)' 2>/dev/null && { echo $$p; break; }; done),python3)
VENV ?= .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
EXTRAS := torch,tensorflow,gpu,triton,course,test

.PHONY: setup lab instructor-lab test test-fast test-colab time-lessons release check clean-notebooks gpu-check print-python

$(INSTALLED): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (set PYTHON=python3.11)")'
	@$(PYTHON) -c 'import sys; sys.version_info < (3, 14) or print("Note: TensorFlow publishes no wheel for Python 3.14 yet, so the course installs without it and its TensorFlow cells say so and skip. For them, install python3.13 (brew install python@3.13, or uv python install 3.13), delete .venv and run make again.")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --constraint constraints.txt --editable ".[$(EXTRAS)]"
	touch $(INSTALLED)

setup: $(INSTALLED)  ## create .venv with the course and its tools

LAB_ARGS ?=

lab: setup  ## copy the student notebooks to work/ (never overwriting), open JupyterLab there; options: LAB_ARGS="--port 8890 --no-browser"
	$(BIN)/python tools/course.py workspace
	$(BIN)/python tools/lab.py learner $(LAB_ARGS)

instructor-lab: setup  ## JupyterLab on the course folder with nbgrader's instructor tools (Formgrader); LAB_ARGS as for lab
	$(BIN)/python tools/lab.py instructor $(LAB_ARGS)

.PHONY: grade
grade: setup  ## grade your copies in work/ with the full tests, hints for what failed (one lesson: make grade LESSON=01)
	$(BIN)/python -m gpucourse grade $(LESSON)

test: setup  ## the full test suite (what CI runs)
	$(BIN)/python -m pytest -n 2 --dist loadscope --no-loadscope-reorder --durations=30  # longest scopes first (conftest.py); the 30 slowest tests, for the time budget

test-fast: setup  ## unit tests and consistency checks only (under a minute)
	$(BIN)/python -m pytest -m "not slow" -n 2 -q

time-lessons: setup  ## benchmark: every lesson on one core under three CPU profiles (native, AVX2, AVX-512 without bf16)
	$(BIN)/python tests/time_lessons.py --profiles native,avx2,avx512

test-colab:  ## every lesson as a Colab learner runs it, in a twin of Colab's versions (.venv-colab, built once)
	$(PYTHON) tools/colab_twin.py

release: setup  ## stamp solutions/, regenerate notebooks/ (instructors and maintainers)
	$(BIN)/python tools/course.py release

check: setup  ## fail if any generated file is out of date
	$(BIN)/python tools/course.py check

clean-notebooks: setup  ## strip outputs and machine metadata from every committed notebook
	$(BIN)/python tools/course.py clean

GPU_CHECK_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)
GPU_CHECK_REPORT ?= gpu-check-report.md

gpu-check:  ## on a CUDA machine: self-test, sustained load, pytest -m gpu, every solution notebook, the recorder; one report
	PYTHONPATH=src$${PYTHONPATH:+:$$PYTHONPATH} $(GPU_CHECK_PYTHON) tools/gpu_check.py --report $(GPU_CHECK_REPORT)

print-python:  ## the interpreter make uses for .venv (see PYTHON at the top)
	@echo $(PYTHON)
