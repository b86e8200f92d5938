"""Real-browser tests: JupyterLab as `make lab` and `make instructor-lab` start it, driven by headless Chromium.

(a) The learner's lab (tools/lab.py learner, the same command line and configuration as `make lab`) on a work
    folder holding lesson 01 with its exercises answered (the model answers, so every cell must succeed): Run >
    Run All Cells through the menu; every code cell runs, no output goes to stderr, the plot renders as an image;
    nbgrader's instructor tools and JupyterLab's news prompt are absent; the Validate button is there and passes.
(b) The instructor's lab (tools/lab.py instructor) on a throw-away course with one autograded submission:
    the instructor tools and the news prompt are there (so the learner's checks can fail); Formgrader opens, the
    written answer gets half its points through the grading page, and the gradebook's total rises by exactly those.

Both are marked slow. The fast tests at the end check tools/lab.py itself (options, root, the learner's config
naming plugins that exist) without a browser.

The browser tests need the `playwright` package (test extra) and a Chromium binary (Debian's `chromium`; playwright's own browser
download is not used); skipped with the reason otherwise. Each Jupyter server gets its own Jupyter config, data
and runtime folders, so the tester's ~/.jupyter neither changes nor influences what is checked. Screenshots are
written to a folder whose path the tests print (set BROWSER_SCREENSHOTS to choose it).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from notebook_utils import ROOT, course, release_path, written_answers
from test_grading import _nbgrader, _with_solutions

sys.path.insert(0, str(ROOT / "tools"))
import lab  # noqa: E402  (tools/lab.py: how `make lab` and `make instructor-lab` start JupyterLab)

LESSON = "01_architecture"  # a light lesson (about 20 s) with plots and a written answer
STUDENT = "alice"
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
STDERR_OUTPUT = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
NEWS_PROMPT = "Would you like to get notified about official Jupyter news?"  # JupyterLab 4's first-run toast
INSTRUCTOR_ITEMS = {"formgrader", "formgrader (local)", "create assignment", "course list"}  # nbgrader 0.9.6's labels



def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get(url: str) -> int:
    """HTTP status of a GET (errors included), 0 when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return 0


@contextmanager
def running_lab(role: str, folder: Path, scratch: Path) -> Iterator[tuple[str, str]]:
    """Start JupyterLab for ``role`` on ``folder`` as tools/lab.py does; yield (base URL, token); stop it."""
    port, token = _free_port(), secrets.token_hex(16)
    private = {name: str(scratch / f"{role}-{part}") for name, part in
               (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"), ("JUPYTER_RUNTIME_DIR", "runtime"))}
    env = lab.environment(role, {**os.environ, **private})
    argv = lab.command(role, ["--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
                              "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}"], notebook_dir=folder)
    log_path, cwd = scratch / f"{role}-lab.log", lab.working_directory(role, folder)
    with open(log_path, "w", encoding="utf-8") as log:
        server = subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while _get(f"{base}/api/status?token={token}") != 200:
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{role} JupyterLab did not start:\n{log_path.read_text(encoding='utf-8')[-3000:]}")
            time.sleep(0.5)
        yield base, token
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory) -> Path:
    """BROWSER_SCREENSHOTS if set (pytest keeps only its last three temporary folders), else a temporary folder."""
    chosen = os.environ.get("BROWSER_SCREENSHOTS")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("browser-screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    print(f"\nbrowser screenshots: {folder}")
    return folder


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium driven by playwright; skips the test with the reason when either is missing."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed "
                                   "(pip install playwright; it is in the course's test extra)")
    if CHROMIUM is None:
        pytest.skip("no Chromium binary (Debian: apt-get install chromium; or set CHROMIUM=/path/to/chromium)")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    yield context.new_page()
    context.close()


def _open_lab(page, url: str) -> None:
    """Load a JupyterLab page and wait until its menu bar is up."""
    page.goto(url)
    page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).wait_for(timeout=90_000)


