"""Which rank started it: faildex's first suspect against torchrun's own Root Cause block.

    python bench/which_rank.py                  # the sealed multi-rank runs
    python bench/which_rank.py --part dev       # the dev runs (may be read)
    python bench/which_rank.py --engine DIR     # another engine (e.g. a worktree's pyodide_app)

The runs (tests/corpus/ranks/<part>/) are real PyTorch 2.13 CPU jobs (Gloo, 127.0.0.1)
made by a script in the same folder; each run's label (the rank that started it, its host,
the restart attempt) comes from that script, never from faildex. For each run, in one
process:
  * faildex: `diagnose(files)`, its first suspect's rank (none: no suspect);
  * the reference: what a reader gets from torchrun's "Root Cause (first observed failure)"
    block: the `rank :` of the block printed earliest (its `time :`; with two agents there
    are two blocks), none when no block was printed.
A healthy run (label: no culprit) counts as right when nothing is named. Printed: one row
per run (no log text), accuracy of both, and the runs where the reference is right and
faildex is not. --json FILE writes the rows.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus" / "ranks"

_ROOT_HEAD = re.compile(r"Root Cause \(first observed failure\):")
_TIME = re.compile(r"^\W*time\s*:\s*(\S+)")
_RANK = re.compile(r"^\W*rank\s*:\s*(-?\d+) \(local_rank")


def load_manifest(part: str) -> list[dict]:
    from ruamel.yaml import YAML
    return YAML(typ="safe").load((CORPUS / part / "manifest.yaml").read_text(encoding="utf-8"))


def inputs(run_dir: Path, files: list[str]) -> list[str]:
    """The run's files; a folder stands for the files under it (as the CLI reads it)."""
    out = []
    for f in files:
        p = run_dir / f
        if not p.exists() and not Path(f).suffix:
            continue    # a folder that held no files (git keeps no empty folders)
        if p.is_dir():
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                out += [os.path.join(root, n) for n in sorted(names) if not n.startswith(".")]
        else:
            out.append(str(p))
    return out


def launcher_root_cause(paths: list[str]) -> int | None:
    """The rank torchrun's Root Cause block names (the earliest block by its time field)."""
    blocks = []
    for n, path in enumerate(paths):
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if text.lstrip().startswith("{"):
            # a shipper's JSON lines: the reader sees the messages
            lines = []
            for line in text.splitlines():
                try:
                    obj = json.loads(line)
                    lines.append(str(obj.get("log", obj.get("message", obj.get("msg", line)))))
                except ValueError:
                    lines.append(line)
        else:
            lines = text.splitlines()
        for i, line in enumerate(lines):
            if not _ROOT_HEAD.search(line):
                continue
            when, rank = "", None
            for follow in lines[i + 1:i + 12]:
                m = _TIME.search(_strip(follow))
                if m and not when:
                    when = m.group(1)
                m = _RANK.search(_strip(follow))
                if m:
                    rank = int(m.group(1))
                    break
            if rank is not None:
                blocks.append((when, n, i, rank))
    return min(blocks)[3] if blocks else None


def _strip(line: str) -> str:
    # the prefixes a shipper or srun -l / kubectl --prefix put before the block's lines
    return re.sub(r"^(?:\d+: |\[pod/[^\]]+\] )", "", line)


