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
               "(abstract)",
     "url": "https://huggingface.co/papers/2407.08608"},
    {"topic": "attention", "device": "H100", "value": 35, "unit": "%", "precision": "not stated",
     "conditions": "not stated in the abstract",
     "date": "2024-07-11",
     "figure": "FlashAttention-2 reaches only 35% utilization of the GPU",
     "why": "the same paper's starting point: a kernel tuned for the A100 leaves the H100's new asynchronous "
            "features unused",
     "source": "Shah et al., 'FlashAttention-3: Fast and Accurate Attention with Asynchrony and Low-precision' "
               "(abstract)",
     "url": "https://huggingface.co/papers/2407.08608"},
    # ------------------------------------------------------------------ allreduce (lesson 12)
    {"topic": "allreduce", "device": "A100 node (NVLink, 600 GB/s advertised duplex, 300 GB/s one way)",
     "value": 235, "unit": "GB/s", "precision": "not stated",
     "conditions": "nccl-tests all_reduce benchmark; payload not stated",
     "date": "2026-08",
     "figure": "235 GB/s: 40% of the advertised 600 GB/s, 80% of the 300 GB/s that one direction carries",
     "why": "a link's advertised speed counts both directions; an all-reduce is limited by one direction, and about "
            "80% of that is what a good measurement reaches",
     "source": "S. Bekman, 'Machine Learning Engineering', network chapter ('Unidirectional vs Bidirectional')",
     "url": "https://github.com/stas00/ml-engineering/blob/master/network/README.md"},
    {"topic": "allreduce", "device": "8x H200 in one node (NVLink 4, NVSwitch, 450 GB/s one way)",
     "value": 482.26, "unit": "GB/s", "precision": "not stated",
     "conditions": "all_reduce_bench.py payload sweep; torch 2.9.1, CUDA 13.0, NCCL 2.27.7; 5 warm-up and 20 timed "
                   "runs per payload",
     "date": "2026-08",
     "figure": "the sweep tops out at 482.26 GB/s busbw, above the 450 GB/s NVLink 4 spec",
     "why": "at large payloads NCCL's NVLS algorithm reduces inside the NVSwitch (SHARP), so fewer bytes cross the "
            "links than the ring formula behind busbw assumes",
     "source": "S. Bekman, 'Machine Learning Engineering', network benchmarks ('all_reduce benchmark')",
     "url": "https://github.com/stas00/ml-engineering/blob/master/network/benchmarks/README.md"},
    {"topic": "allreduce", "device": "8x B200 in one node (NVLink 5)",
     "value": 845.67, "unit": "GB/s", "precision": "not stated",
     "conditions": "all_reduce_bench.py; torch 2.9.1, CUDA 13.0, NCCL 2.27.7; busbw by payload",
     "date": "2026-08",
     "figure": "all-reduce busbw 1.20 GB/s at a 32 KiB payload, 36.06 GB/s at 1 MiB, 254.96 GB/s at 16 MiB, "
               "845.67 GB/s at 16 GiB",
     "why": "small messages are latency-bound: the same GPUs and links give 700 times more bandwidth on a large "
            "payload than on a small one, so bucket size matters",
     "source": "S. Bekman, 'Machine Learning Engineering', network chapter ('Inter-node speed depends on intra-node "
               "speed', the 1-node column)",
     "url": "https://github.com/stas00/ml-engineering/blob/master/network/README.md"},
    # ------------------------------------------------------------------ allreduce_scaling (lesson 13)
    {"topic": "allreduce_scaling", "device": "Hugging Face's cluster, 8 GPUs per node",
     "value": 32.9, "unit": "GB/s", "precision": "not stated",
     "conditions": "256 MB message, median over runs; the figure does not say whether this is algorithm or bus "
                   "bandwidth",
     "date": "2025-02",
     "figure": "median all-reduce bandwidth of a 256 MB message: 436.0 GB/s on 1 node, 361.7 on 2, 160.1 on 4, 99.6 on "
               "8, 84.7 on 16, 64.9 on 32 and 32.9 GB/s on 64 nodes (all-gather and reduce-scatter: about 250 GB/s "
               "on 1 node, about 11 GB/s on 64); the 5th-95th percentile range is wide (12.5 to 177 GB/s for the "
               "all-reduce on 64 nodes)",
     "why": "the playbook: going past the GPUs of one node 'forces us to use lower-bandwidth network "
            "communication'; each added node puts more of a collective's traffic on that network",
     "source": "Tazi et al., 'The Ultra-Scale Playbook: Training LLMs on GPU Clusters', section Pipeline Parallelism, "
               "figure 'Communication Bandwidth by Number of Nodes (size=256MB)' (fragment pp_comm_bandwidth.html)",
     "url": "https://huggingface.co/spaces/nanotron/ultrascale-playbook"},
)
"""Published measurements worth setting beside the course's own, each with its source."""
