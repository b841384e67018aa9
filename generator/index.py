"""Compile entries into the engine's index: one JSON object, the engine's only input.

The engine never reads YAML (ruamel.yaml does not exist under Pyodide) and never
parses regexes; everything it needs is precomputed here, including the prefilter
anchors chosen by generator.regexes.choose_anchors.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from .regexes import MIN_ANCHOR, choose_anchors, required_literals
from .validate import healthy_logs, validate

INDEX_FORMAT = 1
# Each scanned in a bytes.find pass of its own, always, so that an unknown failure
# still yields its first error and last exception; signatures containing one ride
# along for free. "ERROR" lines are found by the alternation (ERROR is added there).
GENERIC_ANCHORS = ("rror",)


def _first_sentence(text: str) -> str:
    text = " ".join(str(text).split())
    for end in (". ", "; "):
        if end in text:
            return text.split(end, 1)[0] + "."
    return text


def build_index(root: Path, entries) -> dict:
    healthy = "\n".join(line for _, _, line in healthy_logs(root))
    sigs = []
    required: dict[str, list[str]] = {}
    for e in sorted(entries, key=lambda e: e.id):
        for s in e.data.get("signatures", []):
            key = f"{e.id}/{s['id']}"
            lits = [x for x in required_literals(s["regex"]) if len(x) >= MIN_ANCHOR]
            required[key] = lits
            sigs.append({"entry": e.id, "id": s["id"], "regex": s["regex"],
                         "strength": s["strength"], "literal": lits[0] if lits else ""})
    required["generic/ERROR"] = ["ERROR"]
    anchors, finds, assigned = choose_anchors(required, healthy, extra=GENERIC_ANCHORS)
    for s in sigs:
        s["anchor"] = assigned[f"{s['entry']}/{s['id']}"]
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
            "next_action": {"do": fix["do"], "command": fix.get("command", ""),
                            "why": " ".join(fix.get("why", "").split())},
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
            # words of the entry, for "nearest entries" when nothing matched
            "keywords": sorted(_keywords(d)),
        }
    body = {"faildex_index": INDEX_FORMAT, "find_anchors": finds,
            "alt_anchors": anchors, "signatures": sigs, "entries": out_entries}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
    body["digest"] = digest
    return body


def _keywords(d: dict) -> set[str]:
    import re
    text = " ".join([d["title"], " ".join(d.get("systems", [])),
                     " ".join(s["regex"] for s in d.get("signatures", []))])
    return {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z_]{3,}", text)}


def build_index_or_exit(root: Path) -> dict:
    entries, problems = validate(root)
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        raise SystemExit(f"faildex: {len(problems)} problem(s) in entries; fix them first "
                         f"(faildex validate)")
    return build_index(root, entries)


def _source_digest(root: Path) -> str:
    """A cheap fingerprint of everything the index depends on."""
    h = hashlib.sha256()
    files = sorted((root / "entries").rglob("*")) + sorted((root / "tests" / "healthy").glob("*.log"))
    files += sorted((root / "generator").glob("*.py"))
    for p in files:
        if p.is_file():
            st = p.stat()
            h.update(f"{p.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def cached_index_path(root: Path) -> Path:
    """The index for the current entries, rebuilt when an entry changed."""
    cache = root / ".cache"
    digest = _source_digest(root)
    path = cache / f"index-{digest}.json"
    if not path.exists():
        index = build_index_or_exit(root)
        cache.mkdir(parents=True, exist_ok=True)
        for old in cache.glob("index-*.json"):
            old.unlink()
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(index, sort_keys=True, separators=(",", ":")), encoding="utf-8")
        tmp.replace(path)
    return path
