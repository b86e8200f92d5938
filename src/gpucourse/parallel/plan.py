"""A cost model for choosing the mix: data (DP), tensor (TP) and pipeline (PP) degrees and a ZeRO stage (lesson 16).

Every number comes from the arguments (the model, the cluster, the batch); nothing is measured here and no figure is
hidden in a constant. The model is deliberately simple, and each assumption is stated where it is used:

- memory (:func:`memory_per_gpu_gb`): mixed-precision Adam keeps 2 + 2 + 12 bytes per parameter (bf16 weights,
  bf16 gradients, fp32 master weights and Adam's two moments), split over ``tp * pp`` GPUs; ZeRO-1 also shards the
  optimizer bytes over ``dp``, ZeRO-2 the gradients too, ZeRO-3 the weights too; plus the activations that 1F1B
  keeps in flight.
- time (:func:`step_time_s`): compute at a stated fraction of the GPU's peak, the pipeline bubble, TP's all-reduces
  (inside a node over the fast link, across nodes over the slow one), the pipeline's point-to-point sends and DP's
  gradient all-reduce (1.5x the traffic with ZeRO-3's parameter all-gathers). Communication is not overlapped with
  compute: a pessimistic, easy-to-follow choice.

Ranks are laid out TP first (neighbours in a node), then DP, then PP, as Megatron-LM does: a TP group stays inside a
node when ``tp <= gpus_per_node``, a DP group when ``tp * dp <= gpus_per_node``.
"""

from __future__ import annotations

import itertools
import numbers
from dataclasses import dataclass, fields

from gpucourse._validate import positive_int, positive_number

GB = 1e9  # bytes per GB (decimal, as memory sizes and link speeds are quoted)
ZERO_STAGES = (0, 1, 2, 3)


def _check_fields(obj: object, kinds: dict[str, str]) -> None:
    """Validate a dataclass's fields: 'int' for positive ints, 'number' for positive finite numbers."""
    for field in fields(obj):
        value = getattr(obj, field.name)
        checker = positive_int if kinds.get(field.name, "number") == "int" else positive_number
        object.__setattr__(obj, field.name, checker(f"{type(obj).__name__}.{field.name}", value))


@dataclass(frozen=True)
class Model:
    """A transformer-like model: parameter count, layers, hidden size, sequence length, bytes per number.

    ``bytes_per_param`` is the size of a weight and of a gradient (2 for bf16), ``optimizer_bytes_per_param`` the
    fp32 master weights and Adam's two moments (4 + 4 + 4 = 12), ``activation_bytes`` the bytes kept per token, per
    hidden unit, per layer for the backward pass (about 34 in 16-bit for a transformer layer without recomputation,
    a stated assumption; lower it to model activation checkpointing).
    """

    params: float
    layers: int
    hidden: int
    seq_len: int
    bytes_per_param: float = 2
    optimizer_bytes_per_param: float = 12
    activation_bytes: float = 34

    def __post_init__(self) -> None:
        _check_fields(self, {"layers": "int", "hidden": "int", "seq_len": "int"})


@dataclass(frozen=True)
class Cluster:
    """Nodes of GPUs: memory (GB), peak (TFLOP/s), the fraction of it reached, link speeds in GB/s per GPU.

    ``intra_node_gb_s`` is the bandwidth between GPUs of one node (NVLink-like), ``inter_node_gb_s`` between nodes
    (the network card's share per GPU); both in gigabytes (not gigabits) per second, per GPU, per direction.
    """

    nodes: int
    gpus_per_node: int
    memory_gb: float
    flops_per_gpu: float
    intra_node_gb_s: float
    inter_node_gb_s: float
    efficiency: float = 0.5

    def __post_init__(self) -> None:
        _check_fields(self, {"nodes": "int", "gpus_per_node": "int"})
        if self.efficiency > 1:
            raise ValueError(f"Cluster.efficiency must be a fraction of the peak in (0, 1], got {self.efficiency}")

    @property
    def gpus(self) -> int:
        """Total number of GPUs."""
        return self.nodes * self.gpus_per_node


