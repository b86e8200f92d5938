"""The helper package's modules import one another without cycles (issue 28).

The graph has one node per module of ``src/gpucourse`` (a package is its ``__init__``) and one edge per ``import``
or ``from ... import`` statement that names another of them, wherever the statement stands:

- at the top of the module or inside a function: a lazy import is still a dependency;
- under ``if TYPE_CHECKING:``: such an import never runs, but the module still depends on the one it names, and
  counting it keeps that back door to an upward dependency shut (the package has none);
- relative imports are resolved against the importing module's package (an ``__init__`` is its own package);
- ``import gpucourse.a.b`` is an edge to ``gpucourse.a.b``; ``from gpucourse.a import b`` is an edge to
  ``gpucourse.a.b`` when that is a module, else to ``gpucourse.a``, whose module or ``__init__`` defines ``b``.

Package ``__init__`` edges: an explicit import from a package (``from gpucourse import setup``, ``from gpucourse
import capstone``) is an edge to its ``__init__`` like any other, so an ``__init__`` that imports a submodule which
imports names from that same package is a cycle, and fails: the submodule would see the package half-initialised.
The parent packages that Python imports implicitly before any submodule are not edges: counting them would make
every ``__init__`` that re-exports its submodules (``capstone``, ``kernels``, ``parallel``) a cycle with each of
them, although a submodule that never names its package cannot see it half-built.
"""

from __future__ import annotations

import ast
from collections import deque
from collections.abc import Mapping
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "src" / "gpucourse"

Graph = Mapping[str, Mapping[str, int]]
"""module -> {module it imports: line of the first such import statement}."""


# --------------------------------------------------------------------------- the graph

