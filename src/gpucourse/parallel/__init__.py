"""Data and model parallelism run for real on one machine: worker processes, DDP, collectives, pipelines, pictures.

One module per job (lessons 14_data_parallelism, 15_sharding and 16_model_parallelism):

- :mod:`~gpucourse.parallel.workers`: start worker processes, time limits, failures with the failing rank's traceback;
- :mod:`~gpucourse.parallel.comm`: count the collectives a real rank runs (kind, bytes, forward or backward);
- :mod:`~gpucourse.parallel.collectives`: a simulated network, the ring all-reduce and the parameter server on it;
- :mod:`~gpucourse.parallel.data_parallel`: DDP on worker processes against one process;
- :mod:`~gpucourse.parallel.ddp_timeline`: real collectives counted, all-reduce bandwidth, DDP's bucket timeline;
- :mod:`~gpucourse.parallel.own_ddp`: a learner's own DDP (hooks, buckets) run in real process groups, observed;
- :mod:`~gpucourse.parallel.torchrun_launch`: a learner's training script run by torchrun on one or more nodes;
- :mod:`~gpucourse.parallel.ddp_sim`: DDP's gradient synchronisation (buckets, ``no_sync``) simulated in threads;
- :mod:`~gpucourse.parallel.keras_devices`: TensorFlow's logical devices for ``MirroredStrategy``;
- :mod:`~gpucourse.parallel.sim_devices`: simulated devices for splitting a model;
- :mod:`~gpucourse.parallel.pipeline_parallel`: a two-stage pipeline on two processes;
- :mod:`~gpucourse.parallel.pipeline_schedules`: pipeline schedules on a simulated clock, the bubble, timelines;
- :mod:`~gpucourse.parallel.sharding`: a ZeRO-2 optimizer over a process group and its grader;
- :mod:`~gpucourse.parallel.fsdp`: FSDP2 written by the learner (wrap policy, mixed precision), its grader, observed;
- :mod:`~gpucourse.parallel.tensor_parallel`: a tensor-parallel MLP (column- then row-parallel), its grader, DTensor;
- :mod:`~gpucourse.parallel.plan`: the cost model for choosing data, tensor, pipeline and ZeRO degrees.

Every public name is importable from ``gpucourse.parallel`` itself, as before the split. A worker process starts with
``from gpucourse.parallel import _child_main``, which keeps working too.
"""

from __future__ import annotations

from gpucourse.parallel.comm import Collective, CommCounter, comm_counter_worker
from gpucourse.parallel.collectives import (Message, NetworkError, NetworkRun, RingStep, _check_buffers, _Network,
                                            plot_ring_steps, ps_worker, ring_trace, run_network, run_parameter_server,
                                            run_ring, sgd_step, worker_buffers)
from gpucourse.parallel.data_parallel import (DDPResult, TrainConfig, TrainResult, _check_config, _gpu_count, _train,
                                              ddp_worker, make_batches, make_model, max_difference, run_ddp,
                                              run_ddp_all, train_single)
from gpucourse.parallel.keras_devices import configure_tf_devices
from gpucourse.parallel.own_ddp import AllReduceCall, OwnDDPCase, OwnDDPRun, own_ddp_worker, run_own_ddp
from gpucourse.parallel.ddp_timeline import (BucketEvent, CollectivesRun, DDPTimeline, ObservedRun,
                                             collectives_worker, ddp_timeline_worker, observe_worker,
                                             plot_ddp_timeline, run_collectives, run_ddp_timeline, run_observed)
from gpucourse.parallel.ddp_sim import (DEFAULT_BUCKET_CAP_MB, DataParallelRun, SimulatedDDP, accumulation_step,
                                        run_data_parallel)
from gpucourse.parallel.pipeline_parallel import (PipelineConfig, PipelineResult, _pipeline_data, _pipeline_stage,
                                                  pipeline_worker, run_pipeline)
from gpucourse.parallel.pipeline_schedules import (PipelineEvent, ScheduleError, ScheduleRun, gpipe_schedule,
                                                   idle_fraction, pipeline_orders, plot_pipeline_timeline,
                                                   run_schedule)
from gpucourse.parallel.plan import (Batch, Cluster, Model, Plan, best_plan, divisors,
                                     memory_breakdown_gb, memory_per_gpu_gb, plan_problem, step_breakdown_s,
                                     step_time_s, valid_plans)
