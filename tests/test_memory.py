

def test_matmul_flops_counts_forward_backward_and_nests_with_a_memory_cap():
    import torch

    from gpucourse import memory

    a, b = torch.randn(4, 5, requires_grad=True), torch.randn(5, 6)
    with memory.MemoryCap(10**6), memory.MatmulFlops() as counter:
        (a @ b).sum().backward()
    assert counter.total == 2 * (2 * 4 * 5 * 6)  # the forward product and the gradient of a
