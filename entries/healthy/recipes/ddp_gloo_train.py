"""Tiny DDP regression on random data, gloo backend, CPU only.

Each rank prints its loss every few steps, so the log looks like a normal
healthy multi-rank job. Launch with torchrun (see README for commands).
"""
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--print-every", type=int, default=5)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234 + rank)
    model = DistributedDataParallel(torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    print(f"rank {rank}/{world} local_rank {os.environ['LOCAL_RANK']} ready", flush=True)
    for step in range(1, args.steps + 1):
        x = torch.randn(16, 32)
        y = x.sum(dim=1, keepdim=True) * 0.1
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % args.print_every == 0:
            print(f"rank {rank} step {step}/{args.steps} loss {loss.item():.4f}", flush=True)
    # Average a checksum so every rank takes part in one last collective.
    total = torch.tensor([loss.item()])
    dist.all_reduce(total)
    if rank == 0:
        print(f"done: mean final loss {total.item() / world:.4f} over {world} ranks", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
