"""Real logs from public reports, labelled with the confirmed cause, in two corpora.

  tests/corpus/dev/     may inform signatures (corpus.yaml)
  tests/corpus/sealed/  collected by helpers who never read entries/ and never ran
                        faildex, from threads no entry cites (manifest-*.yaml); a miss
                        here is fixed by a general rule, never by a signature shaped
                        to the log

Each prints top-1 / top-3 accuracy, false positives (a diagnosis of a log labelled
`none`), the split by difficulty, and how often the text-similarity alternatives
hold the label when no signature decided. Thresholds sit below today's figures
and only ever move up.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from faildex import diagnose

CORPUS = Path(__file__).resolve().parent / "corpus"
ROOT = CORPUS.parent.parent
# (top-1, top-3) minimums, and the false positives allowed when not 0; measured 2026-12-03 (fifth session) sealed 92.5 % / 97.5 %: see the note of issue 9
THRESHOLDS = {"dev": (0.93, 0.93), "sealed": (0.91, 0.96),
              # four fresh batches read on 2026-12-06 (79 logs) to find what was missed: 87.3 % /
              # 89.9 % after the changes they led to
              "dev-2": (0.84, 0.86),
              # a fresh batch collected 2026-12-04 (issue 27), measured once: 93.0 % / 95.3 %, hard 7/7
              "sealed-2": (0.90, 0.93),
              # a fresh batch collected 2026-12-05 (issue 27), measured once, unread: 78.3 % / 87.0 %, hard 4/6
              "sealed-3": (0.73, 0.82),
              # a fresh batch collected 2026-12-05 (issue 27), 23 logs, measured once before this
              # session's catalogue work and once after, unread: 95.7 % / 95.7 % both times
              "sealed-4": (0.86, 0.86),
              # a fresh batch collected 2026-12-05 (issue 27), 21 logs, measured once at the session's
              # start (11f2bcd) and once at its end, unread: 90.5 % / 95.2 % both times, hard 4/4
              "sealed-5": (0.85, 0.90),
              # dev-3, dev-4 and dev-5 were sealed-6, -7 and -8, read on 2026-12-07 to find what
              # was missed (their sealed figures stay in the comments below); after that
              # session's changes 77.8 / 77.8 % (1 FP), 87.5 / 87.5 %, 85.9 / 90.1 %
              # a fresh batch of 18 logs collected 2026-12-06 (issue 26: hard ones wanted; 8 hard, 7
              # healthy), measured once unread at 454e970 before this session's merges: 66.7 % /
              # 72.2 %, hard 3/8, one false positive (held as a third figure: at most 1)
              "dev-3": (0.72, 0.72, 1),
              # a fresh batch of 16 logs collected 2026-12-06 (issues 26/27: hard ones wanted; 3 hard,
              # 2 healthy), measured once unread with the session-start engine (f2d497b): 62.5 % /
              # 62.5 %, hard 0/3, no false positive
              "dev-4": (0.81, 0.81),
              # a fresh batch of 71 logs collected 2026-12-06 by three collectors (14 hard, 8
              # healthy), measured unread with the session-start engine (3034b82): 70.4 % / 76.1 %,
              # hard 7/14, no false positive; at that session's end 74.6 % / 80.3 %
              "dev-5": (0.82, 0.86),
              # dev-6 was sealed-9, read on 2026-12-07 (fifteenth session) to find what was missed;
              # after that session's changes 93.8 % / 96.9 %, no false positive.
              # While sealed: a fresh batch of 65 logs collected 2026-12-07 by three collectors (18
              # hard, 12 healthy), measured unread with the session-start engine (9a85d61) and at
              # 08ff55d: 76.9 % / 81.5 %, at 39902a9 76.9 % / 83.1 %, hard 12/18, one false positive
              "dev-6": (0.90, 0.93),
              # dev-7 was sealed-10, read on 2026-12-07 (sixteenth session) to find what was missed.
              # While sealed: a fresh batch of 70 logs collected 2026-12-07 by four collectors (19
              # hard, 17 healthy), measured unread with the session-start engine (98d2eb1): 82.9 % /
              # 87.1 %, hard 14/19, two false positives (held as a third figure); at be64a8e (after
              # that session's entry changes) 84.3 % / 85.7 %, and at 6f6df3a the same. Read: 97.1 % /
              # 97.1 %, no false positive, after the changes it led to (0b7ee4c)
              "dev-7": (0.93, 0.93),
              # dev-8 was sealed-11, read on 2026-12-07 (seventeenth session) to find what was missed.
              # While sealed: a fresh batch of 76 logs collected 2026-12-07 (sixteenth session) by four
              # collectors (20 hard, 17 healthy), measured unread with the session-start engine
              # (7828609): 82.9 % / 85.5 %, hard 14/20, one false positive (held as a third figure);
              # unchanged by the catalogue merges (6f6df3a); after the fixes made on dev-7 (0b7ee4c)
              # 85.5 % / 88.2 %, hard 15/20, one false positive, no entry named in 6 of 59 failing logs.
              # Read: 93.4 % / 96.1 %, hard 18/20, one false positive (a002, an engine case), after
              # the changes it led to (76d6c4a, cca2727)
              "dev-8": (0.90, 0.93, 1),
              # a fresh batch of 65 logs collected 2026-12-07 (seventeenth session) by five
              # collectors (11 hard, 9 healthy), measured unread with the session-start engine
              # (22453c0): 81.5 % / 83.1 %, hard 8/11, no false positive, no entry named in 2 of 56
              # failing logs
              "sealed-12": (0.77, 0.79),
              # dev-9 was sealed-13, read on 2026-12-08 (twenty-first session) to find what was
              # missed; after that session's changes 91.4 % / 93.8 %, hard 5/8, one false positive.
              # While sealed: a fresh batch of 81 logs collected 2026-12-07 by eight collectors
              # (issue 27; 9 hard, 11 healthy), measured unread with the twentieth session's start
              # engine (1e99cf8) and at its end (4c0fc70): 74.1 % / 77.8 % both times, hard 3/8, one
              # false positive, nothing named on 7 of the 70 failing logs
              "dev-9": (0.88, 0.90, 1),
              # a fresh batch of 65 logs collected 2026-12-08 by nine collectors (issues 26/27; 12
              # hard, 9 healthy), measured unread with the session-start engine (4c0fc70): 81.5 % /
              # 86.2 %, hard 7/11, one false positive, nothing named on 3 of the 56 failing logs
              "sealed-14": (0.78, 0.83, 1)}
_THREAD = re.compile(r"https?://github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull|discussions)/(\d+)")


def manifest(part: str) -> list[dict]:
    items = []
    for path in sorted((CORPUS / part).glob("*.yaml")):
        for it in YAML(typ="safe").load(path.read_text(encoding="utf-8")):
            items.append(dict(it, manifest=path.name))
    return items


def threads(text: str) -> set[str]:
    """GitHub threads named in text (owner/repo#N, case-folded)."""
    return {f"{m.group(1).lower()}#{m.group(2)}" for m in _THREAD.finditer(text)}


@pytest.mark.parametrize("part", sorted(THRESHOLDS))
def test_manifest_is_complete(entries, part):
    items = manifest(part)
    ids = {e.id for e in entries}
    files = {p.name for p in (CORPUS / part).glob("*.log")}
    listed = [it["file"] for it in items]
    assert sorted(listed) == sorted(files), "every corpus log is listed exactly once"
    for it in items:
        assert it["label"] == "none" or it["label"] in ids, f"{it['file']}: unknown label {it['label']}"
        assert str(it["source"]).startswith("https://"), it["file"]


def test_sealed_shares_no_thread_with_entries_or_dev():
    """A sealed log must come from a thread no entry cites (its signatures, examples and
    references) and that the dev corpus does not use."""
    cited = set()
    for path in (ROOT / "entries").rglob("*"):
        if path.is_file() and path.suffix in (".yaml", ".log", ".md", ".txt"):
            cited |= threads(path.read_text(encoding="utf-8", errors="replace"))
    dev = threads((CORPUS / "dev" / "corpus.yaml").read_text(encoding="utf-8"))
    shared = []
    for it in [it for part in THRESHOLDS if part.startswith("sealed") for it in manifest(part)]:
        for t in threads(str(it["source"])):
            if t in cited:
                shared.append(f"{it['file']}: {t} is cited in entries/")
            if t in dev:
                shared.append(f"{it['file']}: {t} is in the dev corpus")
    assert not shared, "\n".join(shared)


def evaluate(part: str, index) -> dict:
    rows, stats = [], {"n": 0, "top1": 0, "top3": 0, "fp": 0, "hard": [0, 0], "easy": [0, 0],
                       "undecided": 0, "undecided_top3": 0, "nothing": 0}
    for it in manifest(part):
        r = diagnose([str(CORPUS / part / it["file"])], index)
        ranked = ([r["primary"]["id"]] if r["primary"] else []) + [a["id"] for a in r["alternatives"]]
        label = it["label"]
        if label == "none":
            ok1 = ok3 = r["primary"] is None
            stats["fp"] += not ok1
        else:
            ok1 = bool(ranked) and ranked[0] == label
            ok3 = label in ranked[:3]
            if r["primary"] is None:
                stats["undecided"] += 1
                stats["undecided_top3"] += ok3
                stats["nothing"] += not ranked     # no entry named at all (issue 27: at most 3 %)
        stats["n"] += 1
        stats["top1"] += ok1
        stats["top3"] += ok3
        split = stats["hard" if it.get("hard") else "easy"]
        split[0] += 1
        split[1] += ok1
        if not ok1:
            rows.append(f"  {'hard' if it.get('hard') else '    '} {it['file']:<56} "
                        f"label={label:<32} got={ranked[:3]}")
    stats["rows"] = rows
    return stats


def summary(part: str, s: dict) -> str:
    n = s["n"]
    return (f"{part}: {n} logs, top-1 {s['top1'] / n:.1%}, top-3 {s['top3'] / n:.1%}, false positives "
            f"{s['fp']}; hard {s['hard'][1]}/{s['hard'][0]}, not hard {s['easy'][1]}/{s['easy'][0]}; "
            f"no signature decided in {s['undecided']} labelled logs, the label among the text-similarity "
            f"alternatives in {s['undecided_top3']}; no entry named at all in {s['nothing']}")


@pytest.mark.parametrize("part", sorted(THRESHOLDS))
def test_corpus_accuracy(index, part):
    s = evaluate(part, index)
    line = summary(part, s)
    # a sealed part's misses are never shown, only its counts: a log read to see why it
    # missed is no longer sealed
    rows = "\n".join(s["rows"]) if part.startswith("dev") else "(sealed: counts only)"
    print("\n" + line + "\n" + rows)
    top1_min, top3_min, fp_max = (*THRESHOLDS[part], 0)[:3]
    assert s["fp"] <= fp_max, line + "\nmisses:\n" + rows
    assert s["top1"] / s["n"] >= top1_min and s["top3"] / s["n"] >= top3_min, line + "\nmisses:\n" + rows


def test_no_figure_rests_on_a_signature_no_example_shows(entries, index):
    """The ablation of issue 9: the validator makes every defining and supporting
    signature match one of its own entry's examples or catalogue templates, so no
    signature can exist for a corpus log alone. The signatures that match no example line at all (context and
    collateral ones, read for facts) are dropped here and the index rebuilt: both
    corpora must come out exactly as with them."""
    import copy

    from generator.index import build_index
    from generator.validate import example_text

    from generator import catalog

    ablated = copy.deepcopy(entries)
    own = {e.id: [ln for ex in e.data["examples"] for ln in (example_text(e, ex) or "").splitlines()]
           for e in ablated}
    lines = [ln for e in ablated for ln in own[e.id]]
    # a catalogue template mapped to an entry is an example as upstream prints it (FDX020);
    # its ~70,000 renderings are searched where the signature's longest literal is, as the
    # validator's FDX020 check does
    rendered = catalog.Rendered([t for t in catalog.all_templates() if t.entry])
    dropped = []
    for e in ablated:
        kept = []
        for s in e.data["signatures"]:
            rx = re.compile(s["regex"])
            # its own entry's lines first: most signatures match there
            shown = (any(rx.search(ln) for ln in own[e.id])
                     or rendered.matches(rx, catalog.longest_literal(rx.pattern), first=True)
                     or any(rx.search(ln) for ln in lines))
            (kept if shown else dropped).append(s)
        e.data["signatures"] = kept
    assert dropped and all(s["strength"] in ("context", "collateral") for s in dropped), dropped
    without = build_index(ROOT, ablated)
    for part in ("dev", "sealed"):
        full, less = evaluate(part, index), evaluate(part, without)
        print(f"\n{len(dropped)} signatures dropped; {summary(part, less)}")
        assert [less[k] for k in ("top1", "top3", "fp")] == [full[k] for k in ("top1", "top3", "fp")], part
