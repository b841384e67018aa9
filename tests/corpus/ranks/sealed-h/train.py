# Tiny seeded distributed training loop (gloo, CPU) used to produce batch H.
# Behaviour is configured through JOB_CFG (JSON); a fault (at most one per
# rank per attempt) is chosen from cfg["faults"] by (RANK, restart attempt).
import os, sys, time, json, signal, logging, threading, warnings, datetime

_cfg = json.loads(os.environ.get("JOB_CFG", "{}"))
if _cfg.get("rank_log_dir"):
    _p = os.path.join(_cfg["rank_log_dir"], "rank%s.log" % os.environ.get("RANK", "0"))
    _fd = os.open(_p, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(_fd, 1); os.dup2(_fd, 2)

import torch
import torch.nn as nn
import torch.distributed as dist
from torch.utils.data import Dataset, DataLoader

RANK = int(os.environ.get("RANK", 0))
LOCAL_RANK = int(os.environ.get("LOCAL_RANK", 0))
WORLD = int(os.environ.get("WORLD_SIZE", 1))
ATTEMPT = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", 0))
NODE = os.environ.get("JOB_NODE")
SIDE = os.environ.get("JOB_SIDE_DIR")
CFG = _cfg
MINE = None
for f in CFG.get("faults", []):
    if f["rank"] == RANK and f.get("attempt", 0) == ATTEMPT:
        MINE = f
        break
NOISE = CFG.get("noise", {}).get(str(RANK), [])

logging.basicConfig(level=logging.INFO,
                    format="%(asctime)s %(levelname)s [rank" + str(RANK) + "] %(name)s: %(message)s")
log = logging.getLogger("trainer")


def _side(name, rec):
    if not SIDE:
        return
    rec.update(rank=RANK, local_rank=LOCAL_RANK, node=NODE, attempt=ATTEMPT, pid=os.getpid())
    tmp = os.path.join(SIDE, name + ".tmp%d" % os.getpid())
    with open(tmp, "w") as fh:
        json.dump(rec, fh)
    os.replace(tmp, os.path.join(SIDE, name))


def fire(kind):
    _side("fired_r%d_a%d_p%d.json" % (RANK, ATTEMPT, os.getpid()),
          {"kind": kind, "t": time.time(), "mono": time.monotonic(),
           "in_worker": torch.utils.data.get_worker_info() is not None})


def want(place, step):
    return MINE is not None and MINE["place"] == place and MINE.get("step", 0) == step


class Records(Dataset):
    """Synthetic records; each sample is 'decoded' from a small byte record."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 16, generator=g)
        self.y = torch.randint(0, 4, (n,), generator=g).tolist()
        self.bad_at = None
        self.kind = None

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        raw = ("label=%d" % self.y[i]).encode("utf-8")
        if self.bad_at is not None and i == self.bad_at:
            if self.kind == "data_decode":
                fire(self.kind)
                raw = b"label=\xff\xfe" + raw[6:]
            elif self.kind == "worker_kill":
                fire(self.kind)
                os.kill(os.getpid(), signal.SIGKILL)
            elif self.kind == "worker_segv":
                fire(self.kind)
                os.kill(os.getpid(), signal.SIGSEGV)
                time.sleep(5)
        label = int(raw.decode("utf-8").split("=", 1)[1])
        return self.x[i], label


_HELD = threading.Lock()


def do_fault(kind, step, ctx):
    """Faults that act at the call site (not data/collective ones)."""
    if kind in ("hang_sleep", "hang_lockheld", "hang_eval"):
        fire(kind)
        if kind == "hang_sleep":
            log.info("waiting for peer state at step %d", step)
            time.sleep(3600)
        elif kind == "hang_lockheld":
            def writer():
                with _HELD:
                    log.info("async checkpoint writer started for step %d", step)
                    time.sleep(3600)
            threading.Thread(target=writer, daemon=True, name="ckpt-writer").start()
            time.sleep(0.3)
            log.info("waiting for async checkpoint writer before step %d", step)
            with _HELD:
                pass
        elif kind == "hang_eval":
            log.info("running evaluation at step %d (200 batches)", step)
            for b in range(200):
                time.sleep(1.0)
                if b % 10 == 9:
                    log.info("eval batch %d/200", b + 1)
    if kind.startswith("sig_"):
        fire(kind)
        sig = {"sig_kill": signal.SIGKILL, "sig_segv": signal.SIGSEGV,
               "sig_abrt": signal.SIGABRT, "sig_term": signal.SIGTERM}[kind]
        os.kill(os.getpid(), sig)
        time.sleep(5)
    if kind == "exit0":
        fire(kind); sys.stdout.flush(); os._exit(0)
    if kind == "import_node":
        fire(kind)
        try:
            import fused_adam_ext  # noqa
        except ModuleNotFoundError:
            log.error("fused optimizer extension is not available on %s", NODE)
            raise
    if kind == "memerr":
        fire(kind)
        log.info("allocating pinned staging buffer for step %d", step)
        buf = bytearray(1 << 50)  # noqa
    if kind == "assert":
        fire(kind)
        assert ctx["x"].shape[0] == CFG.get("batch", 16) * 2, "unexpected micro-batch size %d" % ctx["x"].shape[0]
    if kind == "recursion":
        fire(kind)

        def walk(d):
            return walk({"child": d})
        walk({})


def allreduce_grads(model, step):
    for p in model.parameters():
        t = p.grad
        if MINE is not None and MINE["place"] == "coll" and MINE.get("step", 0) == step and p is next(model.parameters()):
            k = MINE["kind"]
            fire(k)
            if k == "coll_shape":
                t = torch.cat([p.grad.flatten(), torch.zeros(5)])
            elif k == "coll_dtype":
                t = p.grad.double()
            elif k == "coll_skip":
                continue
            elif k == "coll_bcast":
                dist.broadcast(t, src=0)
                continue
        dist.all_reduce(t)
        if t is p.grad:
            p.grad.div_(WORLD)


def gather_stats(loss, step):
    n = 3
    if want("gather", step):
        fire(MINE["kind"])
        n = 5
    stats = torch.tensor([loss.item(), float(step), float(RANK)] + [0.0] * (n - 3))
    out = [torch.zeros(3) for _ in range(WORLD)]
    dist.all_gather(out, stats)
    return out


def store_sync(step):
    store = dist.distributed_c10d._get_default_store()
    key = "shard_ready/%d/%d" % (step, RANK)
    if want("store", step):
        fire(MINE["kind"])
        log.info("data shard for step %d already cached, skipping publish", step)
    else:
        store.set(key, str(time.time()))
    keys = ["shard_ready/%d/%d" % (step, r) for r in range(WORLD) if r != RANK]
    store.wait(keys, datetime.timedelta(seconds=8))


def main():
    _side("start_r%d_a%d.json" % (RANK, ATTEMPT), {"t": time.time()})
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=CFG.get("pg_timeout", 10)))
    torch.manual_seed(CFG.get("seed", 0))
    log.info("initialized process group: world_size=%d local_rank=%d attempt=%d", WORLD, LOCAL_RANK, ATTEMPT)
    sub = None
    if CFG.get("subgroup"):
        sub = dist.new_group(CFG["subgroup"])
        log.info("created subgroup %s", CFG["subgroup"])
    if MINE is not None and MINE["place"] == "startup":
        do_fault(MINE["kind"], 0, {})
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    use_ddp = CFG.get("ddp", False)
    net = model
    if use_ddp:
        net = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    ds = Records(CFG.get("n", 512), seed=1234 + RANK)
    if MINE is not None and MINE["place"] == "data":
        ds.bad_at = MINE.get("index", 40)
        ds.kind = MINE["kind"]
    nw = CFG.get("workers", 0)
    dl = DataLoader(ds, batch_size=CFG.get("batch", 16), shuffle=False, num_workers=nw,
                    persistent_workers=nw > 0)
    it = iter(dl)
    ckdir = os.path.join(CFG["workdir"], "checkpoints")
    os.makedirs(ckdir, exist_ok=True)
    steps = CFG.get("steps", 10)
    for step in range(steps):
        if "warn" in NOISE and step == 2:
            warnings.warn("lr scheduler step() called before optimizer step(); skipping first value", UserWarning)
            warnings.warn("gradient accumulation steps not set, defaulting to 1", FutureWarning)
        if "retry" in NOISE and step == 3:
            log.warning("metrics push failed: ConnectionRefusedError(111, 'Connection refused'); will retry in 2s (attempt 1/3)")
            log.info("metrics push succeeded on retry")
        if "caught_early" in NOISE and step == 1:
            try:
                open(os.path.join(CFG["workdir"], "tb", "events.out.tfevents.%d" % RANK), "rb").read()
            except FileNotFoundError:
                log.exception("could not open previous event file; starting a fresh one")
        if MINE is not None and MINE["place"] == "step" and MINE.get("step", 0) == step:
            do_fault(MINE["kind"], step, {"model": model})
        if sub is not None and want("subbarrier", step):
            fire(MINE["kind"])
            log.info("syncing pipeline stage group before step %d", step)
            dist.barrier(group=sub)
        if CFG.get("store_step") == step:
            store_sync(step)
        try:
            x, y = next(it)
        except StopIteration:
            it = iter(dl); x, y = next(it)
        if want("forward", step):
            k = MINE["kind"]
            fire(k)
            if k == "fwd_index":
                y = y + 4
            elif k == "fwd_nan":
                x = x.clone(); x[3, 5] = float("nan")
            else:
                do_fault(k, step, {"model": model, "x": x})
        out = net(x)
        loss = nn.functional.cross_entropy(out, y)
        if not torch.isfinite(loss):
            raise FloatingPointError("loss is %s at step %d" % (loss.item(), step))
        opt.zero_grad()
        if want("backward", step):
            k = MINE["kind"]
            fire(k)
            if k == "bwd_nograd":
                loss.detach().backward()
            else:
                do_fault(k, step, {"model": model})
        else:
            loss.backward()
        if not use_ddp:
            allreduce_grads(model, step)
        if want("optim", step):
            k = MINE["kind"]
            fire(k)
            if k == "optim_lr":
                for g in opt.param_groups:
                    g["lr"] = None
            else:
                do_fault(k, step, {"model": model})
        opt.step()
        if CFG.get("gather_stats"):
            gather_stats(loss, step)
        if step % CFG.get("log_every", 2) == 0 or step == steps - 1:
            metrics = {"loss": loss.item(), "step": step, "samples": x.shape[0] * WORLD}
            if want("metrics", step):
                k = MINE["kind"]
                fire(k)
                if k == "metrics_json":
                    metrics["ts"] = datetime.datetime.now()
                    print(json.dumps(metrics), flush=True)
            if "caught" in NOISE and step == 4:
                try:
                    metrics["throughput"] = metrics["samples"] / (time.time() * 0)
                except ZeroDivisionError:
                    log.exception("metrics export failed at step %d; continuing", step)
            if RANK == 0 or CFG.get("all_log"):
                print("step %d/%d loss %.4f" % (step, steps, metrics["loss"]), flush=True)
        ce = CFG.get("ckpt_every", 0)
        if ce and step > 0 and step % ce == 0:
            path = os.path.join(ckdir, "step%03d_rank%d.pt" % (step, RANK))
            state = {"model": model.state_dict(), "opt": opt.state_dict(), "step": step}
            torch.save(state, path)
            if want("ckpt", step):
                k = MINE["kind"]
                fire(k)
                if k == "ckpt_missing":
                    os.remove(path)
                elif k == "ckpt_corrupt":
                    with open(path, "wb") as fh:
                        fh.write(b"\x00" * 4096)  # preallocated, never written
            torch.load(path, weights_only=False)
            if RANK == 0:
                log.info("saved checkpoint for step %d", step)
        if MINE is not None and MINE["place"] == "eval" and MINE.get("step", 0) == step:
            do_fault(MINE["kind"], step, {"model": model})
        if CFG.get("monitored"):
            dist.monitored_barrier(timeout=datetime.timedelta(seconds=5), wait_all_ranks=True)
        time.sleep(CFG.get("step_sleep", 0.15))
    dist.barrier()
    log.info("training finished")
    _side("done_r%d_a%d.json" % (RANK, ATTEMPT), {"t": time.time()})
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
