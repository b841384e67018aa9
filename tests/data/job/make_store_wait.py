"""Two real torchrun runs where one rank never sets a store key the others wait for
(PyTorch 2.13 CPU, Gloo, 127.0.0.1, 4 ranks; rank 2 is the one, by construction):

    MODE=init torchrun --nproc-per-node 4 make_store_wait.py > store-init-rank2.log 2>&1
    MODE=get  torchrun --nproc-per-node 4 make_store_wait.py > store-get-rank2.log 2>&1

init: rank 2 sleeps 30 s before init_process_group; the others time out in Gloo's
rendezvous waiting for rank 2's address key. get: every rank but 2 sets "ready_<rank>",
then each reads its right neighbour's key (rank 1 waits for "ready_2").
"""
import datetime
import os
import time

import torch.distributed as dist

mode = os.environ["MODE"]
rank = int(os.environ["RANK"])
if mode == "init" and rank == 2:
    time.sleep(30)
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=6))
world = dist.get_world_size()
if mode == "get":
    store = dist.distributed_c10d._get_default_store()
    if rank != 2:
        store.set(f"ready_{rank}", "1")
    store.get(f"ready_{(rank + 1) % world}")
    if rank == 2:
        time.sleep(30)
print(f"rank {rank} passed", flush=True)
dist.destroy_process_group()
