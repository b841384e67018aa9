"""The scoring rules (reason.RULES), each on its own, and the README's table made from them."""
from __future__ import annotations

from pathlib import Path

import pytest

from faildex import reason
from faildex.reason import RULES, Candidate, Rule, Scoring
from sitekit import contributing_block

ROOT = Path(__file__).resolve().parent.parent


class FakeGathered:
    """The parts of reason.Gathered a rule reads."""

    def __init__(self, facts=None, cands=None, line_owners=None):
        self.facts = facts or {}
        self.seen_facts = {}
        self.cands = cands or {}
        self.line_owners = line_owners or {}

    def facts_for(self, c):
        return {**self.seen_facts, **self.facts, **c.facts}


def finding(line=1, source="a.log", signature="s", rank=None, text="x"):
    f = {"source": source, "order": 0, "line": line, "text": text, "signature": signature, "facts": {}}
    if rank is not None:
        f["rank"] = rank
    return f


def cand(eid="e", defining=(), supporting=(), **meta):
    c = Candidate(eid, {"downstream": False, "wrapper": False, "title": eid, "url": "", **meta})
    c.defining, c.supporting = list(defining), list(supporting)
    c.sig_ids = {f["signature"] for f in c.defining + c.supporting}
    return c


def score(rule_name, cands, g=None, verdict=None, sources=(), entries=None, baseline=None):
    sc = Scoring(g or FakeGathered(cands={c.id: c for c in cands}), list(cands), list(sources), entries or {},
                 baseline, verdict or {"suspects": []})
    rule = next(r for r in RULES if r.name == rule_name)
    rule.run(sc)
    return sc


def parts(c):
    return {name: round(delta, 3) for name, delta, _ in c.parts if name}


def test_every_rule_has_constants_a_paragraph_and_a_function():
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))
    for r in RULES:
        assert isinstance(r, Rule) and r.constants and callable(r.fn)
        assert len(r.doc) > 40 and r.doc.endswith(".")
        for name, value in r.constants:
            assert getattr(reason, name) == value, name


def test_readme_table_is_made_from_the_registry():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert reason.rules_table() in readme


def test_defining_and_supporting():
    c = cand(defining=[finding()])
    score("defining", [c])
    assert parts(c) == {"DEFINING": reason.DEFINING}
    s = cand(supporting=[finding(signature="a"), finding(2, signature="b"), finding(3, signature="c"),
                         finding(4, signature="d")])
    score("defining", [s])
    assert parts(s) == {"SUPPORTING_BASE": reason.SUPPORTING_MAX}    # 0.30 + 3 x 0.10, capped at 0.50


def test_shared_line_and_refines():
    a, b = cand("a", defining=[finding()]), cand("b", defining=[finding()], refines=["a"])
    g = FakeGathered(cands={"a": a, "b": b}, line_owners={("a.log", 1): {"a", "b"}})
    score("shared-line", [a, b], g)
    assert parts(a) == {"SHARED_LINE": reason.SHARED_LINE}
    assert parts(b) == {"SHARED_LINE": reason.SHARED_LINE, "REFINES": reason.REFINES}


def test_corroborating_counts_kinds_on_other_lines_up_to_the_cap():
    c = cand(defining=[finding(signature="d")],
             supporting=[finding(1, signature="same-line"), finding(5, signature="x"), finding(6, signature="y"),
                         finding(7, signature="z")])
    score("corroborating", [c])
    assert parts(c) == {"CORROBORATING": reason.CORROBORATING * reason.CORROBORATING_KINDS}


def test_versions_inside_outside_and_missing():
    affects = [{"software": "pytorch", "introduced": "2.4", "fixed": "2.6"}]
    inside, outside, unknown = (cand(defining=[finding()], affects=affects) for _ in range(3))
    score("versions", [inside], FakeGathered(facts={"pytorch_version": "2.5.1"}))
    score("versions", [outside], FakeGathered(facts={"pytorch_version": "2.7.0"}))
    sc = score("versions", [unknown], FakeGathered())
    assert parts(inside) == {"VERSION_INSIDE": reason.VERSION_INSIDE}
    assert parts(outside) == {"VERSION_OUTSIDE": reason.VERSION_OUTSIDE}
    assert parts(unknown) == {} and "pytorch_version" in sc.missing