@dataclass(frozen=True)
class Batch:
    """One optimizer step's work: ``global_batch`` sequences, fed ``micro_batch`` sequences at a time."""

    global_batch: int
    micro_batch: int = 1

    def __post_init__(self) -> None:
        _check_fields(self, {"global_batch": "int", "micro_batch": "int"})


@dataclass(frozen=True)
class Plan:
    """Degrees of data, tensor and pipeline parallelism (dp * tp * pp GPUs) and a ZeRO stage (0 to 3)."""

    dp: int
    tp: int
    pp: int
    zero: int = 0

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp"):
            object.__setattr__(self, name, positive_int(f"Plan.{name}", getattr(self, name)))
        if isinstance(self.zero, bool) or not isinstance(self.zero, numbers.Integral) or self.zero not in ZERO_STAGES:
            raise ValueError(f"Plan.zero must be a ZeRO stage 0, 1, 2 or 3, got {self.zero!r}")
        object.__setattr__(self, "zero", int(self.zero))

    @property
    def gpus(self) -> int:
        """GPUs the plan uses: dp * tp * pp."""
        return self.dp * self.tp * self.pp


def _check_types(plan: object, model: object, cluster: object, batch: object) -> None:
    """TypeError naming the argument that is not a Plan, Model, Cluster or Batch."""
    for name, value, kind in (("plan", plan, Plan), ("model", model, Model), ("cluster", cluster, Cluster),
                              ("batch", batch, Batch)):
        if not isinstance(value, kind):
            raise TypeError(f"{name} must be a {kind.__name__}, got {type(value).__name__} ({value!r})")


def plan_problem(plan: Plan, model: Model, cluster: Cluster, batch: Batch) -> str | None:
    """Why ``plan`` cannot run this model on this cluster with this batch (a sentence), or None if it can."""
    _check_types(plan, model, cluster, batch)
    if plan.gpus != cluster.gpus:
        return f"dp * tp * pp = {plan.gpus}, but the cluster has {cluster.gpus} GPUs (use them all)"
    if model.hidden % plan.tp:
        return f"tp = {plan.tp} does not divide hidden = {model.hidden} (each GPU holds hidden / tp columns)"
    if model.layers % plan.pp:
        return f"pp = {plan.pp} does not divide layers = {model.layers} (each stage holds layers / pp layers)"
    if batch.global_batch % (plan.dp * batch.micro_batch):
        return (f"dp * micro_batch = {plan.dp * batch.micro_batch} does not divide global_batch = "
                f"{batch.global_batch} (each replica runs a whole number of micro-batches)")
    return None


def _require_valid(plan: Plan, model: Model, cluster: Cluster, batch: Batch) -> None:
    """ValueError naming ``plan`` if it breaks a constraint."""
    problem = plan_problem(plan, model, cluster, batch)
    if problem is not None:
        raise ValueError(f"plan {plan} is not valid: {problem}")


