"""Compile Numba kernels with Numba's REAL CUDA target, on a CPU, and read what it makes (lessons 04 and 05).

Numba's CUDA compiler runs without a GPU as far as LLVM IR (``numba.cuda.compiler.compile_cuda(..., cc=(7, 5))``).
That IR says what a GPU would run: ``fadd``/``fmul``/``fcmp``/... ``double`` or ``call double @__nv_pow`` is float64
arithmetic (1/32 of the float32 rate on a T4), and a kernel the compiler refuses (a local list, ``np.zeros``, a
generator) cannot run on a GPU at all. The notebook's own process runs Numba's simulator (``NUMBA_ENABLE_CUDASIM=1``,
fixed when numba.cuda was first imported), so the kernels are compiled in a subprocess without it: each kernel is
shipped by its source, with the values it uses (closure and globals: modules by name, scalars, tuples of them
(nested too), numba types, small arrays, device functions by their own source) as module-level definitions of its own
namespace. The compiler is numba's own, unpatched: what it refuses (e.g. two-argument ``min``/``max`` in numba 0.66
to 0.68, numba issue #10753) is refused here, with the line and the fix.

:func:`compile_for_gpu` returns one :class:`CudaReport` per kernel: ``"compiled"`` with the source lines doing
float64 arithmetic (from the IR's line information), ``"refused"`` with the compiler's reason and line,
``"cannot check"`` (the kernel reads a value from its closure or globals that cannot be sent to the compiler: a
finding for the learner, who can pass it as an argument), or ``"not checked"`` (the CUDA target cannot be imported,
the subprocess failed, the kernel has no source: nothing the learner wrote); the caller then falls back to another
check. Nothing is printed, to stdout or stderr.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import pickle
import re
import subprocess
import sys
import textwrap
import types as pytypes
from typing import Any, Callable, Optional

_TIMEOUT_S = 120.0
_MAX_ARRAY_BYTES = 1 << 16
_CACHE: dict = {}


@dataclasses.dataclass(frozen=True)
class CudaReport:
    """What Numba's CUDA compiler made of one kernel: ``status`` is "compiled", "refused", "cannot check" or "not
    checked"; ``float64_lines`` names each source line with float64 arithmetic; ``refusal`` the compiler's reason and
    line; ``reason`` why it was not checked, or (for "cannot check") which value could not be sent."""

    status: str
    float64_lines: tuple = ()
    refusal: str = ""
    reason: str = ""

    def findings(self) -> list:
        """One entry per problem, for a learner: each float64 line, the refusal, or the value that was not sent."""
        if self.status == "refused":
            return [f"(CUDA's compiler refuses your kernel{self.refusal})"]
        if self.status == "cannot check":
            return [f"(could not check your kernel with CUDA's compiler: {self.reason}; pass it to the kernel as an "
                    "argument)"]
        return [f"(float64 arithmetic{line})" for line in self.float64_lines]


class _Unshippable(Exception):
    """A value the subprocess cannot rebuild."""


def _is_device_function(value: object) -> bool:
    options = getattr(value, "targetoptions", None)
    return bool(getattr(value, "_device", False) or (isinstance(options, dict) and options.get("device")))


def _is_cuda_module(value: object) -> bool:
    if isinstance(value, pytypes.ModuleType):
        return value.__name__ == "numba.cuda" or value.__name__.endswith("numba.cuda")
    return type(value).__name__ in ("_TracingCuda", "FakeCUDAModule")


def _names_used(code: pytypes.CodeType) -> set:
    """Global names a code object (and the code nested in it) may look up."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, pytypes.CodeType):
            names |= _names_used(constant)
    return names


def _constant(value: object) -> bool:
    """A value numba can freeze into a kernel as a compile-time constant: a number, a string, a boolean, None, or a
    tuple of them (nested too)."""
    import numpy as np

    if isinstance(value, tuple):
        return all(_constant(item) for item in value)
    return value is None or isinstance(value, (bool, int, float, complex, str, np.generic))


def _describe_value(value: object) -> str:
    import numpy as np

    if isinstance(value, np.ndarray):
        return f"an array of {value.nbytes:,} bytes"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _value_spec(value: object, done: dict) -> tuple:
    """How the subprocess rebuilds one value; raises _Unshippable."""
    if _is_cuda_module(value):
        return ("module", "numba.cuda")
    if isinstance(value, pytypes.ModuleType):
        return ("module", value.__name__)
    if _is_device_function(value):
        function = getattr(value, "py_func", value)
        if not isinstance(function, pytypes.FunctionType):
            raise _Unshippable("a device function without a Python function")
        return ("device", _function_spec(function, done))
    import numpy as np
    from numba.core import types as nbtypes

    if isinstance(value, np.ndarray) and value.nbytes > _MAX_ARRAY_BYTES:
        raise _Unshippable(_describe_value(value))
    if _constant(value) or isinstance(value, (np.ndarray, nbtypes.Type)):
        try:
            return ("value", pickle.dumps(value))
        except Exception as error:  # noqa: BLE001 - any pickling failure makes it unshippable
            raise _Unshippable(f"{_describe_value(value)} ({error})") from error
    raise _Unshippable(_describe_value(value))


