"""Apply reviewers' mapping decisions to the catalogue.

    python catalog/apply.py PROJECT DECISIONS.yaml [...]
    python catalog/apply.py --all      # every catalog/decisions/<project>-*.yaml, in name order

A decisions file is a YAML list, one item per template:

    - key: "Timed out after {} seconds waiting for clients. {}/{} clients joined."
      project: nccl             # optional: overrides PROJECT for this item
      entry: store-barrier-timeout      # or collateral: [..] / benign: "why" / uncovered: true
      class: "..."              # with uncovered: the failure class it would need
      why: "one sentence: what the message means here"
      key_words: "..."          # optional: the words that make a line this message, when its
                                # longest literal run is not them (the cut test cuts after these)

`key` is the template with its fields written `{}` (generator.catalog.template_key).
`why` becomes the template's note. An `entry:` decision is applied only when one of
that entry's defining or supporting signatures matches the template (what FDX040
checks); otherwise the template stays uncovered, its class saying which entry needs
a signature for it, so `bench/coverage.py --uncovered` lists it as work to do.
"""
from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from generator import catalog as C          # noqa: E402
from generator.loader import load_all as load_entries   # noqa: E402

NEEDS_SIGNATURE = "needs a signature on "


def apply(project: str, decision_files: list[Path], root: Path = ROOT) -> Counter:
    cats = {c.project: c for c in C.load_all(root)}
    entries, _ = load_entries(root)
    ids = {e.id for e in entries}
    sigs: dict[str, list[re.Pattern]] = {}
    for entry_id, _sig, rx in C.signature_table(entries):
        sigs.setdefault(entry_id, []).append(rx)
    counts: Counter = Counter()
    for path in decision_files:
        items = YAML(typ="safe").load(path.read_text(encoding="utf-8")) or []
        for n, d in enumerate(items, 1):
            where = f"{path}: item {n}"
            key = d.get("key")
            cat = cats.get(d.get("project") or project)
            if cat is None:
                raise SystemExit(f"{where}: no catalogue file for project {d.get('project') or project!r}")
            if key not in cat.templates:
                # the release re-mined reads this message differently: decide its new form
                print(f"{where}: key not in the catalogue: {key[:100]!r}", file=sys.stderr)
                counts["key not in the catalogue"] += 1
                continue
            counts[_decide(cat.templates[key], d, ids, sigs, where)] += 1
    for cat in cats.values():
        C.save_project(cat, cat.path)
    return counts


def _decide(t: C.Template, d: dict, ids: set[str], sigs: dict, where: str) -> str:
    named = [k for k in C.MAPPINGS if d.get(k)]
    if len(named) != 1:
        raise SystemExit(f"{where}: needs exactly one of {', '.join(C.MAPPINGS)}")
    unknown = [i for i in ([d["entry"]] if d.get("entry") else d.get("collateral") or []) if i not in ids]
    if unknown:
        raise SystemExit(f"{where}: unknown entry {unknown[0]!r}")
    t.entry = t.collateral = t.benign = t.uncovered = None
    t.note = (d.get("why") or "").strip() or t.note
    t.key_words = d.get("key_words") or t.key_words
    if d.get("entry"):
        rendered = C.Rendered([t])
        if any(rendered.matches(rx) for rx in sigs.get(d["entry"], [])):
            t.entry = d["entry"]
            return "entry"
        t.uncovered = NEEDS_SIGNATURE + d["entry"]
        return "entry, waiting for a signature"
    if d.get("collateral"):
        coll = d["collateral"]
        t.collateral = [coll] if isinstance(coll, str) else list(coll)
        return "collateral"
    if d.get("benign"):
        t.benign = str(d["benign"])
        return "benign"
    t.uncovered = d.get("class") or True
    return "uncovered"


def decision_files(root: Path = ROOT) -> dict[str, list[Path]]:
    """catalog/decisions/<project>-<part>.yaml by project (the longest project name that
    prefixes the file name), each project's files in name order (reviews sort last)."""
    projects = sorted((p.stem for p in (root / "catalog").glob("*.yaml")), key=len, reverse=True)
    out: dict[str, list[Path]] = {}
    for path in sorted((root / "catalog" / "decisions").glob("*.yaml")):
        project = next((p for p in projects if path.stem.startswith(p + "-")), None)
        if project is None:
            raise SystemExit(f"{path}: the name must start with a catalogue project and '-'")
        out.setdefault(project, []).append(path)
    return out


if __name__ == "__main__":
    if sys.argv[1:] == ["--all"]:
        jobs = decision_files()
    elif len(sys.argv) >= 3:
        jobs = {sys.argv[1]: [Path(p) for p in sys.argv[2:]]}
    else:
        raise SystemExit(__doc__)
    for project, files in jobs.items():
        for what, n in sorted(apply(project, files).items()):
            print(f"{project:16s} {n:6d}  {what}")