def run(part: str, engine: str | None) -> list[dict]:
    if engine:
        sys.path.insert(0, engine)
    else:
        sys.path.insert(0, str(ROOT / "pyodide_app"))
    sys.path.insert(0, str(ROOT))
    from faildex import diagnose
    from faildex.command import index_path
    index = json.loads(Path(index_path()).read_text(encoding="utf-8"))
    rows = []
    for item in load_manifest(part):
        run_dir = CORPUS / part / item["id"]
        paths = inputs(run_dir, item["files"])
        label = (item.get("culprit") or {}).get("rank")
        t = time.perf_counter()
        report = diagnose(paths, index)
        seconds = time.perf_counter() - t
        sus = report.get("suspects") or []
        got = sus[0]["rank"] if sus else None
        base = launcher_root_cause(paths)
        rows.append({"id": item["id"], "layout": item.get("layout"), "cause": item.get("cause"),
                     "ranks": item.get("ranks"), "label": label, "faildex": got,
                     "faildex_kind": sus[0]["kind"] if sus else None,
                     "baseline": base, "faildex_ok": got == label, "baseline_ok": base == label,
                     # a pair the logs cannot order (Gloo's size check: the receiver, then its sender)
                     "faildex_top2": got == label or label in [s["rank"] for s in sus[:2]],
                     "scenario": item.get("scenario"), "note": item.get("note"),
                     "other_suspects": [(s["rank"], s["kind"]) for s in sus[1:4]],
                     "primary": report["primary"]["id"] if report.get("primary") else None,
                     "seconds": round(seconds, 3)})
    return rows


def summary(rows: list[dict]) -> dict:
    n = len(rows)
    ok = sum(r["faildex_ok"] for r in rows)
    base = sum(r["baseline_ok"] for r in rows)
    worse = [r["id"] for r in rows if r["baseline_ok"] and not r["faildex_ok"]]
    return {"runs": n, "faildex": ok, "baseline": base, "faildex_rate": ok / n if n else 0.0,
            "faildex_top2": sum(r["faildex_top2"] for r in rows),
            "baseline_rate": base / n if n else 0.0, "worse_than_baseline": worse}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", default="sealed", choices=sorted(p.name for p in CORPUS.iterdir() if (p / "manifest.yaml").exists()))
    ap.add_argument("--engine", help="a folder holding another faildex package (to measure a before)")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--misses", action="store_true",
                    help="for each run faildex gets wrong: the construction's scenario and note (the manifest) "
                         "and faildex's suspects and primary entry; no log text")
    args = ap.parse_args()
    rows = run(args.part, args.engine)
    print(f"{'run':44} {'layout':18} {'cause':26} {'label':>5} {'faildex':>8} {'root cause':>10}")
    for r in rows:
        mark = ("ok" if r["faildex_ok"] else "MISS") + ("" if r["baseline_ok"] else " (launcher wrong)")
        print(f"{r['id'][:44]:44} {str(r['layout'])[:18]:18} {str(r['cause'])[:26]:26} {str(r['label']):>5} "
              f"{str(r['faildex']):>8} {str(r['baseline']):>10}  {mark}")
    s = summary(rows)
    print()
    print(f"{args.part}: {s['runs']} runs; first suspect right: faildex {s['faildex']} "
          f"({100 * s['faildex_rate']:.1f} %), torchrun Root Cause block {s['baseline']} "
          f"({100 * s['baseline_rate']:.1f} %); culprit among faildex's first two suspects {s['faildex_top2']}")
    print(f"runs where the Root Cause block is right and faildex is not: {len(s['worse_than_baseline'])}"
          + (f" ({', '.join(s['worse_than_baseline'])})" if s["worse_than_baseline"] else ""))
    for key in ("layout", "cause"):
        groups: dict = {}
        for r in rows:
            g = groups.setdefault(r[key], [0, 0, 0])
            g[0] += 1
            g[1] += r["faildex_ok"]
            g[2] += r["baseline_ok"]
        print(f"by {key}: " + "; ".join(f"{k} {v[1]}/{v[0]} (root cause {v[2]})" for k, v in sorted(groups.items(), key=str)))
    if args.misses:
        print()
        for r in rows:
            if not r["faildex_ok"]:
                print(f"{args.part}/{r['id']}: {r['layout']}, {r['ranks']} ranks, scenario {r['scenario']}, label {r['label']}\n"
                      f"   construction: {r['note']}\n"
                      f"   faildex: rank {r['faildex']} ({r['faildex_kind']}), then {r['other_suspects']}; "
                      f"primary {r['primary']}; Root Cause block: {r['baseline']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "summary": s}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
