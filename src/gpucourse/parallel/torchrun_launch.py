"""A training script launched by ``torchrun`` (lesson 14's Exercise 3): run it on one or several simulated nodes of
this machine, and compute the weights it must end with.

``torchrun`` starts one process per rank and hands each its place in the job through environment variables (RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT). :func:`run_script` runs a learner's script
exactly that way, with ``python -m torch.distributed.run`` (what the ``torchrun`` command runs): one node with
``--standalone``, or several nodes, one ``torchrun`` each, meeting at a c10d rendezvous on this machine, so that a
script that confuses LOCAL_RANK with RANK, or hard-codes the world size, shows it. Each simulated node gets its own
``--out`` path, as real nodes have their own disks: a script that saves on every node's LOCAL_RANK 0 writes two
files. With ``simulate_gpus=True`` every node pretends to have one GPU per process, with ``simulate_gpus=k`` k GPUs
(:mod:`.fake_cuda`): the job still trains with gloo on the CPU, and :meth:`ScriptRun.gpu_use` says which GPU each rank
chose and which backend it asked for. :func:`script_reference` computes, in this process, the state DDP's rank 0 must end with.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from gpucourse._validate import positive_int, positive_number
from gpucourse.progress import running
from gpucourse.parallel import fake_cuda
from gpucourse.parallel.workers import LOOPBACK, free_port

SCRIPT_HIDDEN = 16  # hidden width of the script's network (bn_mlp)
OFF_LIMITS_ENV = "GPUCOURSE_OFF_LIMITS"
"""How :func:`run_script` tells the processes torchrun starts which course helpers the grading cell made off-limits
(:func:`gpucourse.checks.off_limits`): they are blocked there as soon as the script imports ``gpucourse.parallel``."""


def block_what_the_launcher_blocked() -> None:
    """In a process started by :func:`run_script`: block the helpers that were off-limits where it was called."""
    text = os.environ.get(OFF_LIMITS_ENV)
    if text:
        from gpucourse.checks import block_in_worker

        block_in_worker([(tuple(helpers), exercise) for helpers, exercise in json.loads(text)], ())


def bn_mlp(features: int, hidden: int = SCRIPT_HIDDEN, seed: int = 0):
    """Linear -> BatchNorm1d -> ReLU -> Linear(hidden, 1), its weights drawn from ``seed``: the script's network.

    BatchNorm normalises over the batch a rank sees, so the weights after DDP depend on which examples each rank
    got: a script whose ranks all train on the same examples ends elsewhere."""
    import torch

    features, hidden = positive_int("features", features), positive_int("hidden", hidden)
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(features, hidden), torch.nn.BatchNorm1d(hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, 1))


@dataclass(frozen=True)
class ScriptCase:
    """One training job for the script: a dataset of ``samples`` rows, the per-rank batch, the learning rate."""

    samples: int = 48
    features: int = 6
    batch_per_rank: int = 4
    lr: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        positive_int("samples", self.samples)
        positive_int("features", self.features)
        positive_int("batch_per_rank", self.batch_per_rank)
        positive_number("lr", self.lr)

    def data(self) -> dict:
        """The dataset the script loads with ``torch.load``: {'x': samples x features, 'y': samples x 1}."""
        import torch

        generator = torch.Generator().manual_seed(1000 + self.seed)
        x = torch.randn(self.samples, self.features, generator=generator)
        y = torch.randn(self.samples, 1, generator=generator)
        return {"x": x, "y": y}

    def label(self, world_size: int) -> str:
        """The case in words."""
        return (f"{self.samples} examples of {self.features} features, {self.batch_per_rank} per rank per step on "
                f"{world_size} ranks, lr {self.lr:g}")


@dataclass
class ScriptRun:
    """What one launch did: each node's exit code, output and the saved weights."""

    case: ScriptCase
    nodes: int
    procs_per_node: int
    codes: list[int]
    outputs: list[str]
    weights: dict | None  # the state_dict saved (the first node's that wrote one) as numpy arrays, the 'module.'
                          # prefix dropped; None if no node wrote one
    seconds: float
    commands: list[list[str]]  # each node's torchrun command line
    stopped: str = ""  # why the job was killed: '' (it ended by itself), 'timeout' or 'idle' (every process waiting)
    written: tuple[int, ...] = ()  # the nodes whose --out file exists after the job (each node has its own path)
    prefixed: bool = False  # whether the saved keys began with 'module.' (DDP's wrapper saved, not model.module)
    gpu_records: dict[int, list[dict]] | None = None  # simulate_gpus: each rank's recorded calls (fake_cuda), by RANK
    gpus_per_node: int = 0  # the GPUs each node pretended to have (0: none simulated)

    def gpu_use(self) -> dict[int, dict]:
        """With simulated GPUs, by RANK: its LOCAL_RANK, the CUDA devices it used (set_device, DDP's device_ids,
        init_process_group's device_id, tensors and modules moved) and the backend it asked for ('' if none)."""
        if self.gpu_records is None:
            raise ValueError("the job ran without simulated GPUs: run_script(..., simulate_gpus=True)")
        use = {}
        for rank, events in sorted(self.gpu_records.items()):
            start = next((e for e in events if e["event"] == "start"), {})
            devices = {e["index"] for e in events if e.get("index") is not None}
            devices |= {e["device_id"] for e in events if e.get("device_id") is not None}
            devices |= {i for e in events for i in (e.get("device_ids") or []) if i is not None}
            backend = next((str(e["backend"]) for e in events if e["event"] == "init_process_group"), "")
            use[rank] = {"local_rank": start.get("local_rank"), "devices": sorted(devices), "backend": backend}
        return use

    @property
    def world_size(self) -> int:
        """Ranks in the job."""
        return self.nodes * self.procs_per_node

    @property
    def layout(self) -> str:
        """The job's shape in words."""
        return f"{self.nodes} node(s) x {self.procs_per_node} process(es)"

    def failure(self) -> str:
        """'' if every node exited cleanly, else how it ended and the first error a rank raised."""
        return job_failure(self.codes, self.outputs, self.stopped, self.seconds)

    def first_error(self) -> str:
        """The first exception a rank raised, with the line of the script it came from."""
        return first_error(self.outputs)


