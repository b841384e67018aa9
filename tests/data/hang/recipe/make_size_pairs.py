"""Make the real Gloo size-mismatch runs of tests/data/hang/size-pairs: one torchrun job per
case, PyTorch 2.13 CPU, Gloo on 127.0.0.1, where one rank calls a collective with a tensor of
another size than its peers. The console (torchrun's stdout and stderr) is kept as it was
printed; cases.yaml gets the odd rank from the case, not from any diagnoser.

    python make_size_pairs.py OUTDIR [--torchrun /tmp/torchvenv/bin/torchrun]

Which rank aborts ("Received data size doesn't match expected size") depends on the
collective's Gloo algorithm and on whether the odd tensor is the bigger or the smaller one:
that is what the cases vary.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

# case: (collective, world size, odd rank, how the odd rank's tensor differs)
CASES = {
    "allreduce-bigger": ("all_reduce", 4, 2, "bigger"),
    "allreduce-smaller": ("all_reduce", 4, 2, "smaller"),
    "allreduce-float64": ("all_reduce", 5, 0, "float64"),
    "allgather-bigger": ("all_gather", 4, 1, "bigger"),
    "broadcast-root-bigger": ("broadcast", 5, 0, "bigger"),
    "broadcast-relay-bigger": ("broadcast", 4, 1, "bigger"),
}

TRAIN = '''
import datetime, os, sys, torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=8))
rank, world = dist.get_rank(), dist.get_world_size()
op, odd, how = os.environ["CASE_OP"], int(os.environ["CASE_ODD"]), os.environ["CASE_HOW"]
for step in range(3):
    dist.all_reduce(torch.ones(256))
    print(f"rank {rank} step {step} ok", flush=True)
t = torch.ones(100)
if rank == odd:
    t = {"bigger": torch.ones(107), "smaller": torch.ones(93),
         "float64": torch.ones(100, dtype=torch.float64)}[how]
if op == "all_reduce":
    dist.all_reduce(t)
elif op == "all_gather":
    dist.all_gather([torch.empty_like(t) for _ in range(world)], t)
else:
    dist.broadcast(t, src=0)
print(f"rank {rank} done", flush=True)
dist.destroy_process_group()
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--torchrun", default="/tmp/torchvenv/bin/torchrun")
    args = ap.parse_args()
    work = tempfile.mkdtemp()          # a neutral path: tracebacks name no case
    script = os.path.join(work, "train.py")
    with open(script, "w") as f:
        f.write(TRAIN)
    expected = ["# The odd rank of each case, from the case itself (make_size_pairs.py CASES).",
                "# Which rank aborts follows from the collective's Gloo algorithm; see the README."]
    for port, (name, (op, world, odd, how)) in enumerate(sorted(CASES.items()), start=29610):
        env = dict(os.environ, CASE_OP=op, CASE_ODD=str(odd), CASE_HOW=how)
        run = subprocess.run([args.torchrun, "--nproc-per-node", str(world), "--master-port", str(port), script],
                             env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
        folder = os.path.join(args.out, name)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "console.log"), "wb") as f:
            f.write(run.stdout)
        expected.append(f"{name}: {{op: {op}, world: {world}, odd: {odd}, odd_tensor: {how}}}")
        print(name, "exit", run.returncode, file=sys.stderr)
    with open(os.path.join(args.out, "cases.yaml"), "w") as f:
        f.write("\n".join(expected) + "\n")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
