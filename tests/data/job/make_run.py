import os, time, torch, torch.distributed as dist
from datetime import timedelta
dist.init_process_group("gloo", timeout=timedelta(seconds=8))
r = dist.get_rank()
for step in range(6):
    x = torch.ones(4)
    if step == 3 and r == int(os.environ.get("BAD", "2")):
        if os.environ.get("MODE") == "hang":
            time.sleep(60)
        elif os.environ.get("MODE") == "exit0":
            os._exit(0)
        else:
            [1,2][5]
    dist.all_reduce(x)
    print(f"step {step} loss {x[0].item()}")
dist.destroy_process_group()