def job_failure(codes: list[int], outputs: list[str], stopped: str, seconds: float, what: str = "node") -> str:
    """'' if every torchrun exited with code 0, else one line: how the job ended (``stopped``: 'timeout' or 'idle',
    from :func:`run_torchruns`) and the first error a rank raised. ``what`` names a torchrun ('node')."""
    if stopped == "idle":
        return (f"stopped after {seconds:.0f} s: every process sat idle for {IDLE_LIMIT_S:.0f} s (a rank "
                f"waiting for a peer that never comes?); {first_error(outputs)}")
    if stopped:
        return f"still running after the time limit (a rank waiting for the others?); {first_error(outputs)}"
    for index, code in enumerate(codes):
        if code != 0:
            return f"{what} {index}'s torchrun exited with code {code}; {first_error(outputs)}"
    return ""


def first_error(outputs: list[str]) -> str:
    """The first exception a rank raised in torchruns' ``outputs``, with the line of the script it came from
    (torchrun's own summary of the failure, ChildFailedError, is left out)."""
    for text in outputs:
        lines = [_RANK_PREFIX.sub("", line) for line in text.splitlines()]
        for index, line in enumerate(lines):
            if _ERROR_LINE.match(line) and "ChildFailedError" not in line:
                where = next((lines[i].strip() for i in range(index - 1, -1, -1)
                              if lines[i].lstrip().startswith("File ")), "")
                return f"first error: {line.strip()}" + (f" (at {where})" if where else "")
    return "no error message in its output"


_RANK_PREFIX = re.compile(r"^\[(?:rank|default)\d+\]:\s?")  # torch prefixes a worker's lines once its group exists
_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b")


def torchrun_command(script: Path, nodes: int, procs: int, endpoint: str, run_id: str,
                      arguments: list[str], node: int = 0) -> list[str]:
    """``python -m torch.distributed.run`` (the torchrun command) for one node of the job. No ``--node_rank``: with
    the c10d rendezvous torchrun ignores it, and the rendezvous numbers the nodes (node 0 may not host RANK 0).
    Node 0's torchrun hosts the rendezvous store (``is_host``): on one machine every node's address matches the
    endpoint, and whichever bound the port first would host it."""
    command = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={procs}"]
    if nodes == 1:
        command.append("--standalone")
    else:
        command += [f"--nnodes={nodes}", "--rdzv_backend=c10d", f"--rdzv_endpoint={endpoint}",
                    f"--rdzv_id={run_id}", f"--rdzv_conf=is_host={int(node == 0)}"]
    return command + [str(script)] + arguments


