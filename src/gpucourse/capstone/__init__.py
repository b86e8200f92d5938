"""Lesson 17, the capstone (17_capstone): one small CNN trained fast and measured honestly, and the cost of a run.

One module per job: ``datasets`` (MNIST, Fashion-MNIST, CIFAR-10 or the shipped 8x8 digits), ``models`` (the CNN
and its Keras twin), ``training`` (the loop whose options are the course's techniques, the speed-up rows of its
results, the speed score and time budget), ``live_plots`` (the live plot, the speed-up table and chart), ``step_switches``
(torch.compile, CUDA Graphs and cudnn.benchmark timed on one step), ``keras_twin`` (the same CNN trained with Keras),
``two_processes`` (the learner's own DDP script trained under torchrun: the optional track B) and ``cost`` (cloud
against on-premise). Every public name is importable from ``gpucourse.capstone`` itself.
"""

from __future__ import annotations

from gpucourse.capstone.cost import (HOURS_PER_YEAR, CostComparison, break_even_hours, cloud_cost_per_run,
                                     compare_costs, on_prem_cost_per_run, on_prem_usd_per_hour, plot_costs)
from gpucourse.capstone.datasets import (CIFAR10_ARCHIVE, CIFAR10_BATCHES, CIFAR10_RECORDS, DATA_DIR_VARIABLE,
                                         DATASETS, IDX_FILES, OFFLINE_VARIABLE, ImageData, data_dir,
                                         download_dataset, fetch_url, load_data, load_digits_data, network_available,
                                         read_cifar10, read_idx)
from gpucourse.capstone.keras_twin import KerasResult, train_keras
from gpucourse.capstone.live_plots import LivePlot, plot_examples, plot_speedups, show_speedups
from gpucourse.capstone.models import (count_parameters, import_keras, keras_small_cnn, small_cnn,
                                       training_flops_per_image)
from gpucourse.capstone.step_switches import (StepTiming, compile_backend, payback_steps, show_step_timings,
                                             time_step_variants)
from gpucourse.capstone.training import (BASELINE_IMAGES, FEEDS, OPTIMIZERS, PRECISIONS, OnTheFlyImages, Race,
                                         TrainConfig, TrainResult, autocast_dtype, evaluate, first_attempt, race,
                                         speed_score, speedup_rows, time_budget_s, train)
from gpucourse.capstone.two_processes import TorchrunTraining, train_with_torchrun
from gpucourse.plots import markdown_table, show_table  # noqa: F401  (re-exported: lessons import them from here)

__all__ = [
    "DATASETS", "IDX_FILES", "ImageData", "load_data", "load_digits_data", "download_dataset", "read_idx",
    "read_cifar10", "CIFAR10_ARCHIVE", "CIFAR10_BATCHES", "CIFAR10_RECORDS", "fetch_url", "data_dir", "network_available", "import_keras",
    "small_cnn", "keras_small_cnn", "count_parameters", "training_flops_per_image",
    "TrainConfig", "TrainResult", "autocast_dtype", "OnTheFlyImages", "evaluate", "train",
    "speed_score", "time_budget_s", "first_attempt", "race", "Race", "BASELINE_IMAGES", "LivePlot", "speedup_rows", "plot_speedups", "markdown_table", "show_table",
    "show_speedups", "plot_examples",
    "KerasResult", "train_keras",
    "cloud_cost_per_run", "on_prem_usd_per_hour", "on_prem_cost_per_run", "break_even_hours", "CostComparison",
    "compare_costs", "plot_costs", "HOURS_PER_YEAR", "DATA_DIR_VARIABLE", "OFFLINE_VARIABLE", "FEEDS", "OPTIMIZERS",
    "PRECISIONS", "StepTiming", "compile_backend", "payback_steps", "show_step_timings", "time_step_variants",
    "TorchrunTraining", "train_with_torchrun",
]
