"""Every example of every entry is a test: the engine must name its entry as primary.

On failure the whole confusion table is printed (expected -> got), so a change to
one entry's signatures that steals another entry's examples is visible at once.
"""
from __future__ import annotations

from collections import Counter

from faildex import Diagnosis
from generator.validate import example_text


def diagnose_text(index, name: str, text: str) -> dict:
    d = Diagnosis(index)
    d.feed(name, text.encode("utf-8"))
    d.close(name)
    return d.report()


def test_every_example_diagnoses_to_its_entry(entries, index):
    confusion: Counter = Counter()
    failures = []
    total = 0
    for e in entries:
        for i, ex in enumerate(e.data["examples"]):
            expect = ex.get("expect", e.id)
            expect = None if expect == "none" else expect
            text = example_text(e, ex)
            report = diagnose_text(index, f"{e.id}#{i}", text)
            got = report["primary"]["id"] if report["primary"] else None
            total += 1
            confusion[(expect, got)] += 1
            if got != expect:
                failures.append(f"{e.rel} example {i}: expected {expect}, got {got}"
                                + (f" ({report['primary']['why']})" if report["primary"] else ""))
    assert total >= 2 * len(entries)
    if failures:
        table = "\n".join(f"  {str(exp):<36} -> {got}  x{n}" for (exp, got), n in sorted(
            confusion.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))) if exp != got)
        raise AssertionError(f"{len(failures)} of {total} examples misdiagnosed:\n"
                             + "\n".join(failures) + "\nconfusion (expected -> got):\n" + table)