def node_gpus(node: int, nodes: int, procs: int, available: int) -> str | None:
    """CUDA_VISIBLE_DEVICES for one simulated node: None (unchanged) for a single node; with several nodes on one
    machine, a disjoint set of GPUs per node when there are enough, else none (gloo on the CPU), since NCCL refuses
    two ranks on one GPU."""
    if nodes == 1:
        return None
    if available >= nodes * procs:
        return ",".join(str(node * procs + index) for index in range(procs))
    return ""


def _stop(process: subprocess.Popen) -> None:
    """Kill a torchrun and every process it started (its own session), and wait until they are gone (a killed
    process lives on for a moment: gone means ended or a zombie)."""
    import psutil

    try:  # freeze the session first, so that no process is started between listing and killing
        os.killpg(process.pid, signal.SIGSTOP)
    except (ProcessLookupError, PermissionError):
        pass
    try:  # torchrun may start its ranks in sessions of their own: list them by parentage too
        members = psutil.Process(process.pid).children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        members = []
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for member in members:
        try:
            member.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    process.wait()
    deadline = time.monotonic() + 5.0
    for member in members:
        while time.monotonic() < deadline:
            try:
                if member.status() == psutil.STATUS_ZOMBIE:
                    break
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                break
            time.sleep(0.01)


IDLE_LIMIT_S = 20.0  # a job whose processes all but sleep this long is stuck: a rank waiting for a peer that never comes
IDLE_CPU_PER_S = 0.05  # "all but sleep": fewer CPU seconds per second than this, summed over the job's processes
                       # (a stuck 2 x 2 job uses about 0.02: torchrun's agents polling; a slow one, on a loaded machine,
                       # still gets a share of a core)


def _job_cpu_seconds(processes: list[subprocess.Popen], seen: dict[int, float]) -> float:
    """CPU seconds used so far by the torchruns and every process they started (``seen`` keeps the last figure of each
    process, so one that ended still counts)."""
    import psutil

    for process in processes:
        try:
            root = psutil.Process(process.pid)
            for member in [root] + root.children(recursive=True):
                times = member.cpu_times()
                seen[member.pid] = times.user + times.system
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return sum(seen.values())


def run_torchruns(commands: list[list[str]], logs: list[Path], envs: list[dict[str, str]], cwd: Path,
               timeout_s: float) -> tuple[list[subprocess.Popen], str, float]:
    """Start one torchrun per node (each in its own session) and wait for all of them; kill every one left, with
    every process it started, when the time limit is reached or when the whole job has sat idle for IDLE_LIMIT_S. Return the processes, how the wait ended ('' when all
    exited, 'timeout' or 'idle'), and the start time."""
    start, processes, idle_limit_s = time.monotonic(), [], IDLE_LIMIT_S
    for command, log, env in zip(commands, logs, envs):
        with open(log, "wb") as handle:
            processes.append(subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=handle,
                                              stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True))
    seen: dict[int, float] = {}
    history: list[tuple[float, float]] = []  # (seconds since start, job CPU seconds)
    stopped = ""
    try:
        while any(process.poll() is None for process in processes):
            elapsed = time.monotonic() - start
            if elapsed >= timeout_s:
                stopped = "timeout"
                break
            history.append((elapsed, _job_cpu_seconds(processes, seen)))
            window = [cpu for when, cpu in history if when >= elapsed - idle_limit_s]
            if elapsed >= idle_limit_s and history[0][0] <= elapsed - idle_limit_s and \
                    window[-1] - window[0] < IDLE_CPU_PER_S * idle_limit_s:
                stopped = "idle"
                break
            time.sleep(0.5)
    finally:  # also when the wait itself is interrupted (a notebook's stop button): nothing left running, not
        for process in processes:  # even a worker a torchrun that exited left behind in its session
            _stop(process)
    return processes, stopped, start