def module_files(package_dir: Path) -> dict[str, Path]:
    """Every module of the package under ``package_dir`` by dotted name (a package by its own name)."""
    if not (package_dir / "__init__.py").is_file():
        raise ValueError(f"package_dir must be a package (a folder with __init__.py), got {package_dir}")
    modules = {}
    for path in sorted(package_dir.rglob("*.py")):
        parts = [package_dir.name, *path.relative_to(package_dir).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _base_of_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute module a relative ``from`` import of ``level`` dots names, seen from ``module``."""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 > len(parts) - 1:
        raise ValueError(f"{module}: a relative import of level {level} climbs above the top-level package")
    parts = parts[:len(parts) - (level - 1)]
    return ".".join(parts + ([name] if name else []))


def _known(name: str, modules: Mapping[str, Path]) -> str | None:
    """``name`` if it is a module of the package, else its longest prefix that is one (None outside the package)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, source: str, modules: Mapping[str, Path]) -> dict[str, int]:
    """The package's modules that ``source`` (the text of ``module``) imports, with the line of the first import."""
    is_package = modules[module].name == "__init__.py"
    edges: dict[str, int] = {}
    for node in ast.walk(ast.parse(source, filename=str(modules[module]))):
        if isinstance(node, ast.Import):
            targets = [_known(alias.name, modules) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _base_of_relative(module, is_package, node.level, node.module) if node.level else node.module
            targets = [_known(f"{base}.{alias.name}", modules) for alias in node.names]
        else:
            continue
        for target in targets:
            if target is not None and target != module:
                edges[target] = min(edges.get(target, node.lineno), node.lineno)
    return edges


def import_graph(package_dir: Path) -> dict[str, dict[str, int]]:
    """The import graph of the package under ``package_dir``."""
    modules = module_files(package_dir)
    return {module: imports_of(module, path.read_text(encoding="utf-8"), modules) for module, path in modules.items()}


# --------------------------------------------------------------------------- strongly connected components, cycles

def strongly_connected_components(graph: Graph) -> list[list[str]]:
    """Tarjan's strongly connected components of ``graph``, each sorted, in sorted order (edges out of it ignored)."""
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = lowlink[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, {})):
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                lowlink[node] = min(lowlink[node], lowlink[target])
            elif target in on_stack:
                lowlink[node] = min(lowlink[node], index[target])
        if lowlink[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def _shortest_cycle_through(start: str, graph: Graph, component: set[str]) -> list[str]:
    """The shortest path start -> ... -> start inside ``component`` (breadth first, ties broken by name)."""
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for target in sorted(graph[node]):
            if target not in component:
                continue
            if target == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return [start, *reversed(path[:-1]), start] if node != start else [start, start]
            if target not in came_from:
                came_from[target] = node
                queue.append(target)
    raise ValueError(f"{start} is on no cycle of its component")


def cycles(graph: Graph) -> list[list[str]]:
    """One shortest cycle through each module of each strongly connected component of more than one module."""
    found: list[list[str]] = []
    for component in strongly_connected_components(graph):
        if len(component) < 2:
            continue
        for module in component:
            cycle = _shortest_cycle_through(module, graph, set(component))
            smallest = cycle.index(min(cycle[:-1]))
            canonical = cycle[smallest:-1] + cycle[:smallest + 1]
            if canonical not in found:
                found.append(canonical)
    return found


def describe(cycle: list[str], graph: Graph, files: Mapping[str, object] | None = None) -> str:
    """A cycle as a readable chain 'a -> b -> a', then where each import stands (``files[module]``:line, else
    module:line)."""
    lines = [" -> ".join(cycle)]
    for source, target in zip(cycle, cycle[1:]):
        lines.append(f"    {files[source] if files else source}:{graph[source][target]} imports {target}")
    return "\n".join(lines)


def _chains(graph: Graph) -> list[str]:
    """Every cycle of ``graph`` as a bare chain."""
    return [" -> ".join(cycle) for cycle in cycles(graph)]


# --------------------------------------------------------------------------- the cycle finder on made-up graphs

def test_the_cycle_finder_lists_each_cycle_of_a_made_up_graph():
    graph = {"a": {"b": 1}, "b": {"a": 2, "c": 3}, "c": {"d": 4}, "d": {"c": 5}, "e": {"a": 6}, "f": {"f": 7},
             "x": {"y": 1}, "y": {"z": 1}, "z": {"x": 1}, "g": {"outside": 1}}
    assert _chains(graph) == ["a -> b -> a", "c -> d -> c", "x -> y -> z -> x"]
    assert strongly_connected_components(graph) == [["a", "b"], ["c", "d"], ["e"], ["f"], ["g"], ["x", "y", "z"]]


def test_the_cycle_finder_finds_nothing_in_a_layered_graph():
    layered = {"top": {"middle": 1, "bottom": 2}, "middle": {"bottom": 1}, "bottom": {}}
    assert cycles(layered) == []


def test_the_cycle_finder_gives_each_module_of_a_tangle_its_shortest_cycle():
    tangle = {"a": {"b": 1, "c": 1}, "b": {"a": 1}, "c": {"d": 1}, "d": {"a": 1}}
    assert _chains(tangle) == ["a -> b -> a", "a -> c -> d -> a"]


def test_a_cycle_reads_as_a_chain_with_the_line_of_each_import():
    graph = {"a": {"b": 12}, "b": {"a": 40}}
    assert describe(cycles(graph)[0], graph) == "a -> b -> a\n    a:12 imports b\n    b:40 imports a"


# --------------------------------------------------------------------------- the edges, on a made-up package

def _write_package(root: Path, files: Mapping[str, str]) -> Path:
    """A package 'pkg' under ``root`` made of ``files`` (path inside pkg -> source); its folder."""
    for relative, source in files.items():
        path = root / "pkg" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return root / "pkg"


def test_edges_follow_relative_lazy_and_type_checking_imports(tmp_path):
    package = _write_package(tmp_path, {
        "__init__.py": "def setup():\n    from pkg import low\n",
        "low.py": "import os\nHELPER = 1\n",
        "sub/__init__.py": "from .mid import thing\n",
        "sub/mid.py": ("from typing import TYPE_CHECKING\nfrom ..low import HELPER\nfrom . import leaf\n"
                       "if TYPE_CHECKING:\n    from pkg.high import High\n\ndef thing():\n    import pkg.sub.leaf\n"),
        "sub/leaf.py": "from pkg import setup\nfrom pkg.sub import mid\n",
        "high.py": "import pkg.sub.mid as mid\nfrom pkg.low import HELPER\n",
    })
    graph = import_graph(package)
    assert graph == {
        "pkg": {"pkg.low": 2},
        "pkg.low": {},
        "pkg.sub": {"pkg.sub.mid": 1},
        "pkg.sub.mid": {"pkg.low": 2, "pkg.sub.leaf": 3, "pkg.high": 5},
        "pkg.sub.leaf": {"pkg": 1, "pkg.sub.mid": 2},
        "pkg.high": {"pkg.sub.mid": 1, "pkg.low": 2},
    }
    assert _chains(graph) == ["pkg.high -> pkg.sub.mid -> pkg.high", "pkg.sub.leaf -> pkg.sub.mid -> pkg.sub.leaf"]


def test_a_submodule_importing_names_from_its_package_while_the_init_imports_it_is_a_cycle(tmp_path):
    package = _write_package(tmp_path, {"__init__.py": "from pkg.tool import run\nVERSION = 1\n",
                                        "tool.py": "def run():\n    from pkg import VERSION\n"})
    assert _chains(import_graph(package)) == ["pkg -> pkg.tool -> pkg"]


def test_the_implicit_import_of_parent_packages_is_no_edge(tmp_path):
    package = _write_package(tmp_path, {"__init__.py": "from pkg.tool import run\n", "tool.py": "def run(): ...\n"})
    assert import_graph(package) == {"pkg": {"pkg.tool": 1}, "pkg.tool": {}}


def test_a_relative_import_above_the_top_package_is_refused(tmp_path):
    package = _write_package(tmp_path, {"__init__.py": "", "a.py": "from ... import b\n"})
    with pytest.raises(ValueError, match="climbs above the top-level package"):
        import_graph(package)


# --------------------------------------------------------------------------- issue 28's four cycles

ISSUE_28_IMPORTS = {  # the import statements that made the four cycles, as they stood (inside functions included)
    "capstone/__init__.py": "",
    "capstone/training.py": "from gpucourse.capstone.live_plots import LivePlot\n",
    "capstone/live_plots.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                               "    from gpucourse.capstone.training import TrainResult\n"
                               "def speedup_rows(results):\n    from gpucourse.capstone.training import TrainResult\n"),
    "capstone/step_switches.py": "def compile_backend():\n    from gpucourse import compilers\n",
    "compilers.py": "def quiet():\n    from gpucourse.capstone.step_switches import quiet_compilation\n",
    "hardware.py": "def has_native_bf16():\n    from gpucourse import native_formats\n",
    "native_formats.py": "def cpu_flags():\n    from gpucourse.hardware import _read_proc_cpuinfo\n",
    "kernels/__init__.py": "from gpucourse.kernels import numba_backend, triton_backend\n",
    "kernels/numba_backend.py": "",
    "kernels/triton_backend.py": "def triton_modules():\n    from gpucourse.kernels import triton_kernels\n",
    "kernels/triton_kernels.py": "from gpucourse.kernels.triton_backend import launch, require_triton\n",
}


