"""Small seeded training script with injectable faults (gloo, CPU).

Fault selection comes from env: SCEN, CULPRIT (global rank), FAULT_STEP,
SCEN_NODE (node name for node-level faults), RESTART_SCEN / RESTART_CULPRIT
(fault for attempt 1 after a marker from attempt 0 exists).
Side files (labels) go to SIDE_DIR, outside the run folder.
"""
import json, os, sys, time, signal, threading, traceback, warnings
from datetime import timedelta

RANK = int(os.environ["RANK"]); LRANK = int(os.environ["LOCAL_RANK"])
WS = int(os.environ["WORLD_SIZE"]); NODE = os.environ.get("NODE_NAME", "node0")
ATT = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
SIDE = os.environ["SIDE_DIR"]; MARKER = os.path.join(SIDE, "marker")

if os.environ.get("RANK_LOG_DIR"):
    f = open(os.path.join(os.environ["RANK_LOG_DIR"], f"rank_{RANK}.log"), "a")
    os.dup2(f.fileno(), 1); os.dup2(f.fileno(), 2)


def side(fired, scen=None):
    with open(os.path.join(SIDE, f"r{RANK}_a{ATT}.json"), "w") as fh:
        json.dump({"rank": RANK, "local_rank": LRANK, "node": NODE, "attempt": ATT,
                   "fired": fired, "scen": scen}, fh)


side(False)
scen = os.environ.get("SCEN", "healthy"); culprit = int(os.environ.get("CULPRIT", "-1"))
if ATT > 0:
    if os.path.exists(MARKER):
        scen = os.environ.get("RESTART_SCEN", "healthy"); culprit = int(os.environ.get("RESTART_CULPRIT", "-1"))
    else:
        scen = "healthy"
FSTEP = int(os.environ.get("FAULT_STEP", "3"))

if scen == "module_missing" and NODE == os.environ.get("SCEN_NODE"):
    side(True, scen)
    import apex_fused_adam_ext  # noqa: F401  (not installed on this node)

import torch
import torch.distributed as dist
from torch.utils.data import Dataset, DataLoader

torch.manual_seed(1234 + RANK)


class DS(Dataset):
    def __init__(self, kill_at=None):
        self.x = torch.randn(64, 16); self.y = torch.randn(64, 1); self.kill_at = kill_at
    def __len__(self):
        return 64
    def __getitem__(self, i):
        if self.kill_at is not None and i >= self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return self.x[i], self.y[i]


def fire():
    side(True, scen)
    if ATT == 0:
        open(MARKER, "w").write(f"{RANK}\n")


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=9))
    print(f"[rank {RANK}] init done world_size={WS} local_rank={LRANK} node={NODE}")
    if scen == "healthy" and os.environ.get("HEALTHY_EXTRA") == "warn":
        t = torch.ones(2); torch.tensor(t)  # real UserWarning
        warnings.warn("lr_scheduler.step() called before optimizer.step()", UserWarning)
    if scen == "healthy" and os.environ.get("HEALTHY_EXTRA") == "tb" and RANK == WS - 1:
        try:
            json.loads(open(os.path.join(os.path.dirname(__file__), "train.py")).read()[:10])
        except Exception:
            traceback.print_exc()
            print(f"[rank {RANK}] could not parse optional config, using defaults")
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    me = RANK == culprit
    dl_kill = 40 if (scen == "dataloader_killed" and me) else None
    dl = DataLoader(DS(dl_kill), batch_size=8, num_workers=1 if scen == "dataloader_killed" else 0)
    step = 0
    for epoch in range(2):
        for x, y in dl:
            step += 1
            if me and step == FSTEP:
                fire()
                if scen == "valueerror":
                    raise ValueError(f"invalid label value -1 in batch {step} (expected >= 0)")
                if scen == "indexerror":
                    vocab = list(range(10)); idx = [3, 7, 12]
                    _ = [vocab[i] for i in idx]
                if scen == "torcherror":
                    _ = torch.matmul(x, torch.randn(8, 4))
                if scen == "zerodiv":
                    tokens = 0; _ = 1024 / tokens
                if scen == "oserror":
                    open(f"/tmp/sealed_d_missing_shard_{RANK}/shard-00003.pt", "rb")
                if scen == "hang_sleep":
                    time.sleep(600)
                if scen == "hang_lock":
                    lk = threading.Lock(); lk.acquire(); lk.acquire()
                if scen == "hang_read":
                    r, w = os.pipe(); os.read(r, 1)
                if scen == "exit0":
                    print(f"[rank {RANK}] no more data, finishing")
                    sys.exit(0)
                if scen == "sigkill":
                    os.kill(os.getpid(), signal.SIGKILL)
                if scen == "sigsegv":
                    import ctypes; ctypes.string_at(0)
                if scen == "sigabrt":
                    os.abort()
                if scen == "sysexit":
                    print(f"ERROR: checkpoint directory not writable on rank {RANK}, aborting", file=sys.stderr)
                    sys.exit(3)
                if scen == "monitored_barrier":
                    time.sleep(600)
            if scen == "monitored_barrier" and step == FSTEP and not me:
                dist.monitored_barrier(timeout=timedelta(seconds=5))
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad(); loss.backward()
            for p in model.parameters():
                g = p.grad
                if me and step == FSTEP and scen == "mismatch_shape":
                    g = torch.zeros(g.numel() + 3)
                if me and step == FSTEP and scen == "mismatch_dtype":
                    g = g.double()
                if me and step == FSTEP and scen == "mismatch_op":
                    dist.broadcast(g, src=0)
                else:
                    dist.all_reduce(g)
                if g is p.grad:
                    p.grad /= WS
            opt.step()
            print(f"[rank {RANK}] epoch {epoch} step {step} loss {loss.item():.4f}")
            time.sleep(0.15)
    dist.barrier()
    print(f"[rank {RANK}] training finished")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
