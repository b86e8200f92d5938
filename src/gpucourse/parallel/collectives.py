"""Collectives on a simulated network: a ring all-reduce and a parameter server, every message logged.

Each node runs its program in a thread with its own ``send`` and ``recv``; the network logs every message, detects
deadlocks and raises the first error of any node. Taught in 14_data_parallelism.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpucourse._validate import non_negative_int, one_of, positive_int, positive_number


def worker_buffers(n_workers: int, size: int, seed: int = 0, dtype: str = "float32") -> list:
    """One random gradient vector of ``size`` numbers per simulated worker (numpy, reproducible from ``seed``)."""
    import numpy as np

    n_workers, size = positive_int("n_workers", n_workers), positive_int("size", size)
    non_negative_int("seed", seed)
    one_of("dtype", dtype, ("float32", "float64"))
    rng = np.random.default_rng(seed)
    return [rng.normal(size=size).astype(dtype) for _ in range(n_workers)]


@dataclass(frozen=True)
class RingStep:
    """One step of a ring all-reduce: its phase, the (sender, receiver, chunk) transfers, and who holds what after it."""

    phase: str
    step: int
    transfers: tuple[tuple[int, int, int], ...]
    holdings: tuple[tuple[frozenset, ...], ...]


def ring_trace(n_workers: int) -> list[RingStep]:
    """Which worker's contributions each worker holds, chunk by chunk, before and after every step of the ring."""
    n = positive_int("n_workers", n_workers)
    holdings = [[frozenset({worker}) for _ in range(n)] for worker in range(n)]
    trace = [RingStep("start", 0, (), tuple(map(tuple, holdings)))]
    for phase in ("reduce-scatter", "all-gather"):
        for step in range(n - 1):
            offset = -step if phase == "reduce-scatter" else 1 - step
            transfers = tuple((i, (i + 1) % n, (i + offset) % n) for i in range(n))
            before = [row[:] for row in holdings]  # every worker sends at the same time
            for sender, receiver, chunk in transfers:
                if phase == "reduce-scatter":
                    holdings[receiver][chunk] = before[receiver][chunk] | before[sender][chunk]
                else:
                    holdings[receiver][chunk] = before[sender][chunk]
            trace.append(RingStep(phase, step + 1, transfers, tuple(map(tuple, holdings))))
    return trace


def plot_ring_steps(n_workers: int = 4):
    """Draw every step of a ring all-reduce over ``n_workers`` (2-8): who sends which chunk, who holds what."""
    import matplotlib.pyplot as plt
    import numpy as np

    n = positive_int("n_workers", n_workers)
    if not 2 <= n <= 8:
        raise ValueError(f"n_workers must be between 2 and 8 for a readable picture, got {n}")
    trace = ring_trace(n)
    fig, axes = plt.subplots(2, n, figsize=(2.3 * n + 0.6, 6.2), squeeze=False, layout="constrained")
    cmap = plt.get_cmap("Blues")
    panels = [(0, 0)] + [(0, k) for k in range(1, n)] + [(1, k) for k in range(1, n)]
    for (row, col), entry in zip(panels, trace):
        ax = axes[row][col]
        counts = np.array([[len(cell) for cell in worker] for worker in entry.holdings])
        ax.imshow(counts, cmap=cmap, vmin=0, vmax=n * 1.25)
        for worker in range(n):
            for chunk in range(n):
                cell = entry.holdings[worker][chunk]
                label = "all" if len(cell) == n else "+".join(str(w) for w in sorted(cell))
                ax.text(chunk, worker, label, ha="center", va="center", fontsize=8 if n <= 5 else 6,
                        color="white" if len(cell) == n else "black")
        for _, receiver, chunk in entry.transfers:
            ax.add_patch(plt.Rectangle((chunk - 0.5, receiver - 0.5), 1, 1, fill=False, edgecolor="tab:orange",
                                       linewidth=2.2))
        ax.set_xticks(range(n), [f"c{c}" for c in range(n)], fontsize=7)
        ax.set_yticks(range(n), [f"w{w}" for w in range(n)], fontsize=7)
        if entry.phase == "start":
            ax.set_title("start: each worker\nholds its own gradient", fontsize=8)
        else:
            moves = ", ".join(f"{s}→{r}:c{c}" for s, r, c in entry.transfers[:4]) + (" …" if n > 4 else "")
            ax.set_title(f"{entry.phase} {entry.step}/{n - 1}\n{moves}", fontsize=8)
    legend = axes[1][0]
    legend.axis("off")
    legend.text(0.0, 0.5, "rows: workers w0…\ncolumns: chunks c0…\ncell: whose numbers it sums\n"
                          "orange: just received\n'all': fully reduced", fontsize=8, va="center")
    fig.suptitle(f"Ring all-reduce over {n} workers: {n - 1} reduce-scatter steps, then {n - 1} all-gather steps\n"
                 f"in every step each worker sends one chunk (1/{n} of the data) to its right-hand neighbour",
                 fontsize=9)
    return fig