def _function_spec(function: pytypes.FunctionType, done: dict) -> int:
    """Register ``function`` (source, first line, namespace) in ``done``; return its number there."""
    if id(function) in done:
        return done[id(function)][0]
    number = len(done)
    done[id(function)] = (number, None)
    try:
        lines, first = inspect.getsourcelines(function)
    except (OSError, TypeError) as error:
        raise _Unshippable(f"no source for {function.__name__}") from error
    source = textwrap.dedent("".join(lines))
    namespace, skipped = {}, {}
    values = {}
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or ()):
        try:
            values[name] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    used = _names_used(function.__code__)
    for name in used:
        if name in function.__globals__ and name not in values:
            values[name] = function.__globals__[name]
    for name, value in values.items():
        try:
            namespace[name] = _value_spec(value, done)
        except _Unshippable as error:
            skipped[name] = str(error)
    spec = {"name": function.__name__, "source": source, "first": first, "namespace": namespace,
            "skipped": skipped, "device": False}
    done[id(function)] = (number, spec)
    return number


def _arg_spec(arg: object) -> tuple:
    import numba
    import numpy as np

    if isinstance(arg, np.ndarray):
        kind = numba.typeof(arg)
        return ("array", arg.dtype.str, arg.ndim, kind.layout)
    return ("value", pickle.dumps(arg))


def _payload(kernel: Callable, args: tuple) -> dict:
    """What the subprocess needs to compile one kernel; raises _Unshippable."""
    function = getattr(kernel, "py_func", kernel)
    if not isinstance(function, pytypes.FunctionType):
        raise _Unshippable(f"not a kernel: {type(kernel).__name__}")
    done: dict = {}
    root = _function_spec(function, done)
    functions = {number: spec for number, spec in done.values() if spec is not None}  # None: a function whose
    # source could not be read (its caller lists it as skipped)
    for number, spec in functions.items():
        spec["device"] = number != root
    try:
        arguments = [_arg_spec(arg) for arg in args]
    except Exception as error:  # noqa: BLE001 - an argument pickle cannot carry
        raise _Unshippable(str(error)) from error
    return {"root": root, "functions": functions, "args": arguments}


def compile_for_gpu(pairs: list) -> list:
    """Compile each ``(kernel, args)`` with Numba's real CUDA target (compute capability 7.5) in one subprocess;
    return one :class:`CudaReport` per pair, in order. Reports are cached by what decides them."""
    reports: list = [None] * len(pairs)
    todo, keys = {}, []
    for number, (kernel, args) in enumerate(pairs):
        try:
            payload = _payload(kernel, tuple(args))
        except _Unshippable as error:
            reports[number] = CudaReport("not checked", reason=f"cannot ship the kernel: {error}")
            keys.append(None)
            continue
        key = pickle.dumps(payload)
        keys.append(key)
        if key in _CACHE:
            reports[number] = _CACHE[key]
        else:
            todo[key] = payload
    if todo:
        results = _run_subprocess(list(todo.values()))
        for key, report in zip(todo, results):
            if report.status != "not checked":
                if len(_CACHE) > 256:
                    _CACHE.clear()
                _CACHE[key] = report
            todo[key] = report
        for number, key in enumerate(keys):
            if reports[number] is None:
                reports[number] = todo[key]
    return reports


