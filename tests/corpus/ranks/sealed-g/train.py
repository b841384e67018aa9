# Tiny seeded distributed training loop (gloo, CPU) used to produce batch G.
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
    _side("fired_r%d_a%d_p%d.json" % (RANK, ATTEMPT, os.getpid()), {"kind": kind, "t": time.time()})


def want(place, step):
    return MINE is not None and MINE["place"] == place and MINE.get("step", 0) == step


class Synthetic(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 16, generator=g)
        self.y = torch.randint(0, 4, (n,), generator=g).tolist()
        self.bad_at = None
        self.kind = None

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        if self.bad_at is not None and i == self.bad_at:
            if self.kind == "data_index":
                fire(self.kind)
                return self.x[i], self.y[i + len(self.y)]
            if self.kind == "data_collate":
                fire(self.kind)
                return self.x[i][:-3], self.y[i]
            if self.kind == "worker_kill":
                fire(self.kind)
                os.kill(os.getpid(), signal.SIGKILL)
            if self.kind == "data_value":
                fire(self.kind)
                return self.x[i], int("label_%d" % self.y[i])
        return self.x[i], self.y[i]


def do_fault(kind, step, ctx):
    """Faults that act at the call site (not data/collective ones)."""
    if kind in ("hang_sleep", "hang_deadlock", "hang_read", "hang_busy", "hang_file", "hang_join"):
        fire(kind)
        log.info("waiting for peer state at step %d", step)
        if kind == "hang_sleep":
            time.sleep(3600)
        elif kind == "hang_deadlock":
            lk = threading.Lock(); lk.acquire(); lk.acquire()
        elif kind == "hang_read":
            r, w = os.pipe(); os.read(r, 1)
        elif kind == "hang_busy":
            x = 0
            while True:
                x += 1
        elif kind == "hang_file":
            p = os.path.join(CFG["workdir"], "sync", "step%d.ready" % step)
            while not os.path.exists(p):
                time.sleep(0.5)
        elif kind == "hang_join":
            t = threading.Thread(target=lambda: time.sleep(3600), daemon=True); t.start(); t.join()
    if kind.startswith("sig_"):
        fire(kind)
        sig = {"sig_kill": signal.SIGKILL, "sig_segv": signal.SIGSEGV,
               "sig_abrt": signal.SIGABRT, "sig_term": signal.SIGTERM}[kind]
        os.kill(os.getpid(), sig)
        time.sleep(5)
    if kind == "exit0":
        fire(kind); sys.stdout.flush(); os._exit(0)
    if kind == "exit_nz":
        fire(kind); sys.exit(3)
    if kind == "cuda":
        fire(kind); ctx["model"].cuda()
    if kind == "import":
        fire(kind)
        import apex.optimizers  # noqa
    if kind == "oom":
        fire(kind); torch.empty(1 << 46, dtype=torch.float32)
    if kind == "assert":
        fire(kind)
        assert ctx["x"].shape[0] == CFG.get("batch", 16) * 2, "unexpected micro-batch size %d" % ctx["x"].shape[0]
    if kind == "custom":
        fire(kind)

        class ConfigError(Exception):
            pass
        raise ConfigError("scheduler warmup_steps (%d) exceeds total steps (%d)" % (step + 100, CFG.get("steps", 12)))
    if kind == "recursion":
        fire(kind)

        def walk(d):
            return walk({"child": d})
        walk({})


def allreduce_grads(model, step):
    for p in model.parameters():
        t = p.grad
        op = dist.ReduceOp.SUM
        if MINE is not None and MINE["place"] == "coll" and MINE.get("step", 0) == step and p is next(model.parameters()):
            k = MINE["kind"]
            fire(k)
            if k == "coll_shape":
                t = torch.cat([p.grad.flatten(), torch.zeros(7)])
            elif k == "coll_dtype":
                t = p.grad.double()
            elif k == "coll_skip":
                continue
            elif k == "coll_extra":
                dist.barrier()
            elif k == "coll_type":
                out = [torch.zeros_like(t) for _ in range(WORLD)]
                dist.all_gather(out, t)
                continue
            elif k == "coll_bcast":
                dist.broadcast(t, src=0)
                continue
        dist.all_reduce(t, op=op)
        if t is p.grad:
            p.grad.div_(WORLD)


