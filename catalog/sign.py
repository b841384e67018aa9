"""Draft a signature for catalogue templates waiting for one.

    python catalog/sign.py ENTRY_ID

Lists the templates whose mapping decision is `entry: ENTRY_ID` but which none of the
entry's signatures match yet (catalog/apply.py left them `uncovered: "needs a signature
on ENTRY_ID"`), and prints a draft signature: one alternation of each template's
distinguishing words, escaped, with a short field between two literal runs when the
longest run alone is too short to be specific. The draft is for a person to read, cut
and paste into the entry (the text is upstream's, the decision what to match is yours);
then rerun catalog/apply.py with the decisions file to record the mapping.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from generator import catalog as C      # noqa: E402
from catalog.apply import NEEDS_SIGNATURE   # noqa: E402

SPECIFIC = 24      # characters of literal text that make a branch specific on its own
LONGEST = 72       # a longer run is cut at a word boundary: the rest adds nothing


def esc(text: str) -> str:
    """re.escape, but spaces stay readable."""
    return re.escape(text).replace("\\ ", " ")


def cut(text: str) -> str:
    return text if len(text) <= LONGEST else text[:LONGEST].rsplit(" ", 1)[0]


def branch(message: str) -> str:
    """The regex of one template: its longest literal run, widened to the next run
    across one field when the run alone is short."""
    runs = C.FIELD.split(message)[::2]
    best = max(range(len(runs)), key=lambda i: len(runs[i].strip()))
    text = esc(cut(runs[best].strip()))
    if len(runs[best].strip()) >= SPECIFIC:
        return text
    after = runs[best + 1].rstrip() if best + 1 < len(runs) else ""
    before = runs[best - 1].lstrip() if best > 0 else ""
    if len(after) >= len(before) and after:
        return f"{esc(runs[best].lstrip())}.{{1,80}}?{esc(cut(after))}"
    if before:
        return f"{esc(before[-LONGEST:])}.{{1,80}}?{esc(runs[best].rstrip())}"
    return text


def waiting(entry_id: str) -> list[C.Template]:
    return [t for t in C.all_templates() if t.uncovered == NEEDS_SIGNATURE + entry_id]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    found = waiting(sys.argv[1])
    if not found:
        raise SystemExit(f"no template waits for a signature on {sys.argv[1]}")
    for t in found:
        print(f"# {t.project} {t.where} ({t.releases}): {t.message[:120]}")
    where = "; ".join(sorted({f"{t.project} {t.where}" for t in found}))
    print(f"  - id: from-catalog\n    regex: '(?:{'|'.join(sorted({branch(t.message) for t in found}))})'"
          f"\n    strength: supporting\n    source: {where}")
