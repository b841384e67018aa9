"""Reproducible noisy training logs of any size, for benchmarks and scale tests.

Several ranks interleaved with torchrun's `[rankN]:` prefix, glog-style warnings,
NCCL INFO lines, tqdm progress written with carriage returns, and a few real
failure excerpts (taken from the entries' own examples) placed deep inside.
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(s: str) -> int:
    s = s.strip().upper().rstrip("B")
    if s and s[-1] in UNITS:
        return int(float(s[:-1]) * UNITS[s[-1]])
    return int(s)


def _noise_lines(rng: random.Random, ranks: int):
    step = 0
    while True:
        step += 1
        r = rng.randrange(ranks)
        kind = rng.random()
        if kind < 0.70:
            yield (f"[rank{r}]:[2026-11-30 10:{step // 6000 % 60:02d}:{step // 100 % 60:02d},"
                   f"{step % 1000:03d}] INFO train.py:212 step={step} loss={rng.uniform(1.5, 3.0):.4f} "
                   f"lr={3e-4 * rng.uniform(0.9, 1.0):.3e} grad_norm={rng.uniform(0.2, 1.4):.3f} "
                   f"tokens/s={rng.randint(90000, 130000)} mem_alloc={rng.uniform(30, 70):.1f}GiB\n")
        elif kind < 0.80:
            pct = rng.randint(0, 100)
            bar = "█" * (pct // 10) + " " * (10 - pct // 10)
            segs = "".join(f"\rEpoch 3: {p:3d}%|{bar}| {p * 50}/5000 [01:{p % 60:02d}<02:10, 38.2it/s, loss=2.{p:02d}]"
                           for p in range(max(0, pct - 3), pct + 1))
            yield segs + "\n"
        elif kind < 0.88:
            yield (f"gpu-node-{r // 8:03d}:{4000 + r}:{4100 + r} [{r % 8}] NCCL INFO Channel "
                   f"{rng.randint(0, 31):02d}/0 : {r} -> {(r + 1) % ranks} [send] via NET/IB/{r % 4}/GDRDMA\n")
        elif kind < 0.93:
            yield (f"[rank{r}]:W1130 10:{step // 6000 % 60:02d}:{step // 100 % 60:02d}.{step % 1000000:06d} "
                   f"{1200 + r} torch/_dynamo/convert_frame.py:{rng.randint(800, 900)}] "
                   f"torch._dynamo hit config.recompile_limit (8)\n")
        elif kind < 0.97:
            yield (f"[rank{r}]:/opt/venv/lib/python3.11/site-packages/torch/utils/checkpoint.py:91: "
                   f"UserWarning: None of the inputs have requires_grad=True. Gradients will be None\n")
        else:
            yield (f"[rank{r}]:[2026-11-30 10:00:00,000] INFO checkpoint.py:77 saved shard "
                   f"{rng.randint(0, 512)} to /checkpoints/run-42/step_{step}/model_{r}.pt\n")


def write_lines(path: Path, size: int, lines, failures: list[str], places: list[int]) -> None:
    """Write about `size` bytes from the line iterator, each failure excerpt once the
    byte count passes its place (any left over go at the end)."""
    pending = list(zip(places, failures))
    written = 0
    with open(path, "wb") as out:
        buf: list[str] = []
        buf_len = 0
        while written + buf_len < size:
            line = next(lines)
            buf.append(line)
            buf_len += len(line)
            if pending and written + buf_len >= pending[0][0]:
                buf.append(pending.pop(0)[1])
            if buf_len > 1 << 20:
                data = "".join(buf).encode("utf-8")
                out.write(data)
                written += len(data)
                buf, buf_len = [], 0
        out.write("".join(buf).encode("utf-8") + "".join(t for _, t in pending).encode("utf-8"))


def generate(path: Path, size: int, seed: int = 0, failures: list[str] = (), ranks: int = 16) -> None:
    """Write a log of about `size` bytes; failure excerpts go at 40%, 70%, 90%."""
    places = [int(size * f) for f in (0.4, 0.7, 0.9)][:len(failures)]
    write_lines(path, size, _noise_lines(random.Random(seed), ranks), list(failures), places)


def example_failures(root: Path, ids: list[str]) -> list[str]:
    """The first example log of each named entry (read without YAML: the index
    does not carry examples, so read the entry files' examples with ruamel)."""
    from ruamel.yaml import YAML
    yaml = YAML(typ="safe")
    out = []
    for eid in ids:
        path = next((root / "entries").glob(f"*/{eid}.yaml"))
        data = yaml.load(path.read_text(encoding="utf-8"))
        ex = data["examples"][0]
        text = ex.get("log") or (path.parent / ex["file"]).read_text(encoding="utf-8")
        out.append(text if text.endswith("\n") else text + "\n")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("output")
    ap.add_argument("--size", default="100M")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--failure", action="append", default=[], help="entry id whose example to embed")
    args = ap.parse_args()
    root = Path(__file__).resolve().parent.parent
    generate(Path(args.output), parse_size(args.size), args.seed, example_failures(root, args.failure))
    return 0


if __name__ == "__main__":
    sys.exit(main())
