"""Make one real hang with PyTorch (CPU, Gloo, 4 ranks on 127.0.0.1) and keep
what a failed job leaves behind: each rank's stderr, flight-recorder dumps
(pickle and JSON), a py-spy dump and a faulthandler dump of every rank while
the job hangs.

    python make_hang.py SCENARIO OUTDIR      (SCENARIO: see SCENARIOS below)

Needs torch (tested with 2.13.0 CPU) and py-spy in the running Python's venv.
Each rank runs STEPS all-reduces that every rank joins, then the scenario's
collective, where one rank does something else. A rank whose collective fails
writes its flight recorder the way PyTorch names dumps (<prefix><rank>).
"""
import datetime
import faulthandler
import os
import socket
import subprocess
import sys
import time

WORLD = 4
TIMEOUT_S = 8        # process-group timeout: the hang is detected after this
STEPS = 3
ODD = {"skip": 2, "late": 1, "op": 3, "size": 3, "dtype": 3, "two-groups": 3}
SCENARIOS = sorted(ODD)


def rank_main(scenario, out, rank):
    import torch
    import torch.distributed as dist
    from torch._C import _distributed_c10d as c10d

    dist.init_process_group("gloo", rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=TIMEOUT_S))
    # The first dump imports much of torch; do it now, not while the job is failing.
    c10d._dump_fr_trace(True, True)
    odd = rank == ODD[scenario]
    pair = None
    if scenario == "two-groups":
        # every rank must create every group, in the same order
        low = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=TIMEOUT_S))
        high = dist.new_group([2, 3], timeout=datetime.timedelta(seconds=TIMEOUT_S))
        pair = low if rank < 2 else high
    try:
        for step in range(STEPS):
            t = torch.full((1024,), float(rank))
            dist.all_reduce(t)
            if pair is not None:
                dist.all_reduce(torch.ones(256), group=pair)
            print(f"rank {rank}: step {step} done", file=sys.stderr, flush=True)
        t = torch.ones(1024)
        # Tell the launcher this rank reached the scenario's collective, and dump
        # every thread's Python stack once it has been stuck there a while.
        open(os.path.join(out, f".reached_{rank}"), "w").close()
        stacks = open(os.path.join(out, "stacks", f"faulthandler_rank_{rank}.txt"), "w")
        faulthandler.dump_traceback_later(TIMEOUT_S * 0.5, file=stacks)
        if scenario == "skip":
            if not odd:
                dist.all_reduce(t)
        elif scenario == "late":
            if odd:
                time.sleep(TIMEOUT_S * 2)    # e.g. a checkpoint only this rank writes
            dist.all_reduce(t)
        elif scenario == "op":
            if odd:
                dist.broadcast(t, src=0)
            else:
                dist.all_reduce(t)
        elif scenario == "size":
            dist.all_reduce(torch.ones(2048) if odd else t)
        elif scenario == "dtype":
            dist.all_reduce(t.double() if odd else t)
        elif scenario == "two-groups":
            if rank < 2:
                dist.all_reduce(torch.ones(256), group=pair)
            elif not odd:
                dist.all_reduce(torch.ones(256), group=pair)
        print(f"rank {rank}: final collective done", file=sys.stderr, flush=True)
        # a rank that got through waits here, as a training loop would in its next step
        time.sleep(TIMEOUT_S * 3)
    except Exception as err:
        print(f"rank {rank}: collective failed: {type(err).__name__}", file=sys.stderr, flush=True)
        write_dumps(c10d, out, rank)
        raise
    finally:
        faulthandler.cancel_dump_traceback_later()
    write_dumps(c10d, out, rank)


def write_dumps(c10d, out, rank):
    with open(os.path.join(out, "fr", f"nccl_trace_rank_{rank}"), "wb") as fh:
        fh.write(c10d._dump_fr_trace(True, True))
    with open(os.path.join(out, "fr-json", f"nccl_trace_rank_{rank}.json"), "wb") as fh:
        fh.write(c10d._dump_fr_trace_json(True, True))


def launch(scenario, out):
    for sub in ("logs", "fr", "fr-json", "stacks"):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               TORCH_FR_BUFFER_SIZE="2000", GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    procs = []
    for rank in range(WORLD):
        log = open(os.path.join(out, "logs", f"rank_{rank}.log"), "w")
        procs.append(subprocess.Popen([sys.executable, __file__, scenario, out, "--rank", str(rank)],
                                      env=env, stdout=log, stderr=subprocess.STDOUT))
    # py-spy while the job hangs: once every rank reached the scenario's collective,
    # before the timeout fires
    reached = [os.path.join(out, f".reached_{r}") for r in range(WORLD)]
    deadline = time.monotonic() + 120
    while not all(map(os.path.exists, reached)) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(TIMEOUT_S * 0.3)
    spy = os.path.join(os.path.dirname(sys.executable), "py-spy")
    for rank, p in enumerate(procs):
        if p.poll() is None:
            with open(os.path.join(out, "stacks", f"pyspy_rank_{rank}.txt"), "w") as fh:
                subprocess.run([spy, "dump", "--pid", str(p.pid)], stdout=fh, stderr=subprocess.STDOUT)
    for p in procs:
        try:
            p.wait(timeout=TIMEOUT_S * 15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    for r in reached:
        if os.path.exists(r):
            os.remove(r)
    print(scenario, "exit codes", [p.returncode for p in procs])


if __name__ == "__main__":
    if "--rank" in sys.argv:
        rank_main(sys.argv[1], sys.argv[2], int(sys.argv[sys.argv.index("--rank") + 1]))
    else:
        if len(sys.argv) != 3 or sys.argv[1] not in SCENARIOS:
            sys.exit(f"usage: make_hang.py {{{','.join(SCENARIOS)}}} OUTDIR")
        launch(sys.argv[1], sys.argv[2])