def test_the_finder_names_the_four_cycles_of_issue_28(tmp_path):
    package = tmp_path / "gpucourse"
    for relative, source in {"__init__.py": "", **ISSUE_28_IMPORTS}.items():
        (package / relative).parent.mkdir(parents=True, exist_ok=True)
        (package / relative).write_text(source, encoding="utf-8")
    assert _chains(import_graph(package)) == [
        "gpucourse.capstone.live_plots -> gpucourse.capstone.training -> gpucourse.capstone.live_plots",
        "gpucourse.capstone.step_switches -> gpucourse.compilers -> gpucourse.capstone.step_switches",
        "gpucourse.hardware -> gpucourse.native_formats -> gpucourse.hardware",
        "gpucourse.kernels.triton_backend -> gpucourse.kernels.triton_kernels -> gpucourse.kernels.triton_backend",
    ]


# --------------------------------------------------------------------------- the real package

def test_the_graph_of_the_real_package_sees_its_modules_and_their_lazy_imports():
    graph = import_graph(PACKAGE_DIR)
    assert len(graph) > 50 and "gpucourse" in graph and "gpucourse.capstone.training" in graph
    assert "gpucourse.kernels.triton_launch" in graph["gpucourse.kernels.triton_kernels"]
    assert "gpucourse.compilers" in graph["gpucourse.capstone.step_switches"]  # an import inside a function


def test_the_package_has_no_import_cycles():
    graph = import_graph(PACKAGE_DIR)
    files = {module: path.relative_to(PACKAGE_DIR.parent) for module, path in module_files(PACKAGE_DIR).items()}
    found = [describe(cycle, graph, files) for cycle in cycles(graph)]
    assert not found, ("import cycles in gpucourse (move the shared code down to the lower-level module, or import "
                       "the other way round):\n" + "\n".join(found))

