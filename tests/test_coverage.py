"""Every failure class of the coverage list has its entry, in its category."""
from __future__ import annotations

from pathlib import Path

from ruamel.yaml import YAML

COVERAGE = Path(__file__).resolve().parent / "coverage.yaml"


def test_every_coverage_id_has_its_entry(entries):
    wanted = YAML(typ="safe").load(COVERAGE.read_text(encoding="utf-8"))
    have = {e.id: e.data["category"] for e in entries}
    missing = [f"{cat}/{eid}" for cat, ids in wanted.items() for eid in ids if have.get(eid) != cat]
    assert not missing, "coverage ids without an entry in their category: " + ", ".join(missing)
    assert len(have) >= sum(len(ids) for ids in wanted.values()) >= 90