from gpucourse.parallel.fsdp import (FSDP_ATOL, FsdpCase, block_net, fsdp_check, fsdp_grader_worker, fsdp_shard,
                                     fsdp_worker, run_fsdp)
from gpucourse.parallel.sharding import (ZERO_ATOL, Zero2Adam, ZeroCase, run_zero2, sized_mlp, state_bytes, zero_check,
                                         zero_grader_worker)
from gpucourse.parallel.sim_devices import (DeviceLog, DeviceMismatch, DeviceTensor, PlacedModule, SimulatedDevice,
                                            Transfer, simulated_devices, split_sequential)
from gpucourse.parallel.tensor_parallel import (check_tensor_parallel_mlp, make_mlp, run_tp_demo, shard_mlp,
                                                tp_demo_rows, tp_demo_worker, tp_forward)
from gpucourse.parallel.torchrun_launch import (ScriptCase, ScriptRun, block_what_the_launcher_blocked, bn_mlp,
                                               run_script, script_reference)
from gpucourse.parallel.workers import (_BOOT, _TIMEOUT_ENV, BACKENDS, DEFAULT_TIMEOUT_S, LOOPBACK, MAX_WORKERS,
                                        WorkerError, WorkerTimeout, _child_main, collective_worker, core_shares,
                                        describe_worker, failing_worker, free_port, hanging_worker, launch,
                                        pick_backend, process_group, rank_device, spin_worker, worker_backend)

__all__ = [
    "LOOPBACK", "DEFAULT_TIMEOUT_S", "WorkerError", "WorkerTimeout", "free_port", "launch", "process_group",
    "BACKENDS", "pick_backend", "rank_device", "worker_backend",
    "describe_worker", "failing_worker", "hanging_worker", "collective_worker", "spin_worker", "core_shares",
    "TrainConfig", "TrainResult", "DDPResult", "make_model", "make_batches", "train_single", "ddp_worker", "run_ddp",
    "run_ddp_all", "max_difference",
    "DEFAULT_BUCKET_CAP_MB", "SimulatedDDP", "DataParallelRun", "run_data_parallel", "accumulation_step",
    "worker_buffers", "RingStep", "ring_trace", "plot_ring_steps",
    "NetworkError", "Message", "NetworkRun", "run_network", "run_ring", "ps_worker", "run_parameter_server", "sgd_step",
    "DeviceMismatch", "Transfer", "DeviceLog", "DeviceTensor", "PlacedModule", "SimulatedDevice", "simulated_devices",
    "split_sequential", "idle_fraction",
    "PipelineConfig", "PipelineEvent", "PipelineResult", "pipeline_worker", "run_pipeline", "gpipe_schedule",
    "plot_pipeline_timeline", "ScheduleError", "ScheduleRun", "run_schedule", "pipeline_orders",
    "configure_tf_devices",
    "CommCounter", "Collective", "comm_counter_worker",
    "CollectivesRun", "BucketEvent", "DDPTimeline", "ObservedRun", "collectives_worker", "ddp_timeline_worker",
    "observe_worker",
    "run_collectives", "run_ddp_timeline", "run_observed", "plot_ddp_timeline",
    "OwnDDPCase", "OwnDDPRun", "AllReduceCall", "own_ddp_worker", "run_own_ddp",
    "ZERO_ATOL", "ZeroCase", "sized_mlp", "state_bytes", "Zero2Adam", "zero_grader_worker", "zero_check",
    "run_zero2", "fsdp_worker", "run_fsdp", "FSDP_ATOL", "FsdpCase", "block_net", "fsdp_shard", "fsdp_grader_worker",
    "fsdp_check",
    "Model", "Cluster", "Batch", "Plan", "plan_problem", "memory_breakdown_gb", "memory_per_gpu_gb", "step_breakdown_s",
    "step_time_s", "divisors", "valid_plans", "best_plan",
    "ScriptCase", "ScriptRun", "bn_mlp", "run_script", "script_reference",
    "make_mlp", "shard_mlp", "tp_forward", "check_tensor_parallel_mlp", "tp_demo_worker", "run_tp_demo", "tp_demo_rows",
]

block_what_the_launcher_blocked()  # in a process torchrun started for a grading cell: its off-limits helpers too