def test_discriminators_agree_or_point_elsewhere_once_per_fact():
    d = {"signal": "Timeout", "fact": "timeout_s", "here_pattern": "^600$", "elsewhere": "other",
         "elsewhere_when": "60"}
    yes, no = cand(defining=[finding()], discriminators=[d, dict(d)]), cand(defining=[finding()], discriminators=[d])
    score("discriminators", [yes], FakeGathered(facts={"timeout_s": "600"}))
    sc = score("discriminators", [no], FakeGathered(facts={"timeout_s": "60"}))
    assert parts(yes) == {"AGREES": reason.AGREES}          # two discriminators, one fact: once
    assert parts(no) == {"DISAGREES": reason.DISAGREES} and sc.pointed == {"other": 1}


def test_baseline_seen_or_new():
    seen, new = cand(defining=[finding(text="boom 1")]), cand(defining=[finding(text="bang")])
    shapes = {reason.shape("boom 7")}
    score("baseline", [seen], baseline=shapes)
    score("baseline", [new], baseline=shapes)
    assert parts(seen) == {"BASELINE_SEEN": reason.BASELINE_SEEN}
    assert parts(new) == {"BASELINE_NEW": reason.BASELINE_NEW}


def test_pointed_at():
    other = cand("other", defining=[finding()])
    g = FakeGathered(cands={"other": other})
    sc = Scoring(g, [other], [], {}, None, {"suspects": []})
    sc.pointed["other"] = 2
    next(r for r in RULES if r.name == "pointed-at").run(sc)
    assert parts(other) == {"POINTED_AT": pytest.approx(2 * reason.POINTED_AT)}


def test_job_rule_sets_a_cause_of_other_ranks_aside():
    mine, theirs = cand("mine", defining=[finding(rank=2)]), cand("theirs", defining=[finding(rank=0)])
    verdict = {"suspects": [{"rank": 2, "kind": "crashed", "why": "", "evidence": []}]}
    score("job", [mine, theirs], verdict=verdict)
    assert mine.factor == 1.0 and theirs.factor == reason.OTHER_RANK


def test_job_rule_brings_the_hang_entry_for_a_silent_rank():
    entries = {reason.JOB_HANG_ENTRY: {"downstream": False, "wrapper": False, "title": "hang", "url": ""}}
    verdict = {"suspects": [{"rank": 3, "kind": "missing", "why": "rank 3 printed no timeout",
                             "evidence": [{"source": "a.log", "line": 9, "text": "Timed out waiting"}]}]}
    sc = score("job", [], verdict=verdict, entries=entries)
    [hang] = sc.scored
    assert hang.id == reason.JOB_HANG_ENTRY and parts(hang) == {"JOB_HANG": reason.JOB_HANG}
    assert hang.defining[0]["line"] == 9


def test_similarity_and_confidence_scales():
    assert reason.scaled_similarity(reason.SIMILARITY_FULL, 0.25) == 0.25
    assert reason.scaled_similarity(0.3, 0.25) == 0.12
    assert reason.shown_confidence(1.7) == reason.CONFIDENCE_MAX and reason.shown_confidence(-1) == reason.CONFIDENCE_MIN


def test_the_checkouts_index_cache_is_keyed_on_the_engine_too(tmp_path):
    # generator/index.py builds the index with the engine's modules (reason.tokens, lines,
    # context): an edit there must give a new cache key
    import os
    import sys
    sys.path.insert(0, str(ROOT))
    from generator.loader import source_digest
    before = source_digest(ROOT)
    engine = ROOT / "pyodide_app" / "faildex" / "lines.py"
    st = engine.stat()
    try:
        os.utime(engine, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        assert source_digest(ROOT) != before
    finally:
        os.utime(engine, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert source_digest(ROOT) == before


def test_contributings_worked_example_of_a_scoring_rule_runs_as_written(monkeypatch):
    # the block is executed in reason's own namespace, as if pasted into reason.py
    namespace = dict(vars(reason))
    exec(contributing_block("tests/test_rules.py", "a new scoring rule"), namespace)
    new = namespace["RULES"][-1]
    monkeypatch.setattr(reason, "RULES", namespace["RULES"])
    monkeypatch.setitem(globals(), "RULES", namespace["RULES"])     # score() looks rules up here
    for name, value in new.constants:
        monkeypatch.setattr(reason, name, value, raising=False)
    assert new.name == "repeated" and new.name in [r.name for r in reason.RULES]
    many = cand("many", defining=[finding(line=n) for n in (1, 2, 3)])
    many.reports = 3
    once = cand("once", defining=[finding(line=9)])
    once.reports = 1
    score("repeated", [many, once])
    assert parts(many) == {"REPEATED": 0.02} and parts(once) == {}
    assert "3 lines report it" in many.why()
    # the README's table picks it up (and would ask for the new row)
    assert "| repeated | `REPEATED` +0.02 | A cause that 3 or more lines report. |" in reason.rules_table()