RENDEZVOUS_LOST = ("DistNetworkError", "DistStoreError", "RendezvousConnectionError")
"""Errors of the connection to the rendezvous store between the simulated nodes' torchruns: the machine's doing, not
the script's, when they are the only error (a job that shows one is run once more)."""


def run_script(script: str | os.PathLike, case: ScriptCase, *, nodes: int = 1, procs_per_node: int = 2,
               timeout_s: float = 300.0, simulate_gpus: bool | int = False) -> ScriptRun:
    """Run ``script`` as ``torchrun`` would on ``nodes`` nodes of ``procs_per_node`` processes (all on this machine),
    with ``--data DATA --out OUT --batch-per-rank B --lr LR``; return what it did. The job is stopped after
    ``timeout_s``, or sooner when all its processes sit idle for 20 s (stuck), never because the machine is slow;
    a job that lost its rendezvous store, or failed without any error message (on a loaded machine a gloo job
    sometimes does), runs once more. With ``simulate_gpus`` each node hides its real GPUs and pretends to have one
    per process (True) or ``simulate_gpus`` of them (:mod:`.fake_cuda`); the job's GPU calls are recorded
    (:meth:`ScriptRun.gpu_use`)."""
    if simulate_gpus is True:
        simulate_gpus = positive_int("procs_per_node", procs_per_node)
    elif simulate_gpus is not False:
        simulate_gpus = positive_int("simulate_gpus", simulate_gpus)
    options = dict(nodes=nodes, procs_per_node=procs_per_node, timeout_s=timeout_s, simulate_gpus=int(simulate_gpus))
    job = _run_script_once(script, case, **options)
    failure = job.failure()
    if failure and not job.stopped and (any(error in failure for error in RENDEZVOUS_LOST)
                                        or "no error message in its output" in failure):
        job = _run_script_once(script, case, **options)
    return job


def _run_script_once(script: str | os.PathLike, case: ScriptCase, *, nodes: int, procs_per_node: int,
                     timeout_s: float, simulate_gpus: int) -> ScriptRun:
    """One launch of :func:`run_script`."""
    import numpy as np
    import torch

    from gpucourse.checks import active_off_limits

    path = Path(script)
    if not path.is_file():
        raise FileNotFoundError(f"script {str(path)!r} not found: run the cell that writes it (%%writefile) first")
    if not isinstance(case, ScriptCase):
        raise TypeError(f"case must be a ScriptCase, got {type(case).__name__}")
    nodes, procs = positive_int("nodes", nodes), positive_int("procs_per_node", procs_per_node)
    timeout_s = positive_number("timeout_s", timeout_s)
    with tempfile.TemporaryDirectory(prefix="torchrun-") as folder:
        data = Path(folder) / "data.pt"
        torch.save(case.data(), data)
        # Real nodes have their own disks: each simulated node gets its own --out path (one file per node that saves)
        outs = [Path(folder) / f"node{node}" / "weights.pt" for node in range(nodes)]
        for out in outs:
            out.parent.mkdir()
        arguments = [["--data", str(data), "--out", str(out), "--batch-per-rank", str(case.batch_per_rank),
                      "--lr", repr(case.lr)] for out in outs]
        endpoint, run_id = f"{LOOPBACK}:{free_port()}", uuid.uuid4().hex[:12]
        package_root = str(Path(__file__).resolve().parents[2])  # the gpucourse this notebook imported, first
        python_path = os.pathsep.join([package_root] + [entry for entry in os.environ.get("PYTHONPATH", "")
                                                        .split(os.pathsep) if entry])
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "PYTHONPATH": python_path,
               OFF_LIMITS_ENV: json.dumps(active_off_limits())}
        gpus = torch.cuda.device_count()
        envs = [env if node_gpus(node, nodes, procs, gpus) is None
                else {**env, "CUDA_VISIBLE_DEVICES": node_gpus(node, nodes, procs, gpus)} for node in range(nodes)]
        records = Path(folder) / "gpu_records"
        if simulate_gpus:  # the fake GPUs' sitecustomize first on the workers' path; the real GPUs hidden
            shim = Path(folder) / "simulated_gpus"
            shim.mkdir()
            records.mkdir()
            shutil.copyfile(Path(__file__).with_name("fake_cuda.py"), shim / "sitecustomize.py")
            envs = [{**env, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": os.pathsep.join([str(shim), python_path]),
                     fake_cuda.RECORD_ENV: str(records), fake_cuda.COUNT_ENV: str(simulate_gpus)} for env in envs]
        logs = [Path(folder) / f"node{node}.log" for node in range(nodes)]
        commands = [torchrun_command(path.resolve(), nodes, procs, endpoint, run_id, arguments[node], node)
                    for node in range(nodes)]
        with running(f"running your script under torchrun on {nodes} node(s) x {procs} process(es)"):
            processes, stopped, start = run_torchruns(commands, logs, envs, path.resolve().parent, timeout_s)
        seconds = time.monotonic() - start
        outputs = [log.read_text(encoding="utf-8", errors="replace") for log in logs]
        weights, prefixed = None, False
        written = tuple(node for node, out in enumerate(outs) if out.is_file())
        if written:
            state = torch.load(outs[written[0]], map_location="cpu", weights_only=True)
            prefixed = any(name.startswith("module.") for name in state)
            weights = {name.removeprefix("module."): np.asarray(value.detach().cpu().numpy())
                       for name, value in state.items()}
        gpu_records = fake_cuda.read_records(records) if simulate_gpus else None
    if any("NotImplementedError" in text for text in outputs):
        raise NotImplementedError(f"{path.name} raised NotImplementedError in its processes: write it first")
    return ScriptRun(case, nodes, procs, [process.returncode for process in processes], outputs, weights, seconds,
                     commands, stopped, written, prefixed, gpu_records, simulate_gpus)