# --------------------------------------------------------------------------- simulated networks: ring and parameter server

class NetworkError(RuntimeError):
    """The programs on a simulated network deadlocked, timed out, or used it wrongly."""


@dataclass(frozen=True)
class Message:
    """One message on a simulated network: who sent it to whom, the sender's message number, its bytes and payload."""

    sender: object
    receiver: object
    index: int
    nbytes: int
    payload: object


@dataclass(frozen=True)
class NetworkRun:
    """What the programs on a simulated network returned (by node) and every message they sent."""

    results: dict
    messages: tuple[Message, ...]
    undelivered: tuple[Message, ...]

    def sent_by(self, node: object) -> list[Message]:
        """The messages ``node`` sent, in the order it sent them."""
        return sorted((m for m in self.messages if m.sender == node), key=lambda m: m.index)

    def bytes_sent(self, node: object) -> int:
        """Bytes ``node`` sent."""
        return sum(m.nbytes for m in self.messages if m.sender == node)

    def bytes_received(self, node: object) -> int:
        """Bytes sent to ``node`` (delivered or not)."""
        return sum(m.nbytes for m in self.messages if m.receiver == node)

    def traffic(self, node: object) -> int:
        """Bytes through ``node``'s link: sent plus received."""
        return self.bytes_sent(node) + self.bytes_received(node)


class _Network:
    """Mailboxes of a simulated network, one FIFO queue per (sender, receiver) link, and the deadlock watch."""

    def __init__(self, nodes: list, links: set | None, timeout_s: float) -> None:
        """Empty mailboxes for ``nodes``; ``links`` (None: all pairs) are the (sender, receiver) pairs allowed."""
        import collections

        self.nodes, self.links, self.timeout_s = nodes, links, timeout_s
        self.queues: dict = collections.defaultdict(collections.deque)
        self.condition = threading.Condition()
        self.waiting: dict = {}
        self.done: set = set()
        self.failed: list[tuple[float, object, BaseException]] = []
        self.messages: list[Message] = []
        self.counts: dict = collections.Counter()
        self.deadline = time.monotonic() + timeout_s

    def send(self, sender: object, receiver: object, array: object) -> None:
        """Queue a copy of ``array`` from ``sender`` to ``receiver`` (a real network copies too) and log it."""
        import numpy as np

        if not isinstance(array, np.ndarray):
            raise TypeError(f"array must be a numpy array (what travels on the network), got {type(array).__name__}")
        if receiver not in self.nodes:
            raise NetworkError(f"{sender!r} sent to {receiver!r}, which is not a node of this network "
                               f"(nodes: {self.nodes})")
        if self.links is not None and (sender, receiver) not in self.links:
            raise NetworkError(f"there is no link from {sender!r} to {receiver!r} in this network")
        payload = np.array(array, copy=True)
        with self.condition:
            message = Message(sender, receiver, self.counts[sender], int(payload.nbytes), payload)
            self.counts[sender] += 1
            self.messages.append(message)
            self.queues[sender, receiver].append(message)
            self.condition.notify_all()

    def _deadlocked(self) -> bool:
        """True if every node has finished or waits on an empty link (call with the lock held)."""
        return all(node in self.done or (node in self.waiting and not self.queues[self.waiting[node], node])
                   for node in self.nodes)

    def recv(self, receiver: object, sender: object):
        """The oldest message from ``sender`` to ``receiver``'s payload; wait for it, fail on deadlock or time-out."""
        if sender not in self.nodes:
            raise NetworkError(f"{receiver!r} waits for {sender!r}, which is not a node of this network "
                               f"(nodes: {self.nodes})")
        with self.condition:
            while True:
                queue = self.queues[sender, receiver]
                if queue:
                    return queue.popleft().payload
                if self.failed:
                    raise _Aborted()
                self.waiting[receiver] = sender
                if self._deadlocked():
                    waits = ", ".join(f"{node!r} waits for {self.waiting[node]!r}" for node in self.nodes
                                      if node in self.waiting)
                    raise NetworkError(f"deadlock: every node waits for a message that nobody will send ({waits}). "
                                       "Does every recv() have a matching send() on the other side?")
                remaining = self.deadline - time.monotonic()
                if remaining <= 0:
                    raise NetworkError(f"{receiver!r} waited more than {self.timeout_s:g} s for a message from "
                                       f"{sender!r}")
                self.condition.wait(min(remaining, 0.5))
                self.waiting.pop(receiver, None)

    def finish(self, node: object, error: BaseException | None) -> None:
        """Mark ``node`` done (and failed, if ``error``); wake every waiting node."""
        with self.condition:
            self.waiting.pop(node, None)
            self.done.add(node)
            if error is not None and not isinstance(error, _Aborted):
                self.failed.append((time.monotonic(), node, error))
            self.condition.notify_all()