def _run_subprocess(payloads: list) -> list:
    """Run this file as a script on the payloads; "not checked" for all where it fails."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("NUMBA_ENABLE_CUDASIM")}
    env["NUMBA_DISABLE_PERFORMANCE_WARNINGS"] = "1"
    try:
        done = subprocess.run([sys.executable, "-X", "faulthandler", os.path.abspath(__file__)],
                              input=pickle.dumps(payloads), capture_output=True, timeout=_TIMEOUT_S, env=env,
                              check=False)
        results = pickle.loads(done.stdout) if done.returncode == 0 else None
    except Exception:  # noqa: BLE001 - a timeout, a crash, unreadable output: the kernels are not checked
        results = None
    if not isinstance(results, list) or len(results) != len(payloads):
        return [CudaReport("not checked", reason="the compiler's subprocess failed")] * len(payloads)
    return [CudaReport(**result) for result in results]


# ------------------------------------------------- the subprocess -------------------------------------------------

_OPS = re.compile(r"= (?:fneg|fadd|fsub|fmul|fdiv|frem|fcmp)\b(?: \w+)*? double\b|= call (?:\w+ )*double @")
_FILE = "<gpucourse-cuda-{}>"


def _first_meaningful_line(error: BaseException) -> str:
    for line in str(error).splitlines():
        line = line.strip()
        if line and not line.startswith(("Failed in", "During:", "File ", "<source", "- ", "^")):
            if "build_list" in line:
                return "a list (a kernel cannot build one: use separate variables or a loop)"
            if line.startswith("Signature mismatch"):  # numba's message when a NumPy call has no CUDA version
                return "a call with no GPU version (NumPy calls that allocate, e.g. np.zeros, are refused: " \
                       "use cuda.local.array)"
            return line[:160]
    return type(error).__name__


def _error_line(error: BaseException) -> Optional[tuple]:
    """(file, line) of the learner's code where the compiler failed: from the message, else from the traceback's
    lowering and typing state."""
    found = re.findall(r'File "(<gpucourse-cuda-\d+>)", line (\d+)', str(error))
    if found:
        return found[-1][0], int(found[-1][1])
    best = None
    trace = error.__traceback__
    while trace is not None:
        local = trace.tb_frame.f_locals
        for candidate in (local.get("loc"), getattr(local.get("self"), "loc", None),
                          getattr(local.get("inst"), "loc", None)):
            filename = getattr(candidate, "filename", "")
            if isinstance(filename, str) and filename.startswith("<gpucourse-cuda-") and \
                    getattr(candidate, "line", None):
                best = (filename, candidate.line)
        trace = trace.tb_next
    return best


def _double_lines(ir: str) -> list:
    """(file, line) of every float64 operation in the IR whose location is in shipped source (numba's own
    helpers, e.g. int_power's branch for negative exponents, are not the learner's)."""
    found = []
    for module in re.split(r"^; ModuleID = ", ir, flags=re.M):
        meta = {number: body for number, body in re.findall(r"^!(\d+) = (?:distinct )?(.*)$", module, flags=re.M)}

        def file_of(scope: str, depth: int = 0) -> str:
            body = meta.get(scope, "")
            match = re.search(r"\bfile: !(\d+)", body)
            if match:
                name = re.search(r'filename: "([^"]*)"', meta.get(match.group(1), ""))
                return name.group(1) if name else ""
            parent = re.search(r"\bscope: !(\d+)", body)
            return file_of(parent.group(1), depth + 1) if parent and depth < 20 else ""

        for line in module.splitlines():
            if not _OPS.search(line):
                continue
            dbg = re.search(r"!dbg !(\d+)", line)
            location = meta.get(dbg.group(1), "") if dbg else ""
            number, scope = re.search(r"\bline: (\d+)", location), re.search(r"\bscope: !(\d+)", location)
            filename = file_of(scope.group(1)) if scope else ""
            if number and filename.startswith("<gpucourse-cuda-"):
                found.append((filename, int(number.group(1))))
    return found


def _compile_one(payload: dict, cuda: Any, compile_cuda: Any) -> dict:
    import linecache
    import pickle as _pickle

    import numba
    import numpy as np
    from numba import types

    built: dict = {}
    files: dict = {}

    def build(number: int) -> Any:
        if number in built:
            return built[number]
        spec = payload["functions"][number]
        filename = _FILE.format(number)
        source = spec["source"]
        lines = source.splitlines(True)
        import ast

        tree = ast.parse(source)
        blanked = list(lines)
        for node in tree.body:  # decorators off: the subprocess applies cuda.jit itself
            for decorator in getattr(node, "decorator_list", []):
                for index in range(decorator.lineno - 1, decorator.end_lineno):
                    blanked[index] = "\n"
        text = "".join(blanked)
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        files[filename] = (spec, lines)
        namespace: dict = {}
        built[number] = None
        for name, (kind, value) in spec["namespace"].items():
            if kind == "module":
                try:
                    namespace[name] = cuda if value == "numba.cuda" else __import__(value, fromlist=["_"])
                except Exception:  # noqa: BLE001 - left undefined: a NameError below means "cannot check"
                    spec["skipped"][name] = f"the module {value}, which the compiler's process cannot import"
            elif kind == "device":
                namespace[name] = build(value)
            else:
                namespace[name] = _pickle.loads(value)
        exec(compile(text, filename, "exec"), namespace)  # noqa: S102 - the learner's own kernel source
        function = namespace[spec["name"]]
        if spec["device"]:
            built[number] = cuda.jit(function, device=True, lineinfo=True)
        else:
            built[number] = function
        return built[number]

    skipped: dict = {}
    try:
        function = build(payload["root"])
        for spec in payload["functions"].values():
            skipped.update(spec["skipped"])
        argtypes = []
        for arg in payload["args"]:
            if arg[0] == "array":
                argtypes.append(types.Array(numba.from_dtype(np.dtype(arg[1])), arg[2], arg[3]))
            else:
                argtypes.append(numba.typeof(_pickle.loads(arg[1])))
    except Exception as error:  # noqa: BLE001
        return {"status": "not checked", "reason": f"cannot rebuild the kernel: {type(error).__name__}: {error}"}
    try:
        result = compile_cuda(function, types.void, tuple(argtypes), lineinfo=True, cc=(7, 5))
        ir = result.library.get_llvm_str()
    except Exception as error:  # noqa: BLE001 - the compiler refuses the kernel
        message = str(error)
        missing = [name for name in skipped if re.search(rf"\b{re.escape(name)}\b", message)]
        if missing:
            return {"status": "cannot check",
                    "reason": "; ".join(f"it reads `{name}` ({skipped[name]}) from outside the kernel (its closure "
                                        "or the notebook's globals), and that cannot be sent to the compiler"
                                        for name in missing)}
        where = _error_line(error)
        text = _line_text(where, files)
        target = re.match(r"\s*(\w+)\s*\[[^=]*\]\s*(?:[-+*/%&|^]|//|\*\*)?=(?!=)", text)
        spec = files[where[0]][0] if where is not None and where[0] in files else {}
        if re.search(r"(?<![\w.])(?:min|max)\s*\(", text) and "Signature mismatch" in message:
            reason = (f"numba {numba.__version__} cannot compile the built-in min or max in a kernel (numba issue "
                      "#10753): use an if, e.g. end = a if a < b else b")
        elif target and spec.get("namespace", {}).get(target.group(1), ("",))[0] == "value" and "setitem" in message:
            reason = (f"`{target.group(1)}` is an array from outside the kernel (its closure or a global): Numba "
                      "makes it a read-only constant on a GPU, so a kernel cannot write it. Write into an array "
                      "passed as an argument")
        else:
            reason = _first_meaningful_line(error)
        return {"status": "refused", "refusal": _describe(where, files) + f": {reason}"}
    entries = []
    for where in sorted(set(_double_lines(ir)), key=lambda item: (item[0] != _FILE.format(payload["root"]), item)):
        entry = _describe(where, files)
        if entry not in entries:
            entries.append(entry)
    return {"status": "compiled", "float64_lines": tuple(entries)}


def _line_text(where: Optional[tuple], files: dict) -> str:
    """The learner's source line at ``where``; "" when unknown."""
    if where is None or where[0] not in files:
        return ""
    _, lines = files[where[0]]
    return lines[where[1] - 1] if 0 < where[1] <= len(lines) else ""