def main():
    _side("start_r%d_a%d.json" % (RANK, ATTEMPT), {"t": time.time()})
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=CFG.get("pg_timeout", 10)))
    torch.manual_seed(CFG.get("seed", 0))
    log.info("initialized process group: world_size=%d local_rank=%d attempt=%d", WORLD, LOCAL_RANK, ATTEMPT)
    if MINE is not None and MINE["place"] == "startup":
        do_fault(MINE["kind"], 0, {})
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    use_ddp = CFG.get("ddp", False)
    net = model
    if use_ddp:
        net = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    ds = Synthetic(CFG.get("n", 512), seed=1234 + RANK)
    if MINE is not None and MINE["place"] == "data":
        ds.bad_at = MINE.get("index", 40)
        ds.kind = MINE["kind"]
    nw = CFG.get("workers", 0)
    dl = DataLoader(ds, batch_size=CFG.get("batch", 16), shuffle=False, num_workers=nw,
                    persistent_workers=nw > 0)
    it = iter(dl)
    ckdir = os.path.join(CFG["workdir"], "checkpoints")
    os.makedirs(ckdir, exist_ok=True)
    steps = CFG.get("steps", 12)
    t_last = time.time()
    for step in range(steps):
        if "warn" in NOISE and step == 2:
            warnings.warn("lr scheduler step() called before optimizer step(); skipping first value", UserWarning)
            _ = torch.tensor(torch.ones(2))
        if MINE is not None and MINE["place"] == "step" and MINE.get("step", 0) == step:
            do_fault(MINE["kind"], step, {"model": model})
        try:
            x, y = next(it)
        except StopIteration:
            it = iter(dl); x, y = next(it)
        if want("forward", step):
            k = MINE["kind"]
            fire(k)
            if k == "fwd_shape":
                x = x[:, :-2]
            elif k == "fwd_dtype":
                x = x.double()
            elif k == "fwd_index":
                y = y + 4
            else:
                do_fault(k, step, {"model": model, "x": x})
        out = net(x)
        loss = nn.functional.cross_entropy(out, y)
        opt.zero_grad()
        if want("backward", step):
            k = MINE["kind"]
            fire(k)
            if k == "bwd_twice":
                loss.backward(); loss.backward()
            elif k == "bwd_nan":
                loss = loss * float("nan")
                if not torch.isfinite(loss):
                    raise FloatingPointError("non-finite loss %s at step %d" % (loss.item(), step))
            elif k == "bwd_nograd":
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
            if k == "optim_state":
                opt.load_state_dict({"state": {}, "param_groups": []})
            elif k == "optim_lr":
                for g in opt.param_groups:
                    g["lr"] = None
            else:
                do_fault(k, step, {"model": model})
        opt.step()
        if step % CFG.get("log_every", 2) == 0 or step == steps - 1:
            now = time.time()
            metrics = {"loss": loss.item(), "step": step, "samples": x.shape[0] * WORLD}
            if want("metrics", step):
                k = MINE["kind"]
                fire(k)
                if k == "metrics_zero":
                    now = t_last
                    metrics["throughput"] = metrics["samples"] / (now - t_last)
                elif k == "metrics_key":
                    log.info("step %d loss %.4f grad_norm %.3f", step, metrics["loss"], metrics["grad_norm"])
                elif k == "metrics_type":
                    metrics["lr"] = None
                    print("step %d | loss %.4f | lr %s" % (step, metrics["loss"], format(metrics["lr"], ".2e")))
                elif k == "metrics_json":
                    metrics["ts"] = datetime.datetime.now()
                    json.dumps(metrics)
            if "caught" in NOISE and step == 4:
                try:
                    metrics["throughput"] = metrics["samples"] / (now - now)
                except ZeroDivisionError:
                    log.exception("metrics export failed at step %d; continuing", step)
            if RANK == 0 or CFG.get("all_log"):
                print("step %d/%d loss %.4f" % (step, steps, metrics["loss"]), flush=True)
            t_last = now
        ce = CFG.get("ckpt_every", 0)
        if ce and step > 0 and step % ce == 0:
            path = os.path.join(ckdir, "step%03d_rank%d.pt" % (step, RANK))
            state = {"model": model.state_dict(), "opt": opt.state_dict(), "step": step}
            if want("ckpt", step):
                k = MINE["kind"]
                fire(k)
                if k == "ckpt_save":
                    path = os.path.join(ckdir, "shard_%02d" % step, "model.pt")
                    torch.save(state, path)
                elif k == "ckpt_load":
                    torch.save(state, path)
                    with open(path, "r+b") as fh:
                        fh.truncate(100)
                    torch.load(path, weights_only=False)
                elif k == "ckpt_keys":
                    sd = dict(state["model"]); sd.pop("2.bias"); sd["2.weight_orig"] = sd.pop("2.weight")
                    model.load_state_dict(sd)
                elif k == "ckpt_pickle":
                    state["hook"] = lambda t: t
                    torch.save(state, path)
            else:
                torch.save(state, path)
                torch.load(path, weights_only=False)
            if RANK == 0:
                log.info("saved checkpoint for step %d", step)
        time.sleep(CFG.get("step_sleep", 0.15))
    dist.barrier()
    log.info("training finished")
    _side("done_r%d_a%d.json" % (RANK, ATTEMPT), {"t": time.time()})
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
