"""Compile entries into the engine's index: one JSON object, the engine's only input.

The engine never reads YAML (ruamel.yaml does not exist under Pyodide) and never
parses regexes; everything it needs is precomputed here, including the prefilter
anchors chosen by generator.regexes.choose_anchors.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import subprocess
import sys
from pathlib import Path

from .healthy import HealthyCorpus, engine_module
from .regexes import MIN_ANCHOR, anchor_size, branch_options, choose_anchors, required_literals
from .loader import replace_cached, source_digest
from .validate import validate_once

INDEX_FORMAT = 3
# Lines that look like errors are candidates even when no signature knows them, so
# that an unknown failure still yields its first error and last exception
# (scan._ERRORISH decides). Each group is one prefilter key that the anchor choice
# must cover like a signature: "ERROR" only before punctuation or a space, so that
# TORCH_NCCL_ASYNC_ERROR_HANDLING, printed by every healthy rank, is not one.
GENERIC_KEYS = {
    "generic/Error": [["Error"]],                      # RuntimeError, Error:, torch.cuda.OutOfMemoryError
    "generic/error:": [["rror:"]],                     # error: ..., fatal error: ...
    "generic/ERROR": [["ERROR:"], ["ERROR "], ["ERROR]"], ["ERROR|"]],
    "generic/Exception": [["xception"]],
    "generic/FATAL": [["FATAL"]],
    # a clean finish (context.py: run_completed) vetoes a diagnosis built on warnings
    "generic/completed": [["WorkerState.SUCCEEDED"], ["Training completed"], ["stopped: `max_epochs"]],
}
# A signature whose rarest required literal is on more than this share of some healthy
# log's lines is split by its alternation, when that makes every branch rarer.
SPLIT_ABOVE = 0.0005


def _first_sentence(text: str) -> str:
    text = " ".join(str(text).split())
    for end in (". ", "; "):
        if end in text:
            return text.split(end, 1)[0] + "."
    return text


def _keys_for(key: str, regex: str, lits: list[str], healthy: HealthyCorpus) -> dict[str, list[str]]:
    """The prefilter keys of one signature: itself, or one per branch of an alternation
    when its shared literal is common in healthy output and the branches' are not."""
    if not healthy or not lits:
        return {key: lits}
    # judged as anchors are cut: without the spaces at either end ("allocate " is rare,
    # the anchor "allocate" is on every line of Megatron's memory report)
    single = min(healthy.hit_stats(x.strip()[:40])[1] for x in lits)
    if single <= SPLIT_ABOVE:
        return {key: lits}
    best = None
    for split in branch_options(regex):
        # a branch may be anchored by 3 characters ("br-"): it is one of several
        branches = [[x for x in b if len(x) >= 3] for b in split]
        if not all(branches):
            continue
        worst = max(min(healthy.hit_stats(x[:40])[1] for x in b) for b in branches)
        if best is None or worst < best[0]:
            best = (worst, branches)
    if best is None or best[0] > single / 4:
        return {key: lits}
    return {f"{key}#{j}": b for j, b in enumerate(best[1])}


def build_index(root: Path, entries) -> dict:
    healthy = HealthyCorpus(root)
    sigs = []
    required: dict[str, list[str]] = {}
    owner: dict[str, int] = {}        # prefilter key -> signature number
    for e in sorted(entries, key=lambda e: e.id):
        for s in e.data.get("signatures", []):
            key = f"{e.id}/{s['id']}"
            lits = [x for x in required_literals(s["regex"]) if anchor_size(x) >= MIN_ANCHOR]
            sigs.append({"entry": e.id, "id": s["id"], "regex": s["regex"],
                         "strength": s["strength"], "literal": lits[0] if lits else ""})
            if s["strength"] == "context":
                continue   # read from the head of each input only (scan.Source._head)
            for k, v in _keys_for(key, s["regex"], lits, healthy).items():
                required[k] = v
                owner[k] = len(sigs) - 1
    for key, groups in GENERIC_KEYS.items():
        for j, lits in enumerate(groups):
            required[f"{key}#{j}"] = lits
    anchors, assigned, passes = choose_anchors(required, healthy)
    for s in sigs:
        s["anchors"] = []
    for k, n in owner.items():
        if assigned[k] not in sigs[n]["anchors"]:
            sigs[n]["anchors"].append(assigned[k])
    for s in sigs:
        s["anchors"].sort()
    rates = _candidate_rates(healthy, anchors)
    vectors = _text_vectors(entries)
    out_entries = {}
    for e in sorted(entries, key=lambda e: e.id):
        d = e.data
        fix = d["fix"][0]
        out_entries[e.id] = {
            "title": d["title"],
            "category": d["category"],
            "severity": d["severity"],
            "quick_answer": " ".join(d["quick_answer"].split()),
            "cause": _first_sentence(d["root_cause"]),
            "downstream": bool(d.get("downstream", False)),
            "wrapper": bool(d.get("wrapper", False)),
            "next_action": {"do": fix["do"], "command": fix.get("command", ""),
                            "why": " ".join(fix.get("why", "").split())},
            "fix": [{"do": f["do"], "command": f.get("command", ""), "why": " ".join(f.get("why", "").split()),
                     "when": f.get("when", ""), "upgrade": bool(f.get("upgrade", False)),
                     "for_signatures": f.get("for_signatures", [])} for f in d["fix"]],
            "confirm": [{"do": c["do"], "command": c.get("command", "")} for c in d["confirm"]],
            "affects": d.get("affects", []),
            "discriminators": [
                {"signal": x["signal"], "here": x["here"], "elsewhere": x["elsewhere"]["entry"],
                 "elsewhere_when": x["elsewhere"]["when"], "fact": x.get("fact", ""),
                 "here_pattern": x.get("here_pattern", ""), "compare": x.get("compare", "")}
                for x in d.get("discriminators", [])],
            "related": d.get("related", []),
            "refines": d.get("refines", []),
            "url": f"entries/{e.id}/",   # the entry page, relative to the site root
            "text_vector": vectors[e.id],
        }
    body = {"faildex_index": INDEX_FORMAT, "anchors": anchors, "passes": passes, "signatures": sigs,
            "entries": out_entries,
            "healthy_candidate_rates": rates}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
    body["digest"] = digest
    return body