class _Aborted(Exception):
    """Raised in a waiting node when another node failed (never shown: the first real failure is)."""


def run_network(programs: dict, links: set | None = None, *, timeout_s: float = 5.0) -> NetworkRun:
    """Run ``programs[node](send, recv)`` for every node at once (one thread each) on a simulated network.

    ``send(to, array)`` queues a copy of a numpy array for node ``to``; ``recv(frm)`` returns the oldest message from
    ``frm``, waiting for it. Every message is logged. The first error of any program is raised here (the others are
    stopped); a deadlock, or a run longer than ``timeout_s``, raises NetworkError.
    """
    if not isinstance(programs, dict) or not programs:
        raise TypeError(f"programs must be a non-empty dict node -> function(send, recv), got {type(programs).__name__}")
    for node, program in programs.items():
        if not callable(program):
            raise TypeError(f"programs[{node!r}] must be a function(send, recv), got {type(program).__name__}")
    if links is not None and not isinstance(links, (set, frozenset)):
        raise TypeError(f"links must be a set of (sender, receiver) pairs or None, got {type(links).__name__}")
    timeout_s = positive_number("timeout_s", timeout_s)
    network = _Network(list(programs), None if links is None else set(links), timeout_s)
    results: dict = {}

    def run(node: object, program: Callable) -> None:
        """One node's thread: run its program with its own send and recv; report how it ended."""
        error = None
        try:
            results[node] = program(lambda to, array: network.send(node, to, array),
                                    lambda frm: network.recv(node, frm))
        except BaseException as caught:  # noqa: BLE001 (reported to the caller below)
            error = caught
        network.finish(node, error)

    threads = [threading.Thread(target=run, args=(node, program), name=f"gpucourse-node-{node}", daemon=True)
               for node, program in programs.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, network.deadline - time.monotonic()) + 1.0)
    if any(thread.is_alive() for thread in threads):
        with network.condition:
            network.failed.append((time.monotonic(), None, NetworkError(
                f"the programs did not finish within {timeout_s:g} s (a loop that never ends?)")))
            network.condition.notify_all()
    if network.failed:
        _, node, error = min(network.failed, key=lambda failure: failure[0])
        if node is not None and not isinstance(error, NetworkError) and hasattr(error, "add_note"):
            error.add_note(f"(raised on node {node!r} of the simulated network)")
        raise error
    undelivered = tuple(m for queue in network.queues.values() for m in queue)
    return NetworkRun(dict(results), tuple(network.messages), undelivered)


def _check_buffers(name: str, buffers: object) -> list:
    """Return ``buffers`` as a list of 1-D numpy arrays of one length and dtype, else raise naming ``name``."""
    import numpy as np

    if isinstance(buffers, np.ndarray) or not isinstance(buffers, Sequence) or not buffers:
        raise TypeError(f"{name} must be a non-empty list of 1-D numpy arrays, got {type(buffers).__name__}")
    for buffer in buffers:
        if not isinstance(buffer, np.ndarray) or buffer.ndim != 1:
            raise TypeError(f"{name} must hold 1-D numpy arrays, got {type(buffer).__name__} "
                            f"{getattr(buffer, 'shape', '')}")
    if len({(len(b), b.dtype) for b in buffers}) != 1:
        raise ValueError(f"{name} must all have the same length and dtype, got "
                         f"{sorted({(len(b), str(b.dtype)) for b in buffers})}")
    return list(buffers)


