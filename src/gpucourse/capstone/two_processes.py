"""Lesson 17's optional track B: the capstone's CNN trained by the learner's own DDP script under real ``torchrun``.

:func:`train_with_torchrun` saves the training images in lesson 14's file format (``torch.save`` of a dict: ``x``,
float32 (N, C, H, W) in [0, 1]; ``y``, the N labels as int64), starts ``python -m torch.distributed.run --standalone
--nproc_per_node=P script --data DATA --out OUT --batch-per-rank B --lr LR --passes K`` with lesson 14's launcher
(:mod:`gpucourse.parallel.torchrun_launch`: its time limit, its stuck-job detector and its clean-up, which kills
every process the job started), times the job, loads the weights rank 0 saved into ``small_cnn`` and measures them
on the test images. The script decides its backend, as in lesson 14: NCCL when the node has a GPU per process,
else gloo on the CPU. Ungraded: no answer of lesson 14 lives here.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from gpucourse._validate import positive_int, positive_number
from gpucourse.capstone.datasets import ImageData
from gpucourse.capstone.models import small_cnn
from gpucourse.capstone.training import evaluate


@dataclass(frozen=True)
class TorchrunTraining:
    """What one :func:`train_with_torchrun` job did."""

    procs: int
    seconds: float  # wall time of the whole job: starting the processes, joining the group, training, saving
    accuracy: float | None  # test accuracy of the weights rank 0 saved (None: none saved, or they did not load)
    codes: list[int]  # torchrun's exit code (one node)
    failure: str  # '' when the job ended cleanly and its weights loaded, else one line saying what went wrong
    output: str  # what torchrun and the ranks printed

    def summary(self) -> str:
        """One line: processes, wall time, accuracy, or the failure."""
        if self.failure:
            return f"{self.procs} processes: {self.failure}"
        return (f"{self.procs} processes under torchrun: {self.seconds:.1f} s wall time (start-up included), "
                f"test accuracy {self.accuracy:.1%}")


def _cores() -> int:
    """CPU cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def train_with_torchrun(script: str | os.PathLike, data: ImageData, *, procs: int = 2, batch_per_rank: int = 64,
                        lr: float = 3e-3, passes: int = 3, timeout_s: float = 600.0) -> TorchrunTraining:
    """Run ``script`` under ``torchrun`` on one node with ``procs`` processes to train ``small_cnn`` on ``data``'s
    training images; return the job's wall seconds, the test accuracy of the weights rank 0 saved to ``--out``, the
    exit codes and a failure line. The job is killed, with every process it started, after ``timeout_s`` or once
    all its processes sit idle for 20 s (a rank waiting for a peer that never comes). Each process gets its share
    of the CPU cores (OMP_NUM_THREADS)."""
    import torch

    from gpucourse.parallel.torchrun_launch import job_failure, run_torchruns, torchrun_command
    from gpucourse.progress import running

    if not isinstance(script, (str, os.PathLike)):
        raise TypeError(f"script must be a path (str or pathlib.Path), got {type(script).__name__}")
    path = Path(script)
    if not path.is_file():
        raise FileNotFoundError(f"script {str(path)!r} not found: write it first (see the cell above)")
    if not isinstance(data, ImageData):
        raise TypeError(f"data must be an ImageData (capstone.load_data), got {type(data).__name__}")
    procs, batch_per_rank = positive_int("procs", procs), positive_int("batch_per_rank", batch_per_rank)
    lr, passes = positive_number("lr", lr), positive_int("passes", passes)
    timeout_s = positive_number("timeout_s", timeout_s)
    with tempfile.TemporaryDirectory(prefix="capstone-torchrun-") as folder:
        data_file, out = Path(folder) / "train.pt", Path(folder) / "weights.pt"
        torch.save({"x": torch.from_numpy(data.train_x), "y": torch.from_numpy(data.train_y).long()}, data_file)
        arguments = ["--data", str(data_file), "--out", str(out), "--batch-per-rank", str(batch_per_rank),
                     "--lr", repr(lr), "--passes", str(passes)]
        command = torchrun_command(path.resolve(), 1, procs, "", "", arguments)
        package_root = str(Path(__file__).resolve().parents[2])  # the gpucourse this notebook imported, first
        python_path = os.pathsep.join([package_root] + [entry for entry in os.environ.get("PYTHONPATH", "")
                                                        .split(os.pathsep) if entry])
        env = {**os.environ, "OMP_NUM_THREADS": str(max(1, _cores() // procs)), "PYTHONUNBUFFERED": "1",
               "PYTHONPATH": python_path}
        log = Path(folder) / "torchrun.log"
        with running(f"training with your script under torchrun, {procs} processes"):
            processes, stopped, start = run_torchruns([command], [log], [env], path.resolve().parent, timeout_s)
        seconds = time.monotonic() - start
        output = log.read_text(encoding="utf-8", errors="replace")
        codes = [process.returncode for process in processes]
        failure = job_failure(codes, [output], stopped, seconds, what="job")
        accuracy = None
        if not failure and not out.is_file():
            failure = "the job ended cleanly but saved nothing to --out: rank 0 must torch.save its state_dict there"
        elif not failure:
            model = small_cnn(data.image_size, num_classes=data.num_classes, in_channels=data.channels)
            try:
                state = torch.load(out, map_location="cpu", weights_only=True)
                model.load_state_dict({name.removeprefix("module."): value for name, value in state.items()})
            except Exception as error:  # noqa: BLE001  (not a state_dict, or not small_cnn's: the failure says so)
                first = str(error).strip().splitlines()[0]
                failure = (f"the saved weights do not load into capstone.small_cnn({data.image_size}, "
                           f"in_channels={data.channels}): {first}")
            else:
                accuracy = evaluate(model, data.test_x, data.test_y, "cpu")
    return TorchrunTraining(procs, seconds, accuracy, codes, failure, output)
