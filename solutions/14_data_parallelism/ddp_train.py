"""Train the lesson's network with DistributedDataParallel: one process per rank, started by torchrun."""
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from gpucourse.parallel import bn_mlp


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)                   # a file: {'x': ..., 'y': ...}
    parser.add_argument("--out", required=True)                    # where rank 0 saves the weights
    parser.add_argument("--batch-per-rank", type=int, required=True)
    parser.add_argument("--lr", type=float, required=True)
    args = parser.parse_args()
    ### BEGIN SOLUTION
    local_rank = int(os.environ["LOCAL_RANK"])                     # this process's GPU on its node
    nccl = torch.cuda.device_count() >= int(os.environ["LOCAL_WORLD_SIZE"])  # a GPU for every process of the node
    if nccl:
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if nccl else "gloo")            # rank, world size, address: torchrun's variables
    device = torch.device("cuda", local_rank) if nccl else torch.device("cpu")
    data = torch.load(args.data)
    dataset = TensorDataset(data["x"], data["y"])
    loader = DataLoader(dataset, batch_size=args.batch_per_rank,
                        sampler=DistributedSampler(dataset, shuffle=False))  # rank r: examples r, r + N, ...
    model = DistributedDataParallel(bn_mlp(data["x"].shape[1]).to(device), device_ids=[local_rank] if nccl else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    for x, y in loader:
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x.to(device)), y.to(device)).backward()
        optimizer.step()
    if dist.get_rank() == 0:                                       # the job's rank 0, not each node's LOCAL_RANK 0
        torch.save(model.module.state_dict(), args.out)
    dist.barrier()                                                 # nobody leaves while a peer still needs it
    dist.destroy_process_group()
    ### END SOLUTION


if __name__ == "__main__":
    main()