def run_ring(worker: Callable, buffers: Sequence, *, timeout_s: float = 5.0) -> NetworkRun:
    """Run ``worker(rank, world_size, buffer, send, recv)`` on every rank of a simulated ring; log every message.

    Rank i owns a copy of ``buffers[i]``; ``send(array)`` goes to rank (i + 1) % N, ``recv()`` takes the oldest message
    from rank (i - 1) % N. ``results[i]`` is what rank i's worker returned.
    """
    if not callable(worker):
        raise TypeError(f"worker must be a function(rank, world_size, buffer, send, recv), got {type(worker).__name__}")
    buffers = _check_buffers("buffers", buffers)
    n = len(buffers)

    def program(rank: int) -> Callable:
        """Rank ``rank``'s program: the worker with its own buffer and its neighbours."""
        mine = buffers[rank].copy()
        return lambda send, recv: worker(rank, n, mine, lambda array: send((rank + 1) % n, array),
                                         lambda: recv((rank - 1) % n))

    return run_network({rank: program(rank) for rank in range(n)}, {(r, (r + 1) % n) for r in range(n)},
                       timeout_s=timeout_s)


def ps_worker(gradient, n_servers: int, send: Callable, recv: Callable):
    """A parameter-server worker: push slice s of its gradient to server s, pull the new slices; return the weights."""
    import numpy as np

    for server, part in enumerate(np.array_split(gradient, n_servers)):
        send(f"server{server}", part)
    return np.concatenate([recv(f"server{server}") for server in range(n_servers)])


def run_parameter_server(server: Callable, gradients: Sequence, weights, lr: float = 0.1, n_servers: int = 1, *,
                         timeout_s: float = 5.0) -> NetworkRun:
    """One synchronous step of a sharded parameter server on a simulated network; log every message.

    Nodes 'worker0'... run :func:`ps_worker` with ``gradients[k]``; nodes 'server0'... run
    ``server(s, n_workers, weights_slice, lr, send, recv)`` where ``weights_slice`` is a copy of slice s of
    ``weights`` (``np.array_split``), ``send(to, array)`` and ``recv(frm)`` name nodes such as 'worker3'.
    """
    import numpy as np

    if not callable(server):
        raise TypeError(f"server must be a function(server, n_workers, weights, lr, send, recv), "
                        f"got {type(server).__name__}")
    gradients = _check_buffers("gradients", gradients)
    if not isinstance(weights, np.ndarray) or weights.shape != gradients[0].shape:
        raise ValueError(f"weights must be a numpy array shaped like each gradient {gradients[0].shape}, "
                         f"got {getattr(weights, 'shape', type(weights).__name__)}")
    lr = positive_number("lr", lr)
    n_servers = positive_int("n_servers", n_servers)
    n = len(gradients)
    slices = np.array_split(weights, n_servers)
    programs: dict = {}
    for k in range(n):
        programs[f"worker{k}"] = (lambda k: lambda send, recv: ps_worker(gradients[k].copy(), n_servers, send, recv))(k)
    for s in range(n_servers):
        programs[f"server{s}"] = (lambda s: lambda send, recv: server(s, n, slices[s].copy(), lr, send, recv))(s)
    links = {(f"worker{k}", f"server{s}") for k in range(n) for s in range(n_servers)}
    links |= {(b, a) for a, b in links}
    return run_network(programs, links, timeout_s=timeout_s)


def sgd_step(weights, gradients: Sequence, lr: float):
    """One synchronous SGD step: the weights minus ``lr`` times the mean of the workers' gradients (a new array)."""
    import numpy as np

    weights = np.asarray(weights)
    if isinstance(gradients, np.ndarray) or not isinstance(gradients, Sequence) or not gradients:
        raise TypeError(f"gradients must be a non-empty list of arrays, got {type(gradients).__name__}")
    lr = positive_number("lr", lr)
    return weights - lr * np.mean(np.stack([np.asarray(g) for g in gradients]), axis=0)
