"""The real-log corpus: logs from public reports, labelled with the confirmed cause.

Prints top-1 / top-3 accuracy and false positives (a failure named in a log whose
label is `none`) and fails below 90% top-1, 97% top-3, or on any false positive.
A miss is a reason to improve an entry or the engine's reasoning in general,
never to add a rule that matches one log's incidental text.
"""
from __future__ import annotations

from pathlib import Path

from ruamel.yaml import YAML

from faildex_engine import diagnose

CORPUS = Path(__file__).resolve().parent / "corpus"
TOP1_MIN, TOP3_MIN = 0.90, 0.97


def load_manifest() -> list[dict]:
    return YAML(typ="safe").load((CORPUS / "corpus.yaml").read_text(encoding="utf-8"))


def test_manifest_is_complete(entries):
    items = load_manifest()
    ids = {e.id for e in entries}
    files = {p.name for p in CORPUS.glob("*.log")}
    listed = [it["file"] for it in items]
    assert sorted(listed) == sorted(files), "every corpus log is listed exactly once"
    for it in items:
        assert it["label"] == "none" or it["label"] in ids, f"{it['file']}: unknown label {it['label']}"
        assert str(it["source"]).startswith("https://"), it["file"]


def test_corpus_accuracy(index):
    items = load_manifest()
    top1 = top3 = 0
    false_pos, rows = [], []
    for it in items:
        r = diagnose([str(CORPUS / it["file"])], index)
        ranked = ([r["primary"]["id"]] if r["primary"] else []) + [a["id"] for a in r["alternatives"]]
        label = it["label"]
        if label == "none":
            ok1 = ok3 = r["primary"] is None
            if not ok1:
                false_pos.append(f"{it['file']}: named {ranked[0]} in a log labelled none")
        else:
            ok1 = bool(ranked) and ranked[0] == label
            ok3 = label in ranked[:3]
        top1 += ok1
        top3 += ok3
        if not ok1:
            rows.append(f"  {'hard' if it.get('hard') else '    '} {it['file']:<48} "
                        f"label={label:<30} got={ranked[:3]}")
    n = len(items)
    summary = (f"corpus: {n} logs, top-1 {top1 / n:.1%}, top-3 {top3 / n:.1%}, "
               f"false positives {len(false_pos)}")
    print("\n" + summary + "\n" + "\n".join(rows))
    assert not false_pos, summary + "\n" + "\n".join(false_pos) + "\nmisses:\n" + "\n".join(rows)
    assert top1 / n >= TOP1_MIN and top3 / n >= TOP3_MIN, summary + "\nmisses:\n" + "\n".join(rows)
