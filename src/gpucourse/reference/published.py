"""Published GPU measurements, each with its source: what a learner without a GPU sees beside the datasheets.

One entry per figure, read in its source before it was added (the maintainers' notes in
docs/published-figures-leads.md say where and how). Every field is required; `reference.check_public` and
tests/test_reference.py refuse an entry that lacks one, and a topic without an entry.

- ``topic``: one of ``reference.TOPICS + reference.PUBLIC_ONLY_TOPICS``.
- ``device``: the hardware as the source names it (no model added from memory).
- ``value`` and ``unit``: the headline number and its unit (one of ``reference.UNITS``).
- ``precision``: the number format as the source states it, or ``"not stated"``.
- ``conditions``: sizes, software versions, method, as the source states them, or ``"not stated"``.
- ``date``: when the source published or measured it: ``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD``.
- ``figure``: the measurement in one sentence a learner reads; ``why``: what explains it.
- ``source``: author and title; ``url``: its public address.
- ``label`` (optional): a short name for the figure's row when ``reference.show(topic, compact=True)`` prints a
  topic as one table.
"""

from __future__ import annotations

PUBLIC: tuple[dict[str, object], ...] = (
    # ------------------------------------------------------------------ matmul (lessons 02, 03, 07)
    {"topic": "matmul", "device": "T4", "value": 24, "unit": "TFLOP/s", "precision": "float16",
     "conditions": "4096 x 4096 cuBLAS GEMM, mean of 100 back-to-back calls",
     "date": "2023-08",
     "figure": "about 24 TFLOP/s float16 against a 65 TFLOP/s datasheet peak",
     "why": "a reply in the thread attributes the gap to power capping: under continuous matrix multiplies the "
            "T4 lowers its clock to stay within its 70 W limit",
     "source": "'About GPU peak performance', NVIDIA Developer Forums",
     "url": "https://forums.developer.nvidia.com/t/about-gpu-peak-performance/264462"},
    {"topic": "matmul", "device": "NVIDIA Tesla T4 16GB (Google Colab)", "value": 41.91, "unit": "TFLOP/s",
     "precision": "float16 (float32: 4.17, bfloat16: 2.46)",
     "conditions": "torch.mm on square random matrices of 1024 to 10240, 6 warm-up and 30 timed calls between "
                   "synchronisations, best size reported; Python 3.12, PyTorch 2.8.0; one crowd-sourced run",
     "date": "2025-09-26",
     "figure": "a T4 on Colab multiplied matrices at 41.91 TFLOP/s in float16, 4.17 in float32 and only 2.46 in "
               "bfloat16",
     "why": "float16 runs on the T4's Tensor Cores, about ten times its float32 rate here; bfloat16 came out slower "
            "than float32, which is consistent with the T4 (Turing) having no bfloat16 Tensor Core path (our "
            "reading; the table gives no cause)",
     "source": "zzc0721 and contributors, 'torch-performance-test-data', database.md",
     "url": "https://github.com/zzc0721/torch-performance-test-data/blob/main/database.md"},
    {"topic": "matmul", "device": "NVIDIA A100 SXM", "value": 271.2, "unit": "TFLOP/s",
     "precision": "bfloat16 inputs, no sparsity",
     "conditions": "brute-force search over shapes with mamf-finder.py, best 1024x10240x5120; mean of 100 "
                   "iterations after 50 warm-up per shape; torch 2.6.0+cu126; row last changed 2026-07-30",
     "date": "2026-08-22",
     "figure": "the best matmul measured on an A100 SXM reached 271.2 TFLOP/s in bfloat16, 86.9% of the 312 TFLOP/s "
               "datasheet figure",
     "why": "the book calls this the Maximum Achievable Matmul FLOPS: even the best shape found stays below the "
            "theoretical peak, and it recommends re-running the search on your own setup",
     "source": "S. Bekman, 'Machine Learning Engineering', chapter Accelerators ('Maximum Achievable Matmul FLOPS "
               "comparison table')",
     "url": "https://github.com/stas00/ml-engineering/blob/master/compute/accelerator/README.md"},
    {"topic": "matmul", "device": "NVIDIA H100 SXM (the table notes: H200 is the same)", "value": 794.5,
     "unit": "TFLOP/s", "precision": "bfloat16 inputs, no sparsity (float8_e4m3fn: 1402.6 of 1979)",
     "conditions": "mamf-finder.py shape search, best 2048x2048x13312; mean of 100 iterations after 50 warm-up; "
                   "torch 2.7.0+cu126; row last changed 2026-07-30",
     "date": "2026-08-22",
     "figure": "an H100 SXM reached 794.5 TFLOP/s in bfloat16, 80.3% of the 989 TFLOP/s datasheet figure (FP8: 1,402.6 "
               "of 1,979, 70.9%)",
     "why": "across NVIDIA's generations in the table the share reached tends to fall (A100 SXM 86.9%, H100 SXM "
            "80.3%, B200 SXM 77.6%); the book's caveat: 'these numbers were achieved by a brute-force search of a "
            "non-exhaustive sub-space of various shapes'",
     "source": "S. Bekman, 'Machine Learning Engineering', chapter Accelerators ('Maximum Achievable Matmul FLOPS "
               "comparison table')",
     "url": "https://github.com/stas00/ml-engineering/blob/master/compute/accelerator/README.md"},
    {"topic": "matmul", "device": "AMD MI300X", "value": 668.4, "unit": "TFLOP/s",
     "precision": "bfloat16 inputs, no sparsity",
     "conditions": "mamf-finder.py shape search, best 10240x15360x8192; mean of 100 iterations after 50 warm-up; "
                   "torch 2.5.1 on ROCm 6.3, PYTORCH_TUNABLEOP_ENABLED=1; row last changed 2026-07-30",
     "date": "2026-08-22",
     "figure": "an MI300X reached 668.4 TFLOP/s in bfloat16, 51.4% of its 1,300 TFLOP/s datasheet figure, the lowest "
               "share in the table",
     "why": "a datasheet peak says little about what a chip's software reaches: here even with PyTorch's TunableOp "
            "enabled about half of it remains out of reach",
     "source": "S. Bekman, 'Machine Learning Engineering', chapter Accelerators ('Maximum Achievable Matmul FLOPS "
               "comparison table')",
     "url": "https://github.com/stas00/ml-engineering/blob/master/compute/accelerator/README.md"},
    # ------------------------------------------------------------------ matmul_10k (lesson 03)
    {"topic": "matmul_10k", "device": "Tesla P4 (8 GB)", "value": 4.19, "unit": "TFLOP/s", "precision": "float32",
     "conditions": "torch.mm of two 10240 x 10240 random matrices, 6 warm-up and 30 timed calls between "
                   "torch.cuda.synchronize() calls; PyTorch 2.2.2+cu121, Python 3.12.4, Windows",
     "date": "2025-02-12",
     "figure": "a Tesla P4 multiplied two 10240 x 10240 float32 matrices at 4.19 TFLOP/s, so one such multiply "
               "takes about half a second (2 x 10240^3 / 4.19e12 = 0.51 s, our arithmetic)",
     "why": "the measurement warms up first and synchronises before reading the clock, so it times the multiplies "
            "themselves and not only their launch",
     "source": "kaiserKOA, 'Telsa P4', issue 9 of zzc0721/torch-performance-test-data",
     "url": "https://github.com/zzc0721/torch-performance-test-data/issues/9"},
    {"topic": "matmul_10k", "device": "NVIDIA GeForce RTX 5090 (32 GB)", "value": 65.22, "unit": "TFLOP/s",
     "precision": "float32 (float16: 219.10)",
     "conditions": "10240 x 10240 matrices, run with SVCFusion.benchmark, which says it is the project's benchmark "
                   "script; PyTorch 2.8.0+cu128, Python 3.10.14; timing method not shown in the pull request",
     "date": "2025-09-24",
     "figure": "an RTX 5090 multiplied two 10240 x 10240 float32 matrices at 65.22 TFLOP/s, about 33 ms per multiply, "
               "and at 219.10 TFLOP/s in float16, about 10 ms (2 x 10240^3 flops per multiply, our arithmetic)",
     "why": "the same multiply that takes half a second on a Tesla P4 takes tens of milliseconds here, which is why "
            "a timing of it must synchronise: the launch alone returns long before the result",
     "source": "HuanLinOTO, 'Add RTX 5090-32G entry to database', zzc0721/torch-performance-test-data pull request 15",
     "url": "https://github.com/zzc0721/torch-performance-test-data/pull/15"},
    # ------------------------------------------------------------------ startup (lessons 03, 04)
    {"topic": "startup", "device": "GeForce GTX 980 Ti", "value": 4.98, "unit": "s", "precision": "not stated",
     "conditions": "`time python3 test.py` for import torch and torch.zeros(5, 3).cuda(); PyTorch 1.1.0 (pip), "
                   "Python 3.7.2, driver 418.67, Fedora 29",
     "date": "2019-07-08",
     "figure": "a script that only imports torch and puts one 5 x 3 tensor on the GPU took 4.98 s of wall time; the "
               "reporter: 'It takes 4 seconds to initialize CUDA + create first Tensor'",
     "why": "the first CUDA call creates the CUDA context and loads the libraries; the 4.98 s also includes starting "
            "Python and importing torch",
     "source": "zeroexcuses, 'pytorch creating 1st tensor slow', pytorch/pytorch issue 22583",
     "url": "https://github.com/pytorch/pytorch/issues/22583"},
    {"topic": "startup", "device": "Titan X (Pascal, per the maintainer's reply)", "value": 121, "unit": "s",
     "precision": "not stated",
     "conditions": "first x.cuda() of a 10 x 10 x 10 x 10 tensor timed with datetime; PyTorch installed with conda, "
                   "early 2017 build",
     "date": "2017-01-21",
     "figure": "the first .cuda() call took 121 s (0:02:01.45), every later one 51 to 205 us",
     "why": "a counter-example: a commenter explains that the CUDA runtime was JIT-compiling the package's PTX code "
            "for an architecture it had no compiled code for; the maintainer's fix was binaries compiled for it",
     "source": "GPistre, 'Initial call to .cuda() very slow with Titan X', pytorch/pytorch issue 537",
     "url": "https://github.com/pytorch/pytorch/issues/537"},
    # ------------------------------------------------------------------ transfer (lesson 08)
    {"topic": "transfer", "device": "8x H200 node, each GPU on its own PCIe 5 x16 link", "value": 55.43, "unit": "GB/s",
     "precision": "not stated",
     "conditions": "nvbandwidth -i 10 -t host_to_device_memcpy_ce (and device_to_host_memcpy_ce), copy engines; in "
                   "the book since 2026-08-04",
     "date": "2026-08-22",
     "figure": "nvbandwidth measured 55.43 GB/s host to device and 55.06 GB/s device to host, 88% and 87% of the "
               "63 GB/s a PCIe 5 x16 link is specified for",
     "why": "protocol overhead keeps a PCIe link below its specified rate; the book notes the eight links came out "
            "within 0.10 GB/s of each other",
     "source": "S. Bekman, 'Machine Learning Engineering', network chapter (PCIe)",
     "url": "https://github.com/stas00/ml-engineering/blob/master/network/README.md"},
    {"topic": "transfer", "device": "A100 (form factor and PCIe generation not stated)", "value": 25, "unit": "GB/s",
     "precision": "not stated",
     "conditions": "nvbandwidth host_to_device_memcpy_ce and device_to_host_memcpy_ce; buffer size not stated",
     "date": "2023-11-29",
     "figure": "one-way copies between host and an A100 measured around 25-26 GB/s; with copies running in both "
               "directions at once the host-to-device direction fell to 12-13 GB/s",
     "why": "the reporter asks whether this is normal and gives no cause; if this A100 sits on PCIe 4 x16 (the "
            "issue does not say), 25 GB/s is about 80% of the 31 GB/s that link is specified for in Bekman's table",
     "source": "Fanoid, 'About bandwidth of bidirectional copy', NVIDIA/nvbandwidth issue 11",
     "url": "https://github.com/NVIDIA/nvbandwidth/issues/11"},
    {"topic": "transfer", "device": "A100 (form factor not stated)", "value": 12.6, "unit": "GB/s",
     "precision": "not stated",
     "conditions": "torch.save of a llama-style model; bandwidth of the device-to-host copies read from profiler "
                   "traces (Memcpy DtoH to pageable against to pinned memory)",
     "date": "2024-10-15",
     "figure": "copies from an A100 into pinned host memory ran at about 12.6 GB/s against about 1.4 GB/s into "
               "pageable memory, and saving the model took about 11.3 s instead of about 14 s",
     "why": "PyTorch's pin_memory tutorial: 'a pageable tensor must be copied to pinned memory before being sent to "
            "GPU' (a copy back into pageable memory is staged likewise, our reading); the PR adds that pinned memory "
            "costs a cudaHostAlloc unless the allocator is already warmed up",
     "source": "M. Gawarecki, 'Add option to use pinned memory for D2H in torch.save', pytorch/pytorch pull "
               "request 138018",
     "url": "https://github.com/pytorch/pytorch/pull/138018"},
    {"topic": "transfer", "device": "Tesla P100-PCIE-16GB in a two-socket server", "value": 12.15, "unit": "GB/s",
     "precision": "not stated",
     "conditions": "CUDA samples bandwidthTest, quick mode, 33,554,432-byte pinned transfers; process and memory "
                   "bound with numactl to the GPU's socket (-m0 -N0) or to the other one (-m1 -N1)",
     "date": "2017-03-27",
     "figure": "pinned host-to-device copies ran at 12,150.7 MB/s (12.15 GB/s) from the GPU's own socket and at "
               "3,783.4 MB/s from the other socket; device to host 12,890.6 against 2,539.2 MB/s",
     "why": "the GPU hangs off one CPU socket (nvidia-smi topo shows its CPU affinity 0-5), so memory on the other "
            "socket reaches it through the link between the sockets (our reading; the comment gives no cause beyond "
            "'I didn't pin the process')",
     "source": "psteinb, comment in '201703 update p100 data', mpicbg-scicomp/gearshifft pull request 82",
     "url": "https://github.com/mpicbg-scicomp/gearshifft/pull/82"},
    # ------------------------------------------------------------------ cudnn_benchmark (lessons 07, 17)
    {"topic": "cudnn_benchmark", "device": "V100 (and GTX 1080 Ti)", "value": 12, "unit": "min",
     "precision": "not stated",
     "conditions": "one epoch of a SpeechBrain recipe (not named) with local data and batch_size = 200; a single "
                   "practitioner's report",
     "date": "2020-09-14",
     "figure": "with torch.backends.cudnn.benchmark = True an epoch took 12 min on a V100 instead of 17 min, and "
               "25 min instead of 60 on a 1080 Ti",
     "why": "the PR: the flag lets cuDNN 'find the best algorithm to use for your hardware'; it pays when the "
            "input shapes stay the same, so that the search is done once",
     "source": "Chaanks, 'Cudnn benchmark mode', speechbrain/speechbrain pull request 294",
     "url": "https://github.com/speechbrain/speechbrain/pull/294"},
    # ------------------------------------------------------------------ capstone (lesson 17)
    {"topic": "capstone", "device": "NVIDIA A100 (400 W)", "value": 2.59, "unit": "s", "precision": "not stated",
     "conditions": "CIFAR-10 to 94.01% mean accuracy with airbench94_muon.py; torch 2.4.1",
     "date": "2024-11-10",
     "figure": "airbench94_muon.py trains a network to 94.01% mean accuracy on CIFAR-10 in 2.59 s on one A100; the "
               "standard ResNet-18 training takes 7 min to reach 96%",
     "why": "the methods are in the paper (arXiv 2404.00498) and this record adds the Muon optimiser; the README "
            "counts 0.29 PFLOPs of work for it against 32.3 for the ResNet-18 baseline",
     "source": "K. Jordan, 'CIFAR-10 Airbench' (README)",
     "url": "https://github.com/KellerJordan/cifar10-airbench"},
    {"topic": "capstone", "device": "NVIDIA A100", "value": 3.83, "unit": "s", "precision": "not stated",
     "conditions": "CIFAR-10 to 94.01% mean accuracy with airbench94.py (the paper's record, now in legacy/)",
     "date": "2024-03-20",
     "figure": "the paper's airbench94.py reaches 94.01% in 3.83 s, and 3.09 s in its torch.compile variant",
     "why": "the README: the compiled variant is 'intended for experiments where many networks are trained at once "
            "in order to amortize the one-time compilation cost', which the 3.09 s leaves out",
     "source": "K. Jordan, 'CIFAR-10 Airbench' (README); paper arXiv 2404.00498",
     "url": "https://github.com/KellerJordan/cifar10-airbench"},
    # ------------------------------------------------------------------ speedup
    {"topic": "speedup", "device": "NVIDIA H100 against a Mac Mini M4 CPU", "value": 51, "unit": "tokens/s",
     "precision": "not stated",
     "conditions": "the book's Qwen3 model (qwen3.py) generating about 50 tokens with compare_inference.py; model "
                   "size not stated in the README",
     "date": "2025-08-30",
     "figure": "text generation ran at 51 tokens/s on an H100 against 6 on the M4 CPU; with a KV cache and "
               "torch.compile the H100 gave 141 tokens/s and the CPU 68",
     "why": "our reading (the README gives no cause): a small model generating one token at a time gives the GPU "
            "little work per step, so launch and Python overhead decide much of the time; a KV cache alone did not "
            "help on the H100 (48 tokens/s), torch.compile did",
     "source": "S. Raschka, 'Build a Reasoning Model (From Scratch)', ch02/03_optimized-LLM/README.md",
     "url": "https://github.com/rasbt/reasoning-from-scratch/blob/main/ch02/03_optimized-LLM/README.md"},
    # ------------------------------------------------------------------ matmul_kernels (lesson 05)
    {"topic": "matmul_kernels", "value": 309, "label": '1: one output per thread, loads not coalesced (1.3% of cuBLAS)',
     "device": "NVIDIA A6000 (Ampere)", "unit": "GFLOP/s", "precision": "float32",
     "conditions": "SGEMM at matrix size 4092 x 4092 (the README: 'GFLOPs at matrix size 4092x4092'), the author's "
                   "benchmark harness; repeats and clocks not stated",
     "date": "2023-03-04",
     "figure": "a one-output-per-thread kernel whose warps' loads are not coalesced ('1: Naive') ran at 309 "
               "GFLOP/s, 1.3% of cuBLAS",
     "why": "our reading of the worklog: the threads of a warp compute outputs in consecutive rows of C, so "
            "each of their loads touches a different row of A",
     "source": "S. Boehm, results table of 'How to Optimize a CUDA Matmul Kernel for cuBLAS-like Performance: a "
               "Worklog', in the README of his SGEMM_CUDA repository (table last updated 2023-03-04)",
     "url": "https://github.com/siboehm/SGEMM_CUDA"},
    {"topic": "matmul_kernels", "value": 1986.5, "label": '2: one output per thread, coalesced loads (8.5%): our naive kernel',
     "device": "NVIDIA A6000 (Ampere)", "unit": "GFLOP/s", "precision": "float32",
     "conditions": "SGEMM at matrix size 4092 x 4092 (the README: 'GFLOPs at matrix size 4092x4092'), the author's "
                   "benchmark harness; repeats and clocks not stated",
     "date": "2023-03-04",
     "figure": "the same kernel with coalesced loads ('2: GMEM Coalescing') ran at 1986.5 GFLOP/s, 8.5% of "
               "cuBLAS",
     "why": "each thread reads a row of A and a column of B from global memory for every output: only the caches "
            "give any reuse",
     "source": "S. Boehm, results table of 'How to Optimize a CUDA Matmul Kernel for cuBLAS-like Performance: a "
               "Worklog', in the README of his SGEMM_CUDA repository (table last updated 2023-03-04)",
     "url": "https://github.com/siboehm/SGEMM_CUDA"},
    {"topic": "matmul_kernels", "value": 2980.3, "label": "3: shared-memory tiles, 32 x 32 (12.8%): Exercise 1's kernel",
     "device": "NVIDIA A6000 (Ampere)", "unit": "GFLOP/s", "precision": "float32",
     "conditions": "SGEMM at matrix size 4092 x 4092 (the README: 'GFLOPs at matrix size 4092x4092'), the author's "
                   "benchmark harness; repeats and clocks not stated",
     "date": "2023-03-04",
     "figure": "the shared-memory tiled kernel ('3: SMEM Caching', 32 x 32 tiles) ran at 2980.3 GFLOP/s, 12.8% of "
               "cuBLAS: 1.5 times the coalesced kernel above",
     "why": "tiles cut each thread's global reads 32-fold, yet every product still loads two values from shared "
            "memory (our reading: shared-memory traffic is the next limit, which register tiling lifts)",
     "source": "S. Boehm, results table of 'How to Optimize a CUDA Matmul Kernel for cuBLAS-like Performance: a "
               "Worklog', in the README of his SGEMM_CUDA repository (table last updated 2023-03-04)",
     "url": "https://github.com/siboehm/SGEMM_CUDA"},
    {"topic": "matmul_kernels", "value": 15971.7, "label": '5: register tiles, 8 x 8 outputs per thread (68.7%)',
     "device": "NVIDIA A6000 (Ampere)", "unit": "GFLOP/s", "precision": "float32",
     "conditions": "SGEMM at matrix size 4092 x 4092 (the README: 'GFLOPs at matrix size 4092x4092'), the author's "
                   "benchmark harness; repeats and clocks not stated",
     "date": "2023-03-04",
     "figure": "computing an 8 x 8 block of outputs per thread from registers ('5: 2D Blocktiling') reached 15971.7 "
               "GFLOP/s, 68.7% of cuBLAS",
     "why": "each value loaded from shared memory into a register is used for 8 products: register tiling is the "
            "step that a one-output-per-thread tiled kernel lacks",
     "source": "S. Boehm, results table of 'How to Optimize a CUDA Matmul Kernel for cuBLAS-like Performance: a "
               "Worklog', in the README of his SGEMM_CUDA repository (table last updated 2023-03-04)",
     "url": "https://github.com/siboehm/SGEMM_CUDA"},
    {"topic": "matmul_kernels", "value": 21779.3, "label": "10: warp tiles, the worklog's best (93.7%)",
     "device": "NVIDIA A6000 (Ampere)", "unit": "GFLOP/s", "precision": "float32",
     "conditions": "SGEMM at matrix size 4092 x 4092 (the README: 'GFLOPs at matrix size 4092x4092'), the author's "
                   "benchmark harness; repeats and clocks not stated",
     "date": "2023-03-04",
     "figure": "the best hand-written kernel of the worklog ('10: Warptiling') reached 21779.3 GFLOP/s, 93.7% of "
               "cuBLAS",
     "why": "closing the gap took register and warp tiling, vectorised loads, double buffering and autotuning on "
            "top of shared-memory tiles",
     "source": "S. Boehm, results table of 'How to Optimize a CUDA Matmul Kernel for cuBLAS-like Performance: a "
               "Worklog', in the README of his SGEMM_CUDA repository (table last updated 2023-03-04)",
     "url": "https://github.com/siboehm/SGEMM_CUDA"},
    {"topic": "matmul_kernels", "value": 23249.6, "label": 'cuBLAS (100%)',
     "device": "NVIDIA A6000 (Ampere)", "unit": "GFLOP/s", "precision": "float32",
     "conditions": "SGEMM at matrix size 4092 x 4092 (the README: 'GFLOPs at matrix size 4092x4092'), the author's "
                   "benchmark harness; repeats and clocks not stated",
     "date": "2023-03-04",
     "figure": "cuBLAS (float32 SGEMM) ran at 23249.6 GFLOP/s",
     "why": "NVIDIA's library, tuned per GPU and per shape: the yardstick of the worklog's table",
     "source": "S. Boehm, results table of 'How to Optimize a CUDA Matmul Kernel for cuBLAS-like Performance: a "
               "Worklog', in the README of his SGEMM_CUDA repository (table last updated 2023-03-04)",
     "url": "https://github.com/siboehm/SGEMM_CUDA"},
    # ------------------------------------------------------------------ histogram (lesson 05)
    {"topic": "histogram", "device": "H100", "value": 3.89, "unit": "GB/s", "precision": "int32 counts",
     "label": 'one global atomic per element: 276.13 ms',
     "conditions": "2^30 uniformly random unsigned char inputs, 256 bins, blocks of 512 threads; bandwidth counts "
                   "the input bytes; repeats not stated",
     "date": "2026-01-21",
     "figure": "one global atomicAdd per element took 276.13 ms, 3.89 GB/s of input: 0.1% of the memory bandwidth",
     "why": "our reading: every update of a bin queues on the same few words of global memory, whatever the "
            "bandwidth",
     "source": "yencal, gpu-histogram-optimization, README 'Results (H100)' (companion code of the post 'GPU "
               "Histogram: From Global Atomics to Shared Memory Privatization')",
     "url": "https://github.com/yencal/gpu-histogram-optimization"},
    {"topic": "histogram", "device": "H100", "value": 703.1, "unit": "GB/s", "precision": "int32 counts",
     "label": 'private histogram per block: 1.53 ms, 180 times faster',
     "conditions": "2^30 uniformly random unsigned char inputs, 256 bins, blocks of 512 threads; bandwidth counts "
                   "the input bytes; repeats not stated",
     "date": "2026-01-21",
     "figure": "a private histogram per block in shared memory, merged with one global atomic per bin and block, "
               "took 1.53 ms, 703.1 GB/s: 180 times faster (vectorised loads: 2297.21 GB/s; CUB's "
               "DeviceHistogram: 2139.35)",
     "why": "our reading: the block's threads compete only in shared memory, and global memory sees at most 256 "
            "atomics per block instead of one per element",
     "source": "yencal, gpu-histogram-optimization, README 'Results (H100)' (companion code of the post 'GPU "
               "Histogram: From Global Atomics to Shared Memory Privatization')",
     "url": "https://github.com/yencal/gpu-histogram-optimization"},
    # ------------------------------------------------------------------ transpose (lesson 05)
    {"topic": "transpose", "device": "H100", "value": 475.5, "unit": "GB/s", "precision": "float32",
     "label": 'one element per thread, writes not coalesced (14.2% of peak)',
     "conditions": "32768 x 32768 matrix (8.6 GB read + write), 20 kernel variants; the post takes 3352.3 GB/s as "
                   "the theoretical peak; repeats and clocks not stated",
     "date": "2025-12-24",
     "figure": "the naive transpose, one element per thread in 32 x 32 blocks, moved 475.5 GB/s, 14.2% of peak",
     "why": "the post: reads are coalesced, writes are not (consecutive threads write N elements apart)",
     "source": "yencal, 'Optimizing GPU Matrix Transpose: From 14% to 88% of Peak Bandwidth' (blog post, results "
               "table)",
     "url": "https://yencal.github.io/gpu-matrix-transpose-optimization"},
    {"topic": "transpose", "device": "H100", "value": 996.1, "unit": "GB/s", "precision": "float32",
     "label": '32 x 32 shared tile, both ways coalesced (29.7%)',
     "conditions": "32768 x 32768 matrix (8.6 GB read + write), 20 kernel variants; the post takes 3352.3 GB/s as "
                   "the theoretical peak; repeats and clocks not stated",
     "date": "2025-12-24",
     "figure": "through a 32 x 32 shared tile, reads and writes both coalesced, it moved 996.1 GB/s (29.7%)",
     "why": "the post: reading the unpadded tile down a column causes 32-way shared-memory bank conflicts",
     "source": "yencal, 'Optimizing GPU Matrix Transpose: From 14% to 88% of Peak Bandwidth' (blog post, results "
               "table)",
     "url": "https://yencal.github.io/gpu-matrix-transpose-optimization"},
    {"topic": "transpose", "device": "H100", "value": 1693.4, "unit": "GB/s", "precision": "float32",
     "label": 'tile padded to 32 x 33, no bank conflicts (50.5%)',
     "conditions": "32768 x 32768 matrix (8.6 GB read + write), 20 kernel variants; the post takes 3352.3 GB/s as "
                   "the theoretical peak; repeats and clocks not stated",
     "date": "2025-12-24",
     "figure": "with the tile padded to 32 x 33 it moved 1693.4 GB/s (50.5%), 1.7 times the unpadded tile",
     "why": "the post: one element of padding per row breaks the conflict pattern",
     "source": "yencal, 'Optimizing GPU Matrix Transpose: From 14% to 88% of Peak Bandwidth' (blog post, results "
               "table)",
     "url": "https://yencal.github.io/gpu-matrix-transpose-optimization"},
    {"topic": "transpose", "device": "H100", "value": 2775.3, "unit": "GB/s", "precision": "float32",
     "label": "padded tile, 32 x 4 threads, 8 elements each (82.8%): Exercise 3's",
     "conditions": "32768 x 32768 matrix (8.6 GB read + write), 20 kernel variants; the post takes 3352.3 GB/s as "
                   "the theoretical peak; repeats and clocks not stated",
     "date": "2025-12-24",
     "figure": "the padded tile moved by blocks of 32 x 4 threads, eight elements each (Exercise 3's shape), "
               "reached 2775.3 GB/s, 82.8% of peak; the best variant, with 64 x 64 tiles and vector loads, 2940.5",
     "why": "the post: coarsening amortises index calculations and improves instruction-level parallelism",
     "source": "yencal, 'Optimizing GPU Matrix Transpose: From 14% to 88% of Peak Bandwidth' (blog post, results "
               "table)",
     "url": "https://yencal.github.io/gpu-matrix-transpose-optimization"},
    # ------------------------------------------------------------------ triton_kernels (lesson 06)
    {"topic": "triton_kernels", "device": "A100", "value": 245, "unit": "TFLOP/s", "precision": "float16",
     "conditions": "the tutorial's matrix multiply kernel; matrix sizes not stated in that sentence",
     "date": "2024",
     "figure": "the Triton tutorial's FP16 matrix multiply goes from 220 to 245 TFLOP/s when its programs are launched "
               "in groups that reuse tiles of A and B from the L2 cache (the tutorial: 'more than 10% on some "
               "hardware architecture')",
     "why": "the order in which programs run decides how often a tile is read from memory rather than from L2: "
            "the same arithmetic, fewer bytes",
     "source": "Triton tutorial 'Matrix Multiplication' (python/tutorials/03-matrix-multiplication.py)",
     "url": "https://github.com/triton-lang/triton/blob/main/python/tutorials/03-matrix-multiplication.py"},
    # ------------------------------------------------------------------ torch_compile, cuda_graphs (lesson 10)
    {"topic": "torch_compile", "device": "A100", "value": 43, "unit": "%", "precision": "float32 and AMP",
     "conditions": "163 open-source models (46 HuggingFace, 61 TIMM, 56 TorchBench), unmodified but for "
                   "torch.compile; pre-release 2.0 nightlies, default inductor backend",
     "date": "2022-12-02",
     "figure": "torch.compile worked on 93% of 163 models and they ran 43% faster in training (a weighted mean of "
               "21% faster in float32 and 51% with AMP)",
     "why": "fused elementwise kernels and fewer launches; the page adds that on a desktop GPU such as an RTX 3090 "
            "the speed-ups it measured were lower than on server-class GPUs",
     "source": "PyTorch, 'Get Started: PyTorch 2.0' (announcement page)",
     "url": "https://pytorch.org/get-started/pytorch-2.0/"},
    {"topic": "cuda_graphs", "device": "NVIDIA GPUs of MLPerf Training v1.0 (272 for Mask R-CNN, 4096 for BERT)",
     "value": 1.70, "unit": "x", "precision": "not stated",
     "conditions": "NVIDIA's MLPerf Training v1.0 submissions in PyTorch; Mask R-CNN at batch 1 per GPU",
     "date": "2021-10-26",
     "figure": "CUDA Graphs made training 1.70x faster end to end for Mask R-CNN and 1.12x for BERT; in Mask R-CNN "
               "the graphed part, mostly the ResNet backbone, ran in 6 ms instead of 31 ms",
     "why": "at a small batch per GPU the CPU was busy 100% launching kernels while the GPU idled; one graph launch "
            "replaces the many kernel launches",
     "source": "PyTorch blog, 'Accelerating PyTorch with CUDA Graphs'",
     "url": "https://pytorch.org/blog/accelerating-pytorch-with-cuda-graphs/"},
    # ------------------------------------------------------------------ attention (lesson 11)
    {"topic": "attention", "device": "H100", "value": 740, "unit": "TFLOP/s", "precision": "float16 (FP8: close to "
                                                                                         "1.2 PFLOP/s)",
     "conditions": "FlashAttention-3 forward and backward kernels; sizes in the paper, not in the abstract",
     "date": "2024-07-11",
     "figure": "FlashAttention-3 reaches up to 740 TFLOP/s in FP16 (75% utilization) and close to 1.2 PFLOP/s in "
               "FP8, 1.5-2.0x faster than FlashAttention-2",
     "why": "a fused, tiled kernel that overlaps computation and data movement (warp specialisation, asynchronous "
            "Tensor Cores and TMA) and interleaves its block-wise matrix multiplies with the softmax",
     "source": "Shah et al., 'FlashAttention-3: Fast and Accurate Attention with Asynchrony and Low-precision' "
               "(abstract, arXiv 2407.08608)",
     "url": "https://arxiv.org/abs/2407.08608"},
    {"topic": "attention", "device": "H100", "value": 35, "unit": "%", "precision": "not stated",
     "conditions": "not stated in the abstract",
     "date": "2024-07-11",
     "figure": "FlashAttention-2 reaches only 35% utilization of the GPU",
     "why": "the same paper's starting point: a kernel tuned for the A100 leaves the H100's new asynchronous "
            "features unused",
     "source": "Shah et al., 'FlashAttention-3: Fast and Accurate Attention with Asynchrony and Low-precision' "
               "(abstract, arXiv 2407.08608)",
     "url": "https://arxiv.org/abs/2407.08608"},
    # ------------------------------------------------------------------ allreduce (lesson 14)
    {"topic": "allreduce", "device": "A100 node (NVLink, 600 GB/s advertised duplex, 300 GB/s one way)",
     "value": 235, "unit": "GB/s", "precision": "not stated",
     "conditions": "nccl-tests all_reduce benchmark; payload not stated; in the book since 2023-12-15",
     "date": "2026-08-22",
     "figure": "235 GB/s: 40% of the advertised 600 GB/s, 80% of the 300 GB/s that one direction carries",
     "why": "a link's advertised speed counts both directions; an all-reduce is limited by one direction, and about "
            "80% of that is what a good measurement reaches",
     "source": "S. Bekman, 'Machine Learning Engineering', network chapter ('Unidirectional vs Bidirectional')",
     "url": "https://github.com/stas00/ml-engineering/blob/master/network/README.md"},
    {"topic": "allreduce", "device": "8x H200 in one node (NVLink 4, NVSwitch, 450 GB/s one way)",
     "value": 482.26, "unit": "GB/s", "precision": "not stated",
     "conditions": "all_reduce_bench.py payload sweep; torch 2.9.1, CUDA 13.0, NCCL 2.27.7; 5 warm-up and 20 timed "
                   "runs per payload",
     "date": "2026-08-22",
     "figure": "the sweep tops out at 482.26 GB/s busbw, above the 450 GB/s NVLink 4 spec",
     "why": "at large payloads NCCL's NVLS algorithm reduces inside the NVSwitch (SHARP), so fewer bytes cross the "
            "links than the ring formula behind busbw assumes",
     "source": "S. Bekman, 'Machine Learning Engineering', network benchmarks ('all_reduce benchmark')",
     "url": "https://github.com/stas00/ml-engineering/blob/master/network/benchmarks/README.md"},
    {"topic": "allreduce", "device": "8x B200 in one node (NVLink 5)",
     "value": 845.67, "unit": "GB/s", "precision": "not stated",
     "conditions": "all_reduce_bench.py; torch 2.9.1, CUDA 13.0, NCCL 2.27.7; busbw by payload",
     "date": "2026-08-22",
     "figure": "all-reduce busbw 1.20 GB/s at a 32 KiB payload, 36.06 GB/s at 1 MiB, 254.96 GB/s at 16 MiB, "
               "845.67 GB/s at 16 GiB",
     "why": "small messages are latency-bound: the same GPUs and links give 700 times more bandwidth on a large "
            "payload than on a small one, so bucket size matters",
     "source": "S. Bekman, 'Machine Learning Engineering', network chapter ('Inter-node speed depends on intra-node "
               "speed', the 1-node column)",
     "url": "https://github.com/stas00/ml-engineering/blob/master/network/README.md"},
    # ------------------------------------------------------------------ allreduce_scaling (lesson 15)
    {"topic": "allreduce_scaling", "device": "Hugging Face's cluster, 8 GPUs per node",
     "value": 32.9, "unit": "GB/s", "precision": "not stated",
     "conditions": "256 MB message, median over runs; the figure does not say whether this is algorithm or bus "
                   "bandwidth",
     "date": "2025-02-19",
     "figure": "median all-reduce bandwidth of a 256 MB message: 436.0 GB/s on 1 node, 361.7 on 2, 160.1 on 4, 99.6 on "
               "8, 84.7 on 16, 64.9 on 32 and 32.9 GB/s on 64 nodes (all-gather and reduce-scatter: about 250 GB/s "
               "on 1 node, about 11 GB/s on 64); the 5th-95th percentile range is wide (12.5 to 177 GB/s for the "
               "all-reduce on 64 nodes)",
     "why": "the playbook: going past the GPUs of one node 'forces us to use lower-bandwidth network "
            "communication'; each added node puts more of a collective's traffic on that network",
     "source": "Tazi et al., 'The Ultra-Scale Playbook: Training LLMs on GPU Clusters', section Pipeline Parallelism, "
               "figure 'Communication Bandwidth by Number of Nodes (size=256MB)' (fragment pp_comm_bandwidth.html)",
     "url": "https://huggingface.co/spaces/nanotron/ultrascale-playbook"},
    # ------------------------------------------------------------------ mixed_precision (lesson 12)
    {"topic": "mixed_precision", "device": "NVIDIA DGX A100 (8x A100 80GB), 1 GPU", "value": 2470, "unit": "images/s",
     "precision": "mixed precision (AMP) against TF32",
     "conditions": "ResNet-50 v1.5 training on ImageNet, --mode benchmark_training, 100 iterations; pytorch-21.03 "
                   "NGC container; batch size not stated in the table",
     "date": "2021",
     "figure": "ResNet-50 v1.5 trained at 2,470 images/s with mixed precision against 938 images/s in TF32 on one "
               "A100 (2.63x); on all 8 GPUs 16,621 against 7,248 (2.29x)",
     "why": "our reading (the README states no cause): float16 convolutions run at a higher Tensor Core rate than "
            "TF32 and move half the bytes; the README gives 90 epochs in about 14 h against about 36 h on one GPU",
     "source": "NVIDIA DeepLearningExamples, 'ResNet50 v1.5 For PyTorch' (README, Training performance results)",
     "url": "https://github.com/NVIDIA/DeepLearningExamples/blob/master/PyTorch/Classification/ConvNets/"
            "resnet50v1.5/README.md"},
    {"topic": "mixed_precision", "device": "NVIDIA DGX-1 (8x V100 16GB), 1 GPU", "value": 1200, "unit": "images/s",
     "precision": "mixed precision (AMP) against FP32",
     "conditions": "ResNet-50 v1.5 training on ImageNet, --mode benchmark_training, 100 iterations; pytorch-21.03 "
                   "NGC container; batch size not stated in the table",
     "date": "2021",
     "figure": "on one V100 ResNet-50 v1.5 trained at 1,200 images/s with mixed precision against 367 images/s in "
               "FP32 (3.26x); on all 8 GPUs 8,322 against 2,855 (2.91x)",
     "why": "our reading: the V100 has no TF32, so its baseline is plain FP32 without Tensor Cores while mixed "
            "precision uses them, hence a larger gain than on the A100; 90 epochs take about 29 h against about 92 h",
     "source": "NVIDIA DeepLearningExamples, 'ResNet50 v1.5 For PyTorch' (README, Training performance results)",
     "url": "https://github.com/NVIDIA/DeepLearningExamples/blob/master/PyTorch/Classification/ConvNets/"
            "resnet50v1.5/README.md"},
    # ------------------------------------------------------------------ coalescing (lesson 04)
    {"topic": "coalescing", "device": "NVIDIA RTX A6000", "value": 15, "unit": "GB/s", "precision": "float32",
     "conditions": "naive SGEMM kernel, one thread per element of C, three 4092 x 4092 matrices; global-memory "
                   "throughput read from a profile",
     "date": "2022-12",
     "figure": "a matmul kernel whose warps read A down a column (32 addresses a whole row apart) moved only 15 GB/s "
               "of global memory, on a GPU advertised with 768 GB/s",
     "why": "the 32 threads of a warp touch 32 different sectors, so most bytes moved are thrown away; the kernel "
            "reached 309 GFLOP/s, 1.3% of cuBLAS",
     "source": "S. Boehm, 'How to Optimize a CUDA Matmul Kernel for cuBLAS-like Performance: a Worklog', kernel 1",
     "url": "https://siboehm.com/articles/22/CUDA-MMM"},
    {"topic": "coalescing", "device": "NVIDIA RTX A6000", "value": 110, "unit": "GB/s", "precision": "float32",
     "conditions": "the same kernel with only the thread-to-element mapping changed (kernel 2), same 4092 x 4092 "
                   "matrices; global-memory throughput read from a profile",
     "date": "2022-12",
     "figure": "remapping threads so that a warp reads neighbouring addresses raised global-memory throughput from "
               "15 to 110 GB/s and the kernel from 309 to 1,986.5 GFLOP/s",
     "why": "no arithmetic changed: the same bytes are read in an order the hardware can coalesce into few sectors "
            "(the worklog: 'Global memory coalescing increases memory throughput from 15GB/s to 110GB/s')",
     "source": "S. Boehm, 'How to Optimize a CUDA Matmul Kernel for cuBLAS-like Performance: a Worklog', kernel 2",
     "url": "https://siboehm.com/articles/22/CUDA-MMM"},
    # ------------------------------------------------------------------ sustained (lesson 09, gpucourse.sustained)
    {"topic": "sustained", "device": "one NVIDIA T4 on an AWS g4dn.4xlarge", "value": 900, "unit": "MHz",
     "precision": "not stated",
     "conditions": "MLPerf Inference v0.5 BERT, SingleStream scenario; application clocks set with "
                   "nvidia-smi -ac 5001,1590; driver 440.33.01, CUDA 10.2",
     "date": "2020-06-16",
     "figure": "with its clock set to the maximum supported 1,590 MHz the T4 was 'not really stable, dropping down "
               "to ~900 MHz in a SingleStream run'",
     "why": "the comment gives no cause; a T4 is limited to 70 W (the 'About GPU peak performance' thread under "
            "matmul blames power capping for its low sustained rate)",
     "source": "psyhtest, comment in 'T4 setting to achieve maximum performance', mlcommons/inference_results_v0.5 "
               "issue 20",
     "url": "https://github.com/mlcommons/inference_results_v0.5/issues/20"},
    {"topic": "sustained", "device": "NVIDIA B200", "value": 1580, "unit": "MHz", "precision": "bfloat16",
     "conditions": "FlashAttention-4 attention, b=4 s=8192 h=16 d=128, 100 event-timed iterations run back to back",
     "date": "2026-03-26",
     "figure": "running kernels back to back drew about 1,000 W and the SM clock fell from 1,965 MHz to about "
               "1580 MHz; throughput fell from 1,450 TFLOP/s (iterations 10-19) to 1,237 (iterations 70-79), -15%",
     "why": "sustained peak power forces the clock down; with the natural CPU gaps between calls the GPU drew about "
            "250 W, so the PR inserts cooling gaps every ~5 ms of compute in its benchmark utilities",
     "source": "Edenzzzz, 'bench: fix GPU power throttling in benchmark utilities', flashinfer-ai/flashinfer pull "
               "request 2899",
     "url": "https://github.com/flashinfer-ai/flashinfer/pull/2899"},
    {"topic": "sustained", "device": "RTX 3090 (315 W power cap)", "value": 314, "unit": "W", "precision": "not stated",
     "conditions": "nvidia-smi sampled at 2 Hz through a 27B-model decode (tg1024) and a pp8192 prefill, 3 runs each; "
                   "medians over busy samples",
     "date": "2026-09-09",
     "figure": "board power stayed at a median 314 W, the power cap was active in 161-168 of 162-168 decode samples, "
               "and the SM clock held 1,500-1,515 MHz against a rated 1,695 MHz boost",
     "why": "the PR: 'The cap is permanently binding' and 'it is the only thing throttling' (no thermal-throttle "
            "sample in any run); the memory clock stayed at 9,501 MHz throughout",
     "source": "ashalliants, 'Measure the 315 W power cap: it binds continuously, and never touches memory clock', "
               "ashalliants/ninfer-3090 pull request 72",
     "url": "https://github.com/ashalliants/ninfer-3090/pull/72"},
)
"""Published measurements worth setting beside the course's own, each with its source."""