def _describe(where: Optional[tuple], files: dict) -> str:
    """", line 15: total += x" (the learner's numbering), naming a device function; "" when unknown."""
    if where is None or where[0] not in files:
        return ""
    spec, lines = files[where[0]]
    text = lines[where[1] - 1].strip() if 0 < where[1] <= len(lines) else ""
    text = re.sub(r"\s+#.*$", "", text)  # the code, without its comment
    place = f" in device function {spec['name']}" if spec["device"] else ""
    return f"{place}, line {spec['first'] + where[1] - 1}" + (f": {text[:80]}" if text else "")


def _worker() -> None:
    import warnings

    payloads = pickle.loads(sys.stdin.buffer.read())
    warnings.simplefilter("ignore")
    try:
        from numba import cuda
        import numba.cuda.dispatcher as dispatcher
        from numba.cuda.compiler import compile_cuda

        class _Device:  # device functions ask for the current device's compute capability: no GPU needed
            compute_capability = (7, 5)

        dispatcher.get_current_device = lambda: _Device()
    except Exception as error:  # noqa: BLE001 - a numba without the CUDA target
        results = [{"status": "not checked", "reason": f"numba's CUDA target: {error}"} for _ in payloads]
    else:
        results = []
        for payload in payloads:
            try:
                results.append(_compile_one(payload, cuda, compile_cuda))
            except Exception as error:  # noqa: BLE001
                results.append({"status": "not checked", "reason": f"{type(error).__name__}: {error}"})
    sys.stdout.buffer.write(pickle.dumps(results))
    sys.stdout.flush()


if __name__ == "__main__":
    _worker()