def sampler_shards(samples: int, world_size: int) -> list[list[int]]:
    """Each rank's examples under ``DistributedSampler(dataset, shuffle=False)`` (drop_last=False): the indices padded
    to a multiple of the world size by repeating the first ones, then rank r takes r, r + N, r + 2N, ..."""
    samples, world_size = positive_int("samples", samples), positive_int("world_size", world_size)
    total = -(-samples // world_size) * world_size
    indices = list(range(samples))
    indices += (indices * -(-(total - samples) // samples))[:total - samples]
    return [indices[rank:total:world_size] for rank in range(world_size)]


def script_reference(case: ScriptCase, world_size: int) -> dict:
    """The state_dict DDP's rank 0 must end with: each rank takes ``DistributedSampler(shuffle=False)``'s examples
    (:func:`sampler_shards`) in batches of ``batch_per_rank`` (the last one possibly smaller), BatchNorm over its own
    batch, the gradients averaged over the ranks, one SGD step per batch. The BatchNorm buffers (running mean and
    variance, batches seen) are rank 0's: DDP broadcasts rank 0's at every forward, and rank 0 updates them from its
    own batches only. Computed here, in one process."""
    import numpy as np
    import torch

    if not isinstance(case, ScriptCase):
        raise TypeError(f"case must be a ScriptCase, got {type(case).__name__}")
    world_size = positive_int("world_size", world_size)
    shards = sampler_shards(case.samples, world_size)
    if len(shards[0]) % case.batch_per_rank == 1:
        raise ValueError(f"{case.samples} examples on {world_size} ranks leave each rank a last batch of 1 example, "
                         f"which BatchNorm refuses in training: choose another batch_per_rank")
    data = case.data()
    model = bn_mlp(case.features)
    params = [p for p in model.parameters()]
    buffers = [b for b in model.buffers()]
    for start in range(0, len(shards[0]), case.batch_per_rank):
        total = [torch.zeros_like(p) for p in params]
        for rank, shard in enumerate(shards):
            rows = shard[start:start + case.batch_per_rank]
            kept = [b.clone() for b in buffers]
            loss = torch.nn.functional.mse_loss(model(data["x"][rows]), data["y"][rows])
            for t, g in zip(total, torch.autograd.grad(loss, params)):
                t += g
            if rank:  # only rank 0's forward passes update the buffers rank 0 saves
                with torch.no_grad():
                    for b, k in zip(buffers, kept):
                        b.copy_(k)
        with torch.no_grad():
            for p, t in zip(params, total):
                p -= case.lr * t / world_size
    return {name: np.asarray(value.detach().numpy()) for name, value in model.state_dict().items()}