def microbatches(plan: Plan, batch: Batch) -> int:
    """Micro-batches each pipeline runs per step: global_batch / (dp * micro_batch), at least 1."""
    return max(1, batch.global_batch // (plan.dp * batch.micro_batch))


def memory_breakdown_gb(plan: Plan, model: Model, cluster: Cluster, batch: Batch) -> dict[str, float]:
    """GB per GPU for weights, gradients, optimizer state and activations under ``plan``.

    States: ``params * bytes / (tp * pp)``; ZeRO stage 1 divides the optimizer state by ``dp``, stage 2 the gradients
    too, stage 3 the weights too. Activations: one micro-batch keeps ``micro_batch * seq_len * hidden *
    activation_bytes`` bytes per layer, split over ``tp``; a stage holds ``layers / pp`` layers and, under 1F1B,
    ``min(pp, m)`` micro-batches in flight (the first stage's count, the largest).
    """
    _require_valid(plan, model, cluster, batch)
    shard = plan.tp * plan.pp
    weights = model.params * model.bytes_per_param / shard / (plan.dp if plan.zero >= 3 else 1)
    gradients = model.params * model.bytes_per_param / shard / (plan.dp if plan.zero >= 2 else 1)
    optimizer = model.params * model.optimizer_bytes_per_param / shard / (plan.dp if plan.zero >= 1 else 1)
    per_layer = batch.micro_batch * model.seq_len * model.hidden * model.activation_bytes / plan.tp
    activations = per_layer * (model.layers / plan.pp) * min(plan.pp, microbatches(plan, batch))
    return {"weights": weights / GB, "gradients": gradients / GB, "optimizer": optimizer / GB,
            "activations": activations / GB}


def memory_per_gpu_gb(plan: Plan, model: Model, cluster: Cluster, batch: Batch) -> float:
    """GB one GPU needs under ``plan``: the sum of :func:`memory_breakdown_gb`."""
    return sum(memory_breakdown_gb(plan, model, cluster, batch).values())


def fits(plan: Plan, model: Model, cluster: Cluster, batch: Batch) -> bool:
    """True if :func:`memory_per_gpu_gb` is at most the cluster's ``memory_gb``."""
    return memory_per_gpu_gb(plan, model, cluster, batch) <= cluster.memory_gb


def _ring_all_reduce_s(nbytes: float, ranks: int, gb_s: float) -> float:
    """Seconds for a ring all-reduce of ``nbytes`` over ``ranks`` GPUs: each sends 2 (N - 1) / N of the bytes."""
    return 2 * (ranks - 1) / ranks * nbytes / (gb_s * GB)


def _link_gb_s(group_span: int, cluster: Cluster) -> float:
    """The link a group of consecutive ranks uses: intra-node if it spans at most one node, else inter-node."""
    return cluster.intra_node_gb_s if group_span <= cluster.gpus_per_node else cluster.inter_node_gb_s


def step_breakdown_s(plan: Plan, model: Model, cluster: Cluster, batch: Batch) -> dict[str, float]:
    """Seconds of one optimizer step under ``plan``, by cause: compute, bubble, tp, pp, dp.

    - compute: ``6 * params * tokens / (gpus * flops_per_gpu * efficiency)`` (forward 2, backward 4 FLOPs per
      parameter per token), ``tokens = global_batch * seq_len``;
    - tp: per micro-batch and layer, 2 all-reduces of the activations (``micro_batch * seq_len * hidden *
      bytes_per_param``) forward and 2 backward, ring over ``tp`` GPUs, on the intra-node link if ``tp <=
      gpus_per_node`` else on the inter-node one;
    - pp: per micro-batch, one send of the activations forward and one of their gradient backward between stages
      (inter-node as soon as the job spans several nodes);
    - bubble: a pipeline of ``pp`` stages and ``m`` micro-batches takes ``m + pp - 1`` micro-batch slots; the bubble
      is the ``pp - 1`` idle ones, a fraction ``(pp - 1) / (m + pp - 1)`` of the pipeline's time;
    - dp: ring all-reduce of each GPU's gradients (``params * bytes_per_param / (tp * pp)``) over ``dp`` GPUs,
      intra-node if ``tp * dp <= gpus_per_node``; ZeRO-1 and 2 move the same bytes (reduce-scatter + all-gather),
      ZeRO-3 1.5x (the weights are all-gathered again for the backward pass).
    Nothing overlaps: the step time is the sum.
    """
    _require_valid(plan, model, cluster, batch)
    m = microbatches(plan, batch)
    compute_mb = (6 * model.params * batch.micro_batch * model.seq_len
                  / (plan.tp * plan.pp * cluster.flops_per_gpu * 1e12 * cluster.efficiency))
    activation = batch.micro_batch * model.seq_len * model.hidden * model.bytes_per_param
    tp_mb = 0.0
    if plan.tp > 1:
        tp_link = _link_gb_s(plan.tp, cluster)
        tp_mb = 4 * (model.layers / plan.pp) * _ring_all_reduce_s(activation, plan.tp, tp_link)
    pp_mb = 0.0
    if plan.pp > 1:
        pp_mb = 2 * activation / plan.tp / (_link_gb_s(plan.gpus, cluster) * GB)
    slot = compute_mb + tp_mb + pp_mb
    dp = 0.0
    if plan.dp > 1:
        grads = model.params * model.bytes_per_param / (plan.tp * plan.pp)
        dp = _ring_all_reduce_s(grads, plan.dp, _link_gb_s(plan.tp * plan.dp, cluster))
        dp *= 1.5 if plan.zero == 3 else 1.0
    return {"compute": m * compute_mb, "bubble": (plan.pp - 1) * slot, "tp": m * tp_mb, "pp": m * pp_mb, "dp": dp}


def step_time_s(plan: Plan, model: Model, cluster: Cluster, batch: Batch) -> float:
    """Seconds of one optimizer step under ``plan``: the sum of :func:`step_breakdown_s`."""
    return sum(step_breakdown_s(plan, model, cluster, batch).values())


def divisors(n: int) -> list[int]:
    """The positive divisors of ``n``, in increasing order."""
    n = positive_int("n", n)
    return [d for d in range(1, n + 1) if n % d == 0]


def _enumerate(model: Model, cluster: Cluster, batch: Batch) -> list[Plan]:
    """Every valid plan (see :func:`plan_problem`), tp then pp then zero increasing."""
    plans = []
    for tp, pp in itertools.product(divisors(cluster.gpus), repeat=2):
        if cluster.gpus % (tp * pp):
            continue
        for zero in ZERO_STAGES:
            plan = Plan(cluster.gpus // (tp * pp), tp, pp, zero)
            if plan_problem(plan, model, cluster, batch) is None:
                plans.append(plan)
    return plans


def valid_plans(model: Model, cluster: Cluster, batch: Batch) -> list[Plan]:
    """Every plan with dp * tp * pp == GPUs, tp | hidden, pp | layers, dp * micro_batch | global_batch, zero 0-3."""
    _check_types(Plan(1, 1, 1), model, cluster, batch)
    return _enumerate(model, cluster, batch)


def _rank_key(plan: Plan, model: Model, cluster: Cluster, batch: Batch) -> tuple:
    """Sort key: step time, then fewer model-parallel GPUs (tp * pp), lower ZeRO stage, smaller tp."""
    return (step_time_s(plan, model, cluster, batch), plan.tp * plan.pp, plan.zero, plan.tp)


def _search(model: Model, cluster: Cluster, batch: Batch) -> Plan | None:
    """The fastest valid plan that fits in memory (ties: see :func:`_rank_key`), or None if none fits."""
    fitting = [plan for plan in _enumerate(model, cluster, batch) if fits(plan, model, cluster, batch)]
    return min(fitting, key=lambda plan: _rank_key(plan, model, cluster, batch), default=None)


def best_plan(model: Model, cluster: Cluster, batch: Batch) -> Plan | None:
    """The reference answer: the fastest plan that fits; ties go to fewer tp * pp GPUs, then the lower ZeRO stage."""
    _check_types(Plan(1, 1, 1), model, cluster, batch)
    return _search(model, cluster, batch)


# ----------------------------------------------------------------------------------------------------------------
# The notebook's example (illustrative numbers, not measurements).

Case = tuple[str, Model, Cluster, Batch]


def example_case() -> Case:
    """The notebook's example: a 7B-parameter model on 2 nodes of 8 GPUs (illustrative numbers)."""
    return ("7B model, 2 nodes x 8 GPUs", Model(params=7e9, layers=32, hidden=4096, seq_len=4096),
            Cluster(nodes=2, gpus_per_node=8, memory_gb=80, flops_per_gpu=400, intra_node_gb_s=300,
                    inter_node_gb_s=25),
            Batch(global_batch=64, micro_batch=1))