def _menu_labels(page, menu: str) -> list[str]:
    """Open a menu of JupyterLab's menu bar, return its item labels in lower case, close it."""
    page.locator(".lm-MenuBar-item", has_text=re.compile(rf"^{menu}$")).click()
    labels = page.locator(".lm-Menu:visible .lm-Menu-itemLabel").all_inner_texts()
    page.keyboard.press("Escape")
    return [label.strip().lower() for label in labels if label.strip()]


def _wait_until_all_cells_ran(page, code_cells: int, screenshots: Path, timeout_s: float = 150) -> None:
    """Wait until every code cell shows an execution count and none is queued or running."""
    deadline = time.monotonic() + timeout_s
    prompts: list[str] = []
    while time.monotonic() < deadline:
        prompts = page.locator(".jp-CodeCell .jp-InputArea-prompt").evaluate_all("els => els.map(e => e.textContent)")
        if len(prompts) == code_cells and all(re.fullmatch(r"\[\d+\]:", p.strip()) for p in prompts):
            return
        time.sleep(1)
    page.screenshot(path=screenshots / "learner-stuck.png")
    pytest.fail(f"cells still running or never run after {timeout_s:.0f} s; prompts: {prompts}")


def _learner_work_folder(folder: Path) -> Path:
    """What `make lab` puts in work/ for one lesson, with the exercises answered as the model answers do."""
    shutil.copytree(release_path(LESSON).parent, folder / LESSON)
    notebook = folder / LESSON / f"{LESSON}.ipynb"
    notebook.write_text(json.dumps(_with_solutions(LESSON), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return notebook


@pytest.mark.slow
def test_learner_lab_runs_a_lesson_through_the_menu(page, screenshots, tmp_path) -> None:
    work = tmp_path / "work"
    notebook_path = _learner_work_folder(work)
    cells = json.loads(notebook_path.read_text(encoding="utf-8"))["cells"]
    code_cells = sum(cell["cell_type"] == "code" for cell in cells)
    collapsed = sum(cell["cell_type"] == "code" and cell["metadata"].get("jupyter", {}).get("source_hidden", False)
                    for cell in cells)  # the setup cell shows as a collapsed form: JupyterLab draws no prompt for it
    assert collapsed == 1
    with running_lab("learner", work, tmp_path) as (base, token):
        started = time.monotonic()
        _open_lab(page, f"{base}/lab/tree/{LESSON}/{LESSON}.ipynb?token={token}")
        page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(timeout=90_000)
        page.wait_for_function(f"document.querySelectorAll('.jp-Notebook .jp-Cell').length === {len(cells)}")
        page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-item", has_text=re.compile(r"^Run All Cells")).first.click()
        assert page.locator(".jp-CodeCell .jp-InputPlaceholder").count() == collapsed, "the setup cell is not collapsed"
        _wait_until_all_cells_ran(page, code_cells - collapsed, screenshots)
        page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(timeout=60_000)
        print(f"learner lab: lesson {LESSON} opened and run in {time.monotonic() - started:.0f} s")
        page.screenshot(path=screenshots / "learner-top.png")

        stderr = page.locator(STDERR_OUTPUT).evaluate_all("els => els.map(e => e.textContent)")
        assert not stderr, f"outputs written to stderr: {stderr}"
        assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.error']").count() == 0
        images = page.locator(".jp-OutputArea-output img")
        assert images.count() >= 1, "the lesson's plot did not render as an image"
        images.first.scroll_into_view_if_needed()
        widths = images.evaluate_all("imgs => imgs.map(img => img.complete ? img.naturalWidth : 0)")
        assert all(width > 100 for width in widths), f"images that did not load: natural widths {widths}"
        page.screenshot(path=screenshots / "learner-plot.png")

        page.keyboard.press("Control+s")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            saved = json.loads(notebook_path.read_text(encoding="utf-8"))
            counts = [cell.get("execution_count") for cell in saved["cells"] if cell["cell_type"] == "code"]
            if all(counts):
                break
            time.sleep(0.5)
        assert all(counts), f"code cells without an execution count in the saved notebook: {counts}"
        outputs = [output for cell in saved["cells"] for output in cell.get("outputs", [])]
        assert not [o for o in outputs if o.get("name") == "stderr" or o["output_type"] == "error"]
        assert sum("image/png" in o.get("data", {}) for o in outputs) == len(widths)

        assert page.get_by_text(NEWS_PROMPT).count() == 0, "JupyterLab asks the learner about Jupyter news"
        page.locator(".jp-Toolbar-item", has_text=re.compile(r"^\s*Validate\s*$")).first.click()
        page.get_by_text("Success! Your notebook passes all the tests.").wait_for(timeout=120_000)
        page.screenshot(path=screenshots / "learner-validated.png")
        page.keyboard.press("Escape")
        labels = _menu_labels(page, "Nbgrader")
        assert "assignment list" in labels, f"the students' Assignment List is missing: {labels}"
        assert not INSTRUCTOR_ITEMS & set(labels), f"instructor tools in the learner's menu: {labels}"
        assert _get(f"{base}/formgrader?token={token}") == 404, "Formgrader is served to the learner"
        page.screenshot(path=screenshots / "learner-end.png")


def _graded_course(root: Path) -> None:
    """A throw-away course with lesson 01 registered and one student's submission (model answers) autograded."""
    root.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", root)
    shutil.copytree(ROOT / "solutions" / LESSON, root / "solutions" / LESSON)
    course.cmd_gradebook(root)
    target = root / "submitted" / STUDENT / LESSON / f"{LESSON}.ipynb"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(_with_solutions(LESSON)), encoding="utf-8")
    _nbgrader(root, "autograde", LESSON)


def _written_grade(root: Path) -> tuple[str, float | None, float]:
    """(submission notebook id, manual score of the written answer, notebook total) from the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        notebook = gradebook.find_submission_notebook(LESSON, LESSON, STUDENT)
        grade = next(g for g in notebook.grades if g.name == "written-1")
        return notebook.id, grade.manual_score, notebook.score


@pytest.mark.slow
def test_instructor_grades_a_written_answer_in_formgrader(page, screenshots, tmp_path) -> None:
    root = tmp_path / "course"
    _graded_course(root)
    submission_id, manual_before, total_before = _written_grade(root)
    assert manual_before is None, "the written answer should wait for the instructor"
    points = written_answers(LESSON)["written-1"] / 2  # partial credit: not what a "Full credit" click would give
    with running_lab("instructor", root, tmp_path) as (base, token):
        _open_lab(page, f"{base}/lab?token={token}")
        labels = _menu_labels(page, "Nbgrader")
        assert INSTRUCTOR_ITEMS <= set(labels), f"instructor tools missing: {labels}"
        page.get_by_text(NEWS_PROMPT).wait_for(timeout=60_000)  # the prompt the learner's lab leaves out
        page.screenshot(path=screenshots / "instructor-lab.png")

        page.goto(f"{base}/formgrader?token={token}")
        page.get_by_text(LESSON).first.wait_for(timeout=60_000)
        page.screenshot(path=screenshots / "formgrader-assignments.png")
        submission = f"/formgrader/submissions/{submission_id}"  # listed as "Submission #1" (names hidden)
        steps = (("Manual Grading", "/formgrader/gradebook"), (LESSON, f"/formgrader/gradebook/{LESSON}"),
                 (LESSON, f"/formgrader/gradebook/{LESSON}/{LESSON}"), (None, submission))
        for link, path in steps:  # the instructor's clicks: Manual Grading, the lesson, its notebook, the submission
            by_href = page.locator(f"a[href='{path}']:visible")
            visible_link = page.get_by_role("link", name=link, exact=True) if link else by_href
            visible_link.last.click()
            page.wait_for_url(re.compile(rf"{re.escape(path)}/?$"), timeout=60_000)
        score = page.locator("#written-1")
        score.wait_for(timeout=60_000)
        page.wait_for_load_state("networkidle", timeout=60_000)  # under load the page binds its save handler late
        score.scroll_into_view_if_needed()
        with page.expect_response(lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT",
                                  timeout=60_000) as saved:
            score.fill(f"{points:g}")
            score.press("Tab")
        assert saved.value.ok, f"Formgrader did not save the grade: HTTP {saved.value.status}"
        page.screenshot(path=screenshots / "formgrader-graded.png")

    _, manual_after, total_after = _written_grade(root)
    assert manual_after == points
    assert total_after == pytest.approx(total_before + points), (total_before, total_after)


# --------------------------------------------------------------------------- tools/lab.py without a browser (fast)

def test_learner_config_names_plugins_that_exist() -> None:
    """Every plugin the learner's lab disables is one that the installed JupyterLab or nbgrader really has."""
    from jupyter_core.paths import jupyter_path

    page_config = json.loads((lab.LEARNER_CONFIG / "labconfig" / "page_config.json").read_text(encoding="utf-8"))
    disabled = [name for name, off in page_config["disabledExtensions"].items() if off]
    bundles = "".join(path.read_text(encoding="utf-8", errors="ignore") for folder in jupyter_path("lab", "static")
                      + jupyter_path("labextensions") for path in Path(folder).rglob("*.js"))
    assert {f'"{name}"' for name in disabled if f'"{name}"' not in bundles} == set()
    assert not {"@jupyter/nbgrader:validate-assignment", "@jupyter/nbgrader:assignment-list"} & set(disabled)
    server = json.loads((lab.LEARNER_CONFIG / "jupyter_server_config.json").read_text(encoding="utf-8"))
    extensions = server["ServerApp"]["jpserver_extensions"]
    assert extensions == {f"nbgrader.server_extensions.{name}": False for name in ("formgrader", "course_list")}
    assert server["LabApp"]["news_url"] is None


def test_lab_command_passes_options_and_allows_root(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(lab.os, "geteuid", lambda: 0, raising=False)
    argv = lab.command("learner", ["--port", "8890", "--no-browser"])
    assert argv[1:4] == ["-m", "jupyter", "lab"] and f"--ServerApp.root_dir={lab.WORKSPACE}" in argv
    assert argv[-4:] == ["--port", "8890", "--no-browser", "--allow-root"]
    assert lab.command("learner", ["--allow-root"]).count("--allow-root") == 1
    assert f"--ServerApp.root_dir={lab.ROOT}" in lab.command("instructor")
    assert [a for a in lab.command("learner", [f"--notebook-dir={tmp_path}"]) if "root_dir" in a] == []
    monkeypatch.setattr(lab.os, "geteuid", lambda: 1000, raising=False)
    assert "--allow-root" not in lab.command("learner")
    with pytest.raises(ValueError, match="role"):
        lab.command("student")
    with pytest.raises(TypeError, match="lab_args"):
        lab.command("learner", "--port 8890")


def test_only_the_learner_gets_the_learner_config(tmp_path) -> None:
    learner = lab.environment("learner", {"JUPYTER_CONFIG_PATH": "/elsewhere", "PATH": "/usr/bin"})
    assert learner["JUPYTER_CONFIG_PATH"].split(os.pathsep) == [str(lab.LEARNER_CONFIG), "/elsewhere"]
    assert "JUPYTER_CONFIG_PATH" not in lab.environment("instructor", {"PATH": "/usr/bin"})
    assert lab.working_directory("learner", tmp_path) == lab.ROOT
    assert lab.working_directory("instructor", tmp_path) == tmp_path


def test_make_lab_runs_tools_lab() -> None:
    """`make lab` and `make instructor-lab` start JupyterLab through tools/lab.py with the learner's LAB_ARGS."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^lab: .*\n\t.*course\.py workspace\n\t\$\(BIN\)/python tools/lab\.py learner \$\(LAB_ARGS\)$",
                     makefile, re.M)
    assert re.search(r"^instructor-lab: .*\n\t\$\(BIN\)/python tools/lab\.py instructor \$\(LAB_ARGS\)$",
                     makefile, re.M)