def _candidate_rates(healthy: HealthyCorpus, anchors: list[str]) -> dict[str, float]:
    """The share of each healthy log's lines that the prefilter makes candidates."""
    hit: dict[str, set] = {name: set() for name in healthy.files}
    for a in anchors:
        for name, n, _ in healthy.lines_containing(a):
            hit[name].add(n)
    return {name: round(len(hit[name]) / max(1, len(lines)), 5) for name, lines in healthy.files.items()}


_ERRORISH_LINE = re.compile(r"rror|xception|ailed|FATAL|[Tt]imed? ?out|[Kk]illed|[Ss]ignal|[Aa]bort|WARN")


def _text_vectors(entries) -> dict[str, dict[str, float]]:
    """Per entry, the tf-idf weights of the words of its messages: title, symptoms,
    the literal text of its signatures and the error lines of its examples. The
    engine compares a log's error lines with these when no signature decides."""
    from .validate import example_text
    reason = engine_module("reason")
    tokens = reason.tokens
    docs: dict[str, dict[str, int]] = {}
    for e in entries:
        d = e.data
        parts = [d["title"]] + [s["see"] for s in d.get("symptoms", [])]
        for s in d.get("signatures", []):
            parts += required_literals(s["regex"])
        for ex in d.get("examples", []):
            if ex.get("expect") not in (None, e.id):
                continue
            text = example_text(e, ex) or ""
            parts += [ln for ln in text.splitlines()
                      if _ERRORISH_LINE.search(ln) and not reason.is_frame_line(ln)][:40]
        counts: dict[str, int] = {}
        for t in (t for part in parts for t in tokens(part)):
            counts[t] = counts.get(t, 0) + 1
        docs[e.id] = counts
    n = len(docs)
    df: dict[str, int] = {}
    for counts in docs.values():
        for t in counts:
            df[t] = df.get(t, 0) + 1
    out = {}
    for eid, counts in docs.items():
        vec = {t: (1 + math.log(c)) * math.log(n / df[t]) for t, c in counts.items() if df[t] < n}
        norm = math.sqrt(sum(w * w for w in vec.values())) or 1.0
        top = sorted(vec.items(), key=lambda kv: (-kv[1], kv[0]))[:60]
        out[eid] = {t: round(w / norm, 4) for t, w in top}
    return out


def build_index_or_exit(root: Path) -> dict:
    entries, problems = validate_once(root)
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        raise SystemExit(f"faildex: {len(problems)} problem(s) in entries; fix them first "
                         f"(faildex validate)")
    return build_index(root, entries)


def cached_index_path(root: Path, child: bool = False) -> Path:
    """The index for the current entries, rebuilt when an entry changed. child: compile it
    in a process of its own (the site build: compiling 3,000 entries' index takes ~0.1 MB an
    entry that a build holding every page need not carry; its peak is then the larger of
    the two, not their sum)."""
    cache = root / ".cache"
    digest = source_digest(root)
    path = cache / f"index-{digest}.json"
    if not path.exists() and child:
        code = Path(__file__).resolve().parent.parent
        proc = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                               "from generator.index import cached_index_path; "
                               "cached_index_path(Path(sys.argv[1]))", str(root)],
                              cwd=code, capture_output=True, text=True)
        if proc.returncode != 0 or not path.exists():
            raise SystemExit(f"faildex: compiling the index failed:\n{(proc.stderr or proc.stdout)[-3000:]}")
    if not path.exists():
        index = build_index_or_exit(root)
        replace_cached(path, json.dumps(index, sort_keys=True, separators=(",", ":")), "index-*.json")
    return path
