"""The validator: one broken copy of a real entry per error kind, each with its
exact code and file:line:col; plus hostile entry files (issue 6, item 4)."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from generator.validate import validate

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "entries" / "rendezvous" / "torchrun-rendezvous-timeout.yaml"


@pytest.fixture(scope="module")
def pristine_checkout(tmp_path_factory):
    """A minimal checkout: the model entry, its link targets as stubs, healthy logs."""
    tmp_path = tmp_path_factory.mktemp("pristine")
    (tmp_path / "entries" / "rendezvous").mkdir(parents=True)
    shutil.copytree(ROOT / "entries" / "healthy", tmp_path / "entries" / "healthy")
    shutil.copy(MODEL, tmp_path / "entries" / "rendezvous" / MODEL.name)
    shutil.copy(ROOT / "facts.yaml", tmp_path / "facts.yaml")
    # Link targets of the model entry, copied as real entries so links resolve.
    from ruamel.yaml import YAML
    data = YAML(typ="safe").load(MODEL.read_text())
    targets = set(data.get("related", [])) | {d["elsewhere"]["entry"] for d in data.get("discriminators", [])} \
        | {n["entry"] for n in data.get("not_this", [])}
    for t in targets:
        src = next((ROOT / "entries").glob(f"*/{t}.yaml"), None)
        assert src is not None, f"link target {t} is missing from entries/"
        dst = tmp_path / "entries" / src.parent.name / src.name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dst)
        if (src.parent / t).is_dir():
            shutil.copytree(src.parent / t, dst.parent / t)
    # the copies' own links point further: keep only those back to the model entry
    model_id = MODEL.stem
    for p in tmp_path.glob("entries/*/*.yaml"):
        if p.name == MODEL.name:
            continue
        d = YAML(typ="rt").load(p.read_text())
        d.pop("related", None)
        d.pop("refines", None)
        for k, target in (("not_this", lambda x: x["entry"]),
                          ("discriminators", lambda x: x["elsewhere"]["entry"])):
            if k in d:
                kept = [x for x in d[k] if target(x) == model_id]
                if kept:
                    d[k] = kept
                else:
                    d.pop(k)
        for ex in d.get("examples", []):
            if ex.get("expect") not in (None, p.stem, model_id):
                ex.pop("expect")   # an entry outside this small checkout
        with open(p, "w") as fh:
            YAML(typ="rt").dump(d, fh)
    # the catalogue, with the templates tied to entries of this small checkout only (a
    # signature's only example may be a mapped template: FDX020)
    from generator import catalog
    (tmp_path / "catalog").mkdir()
    present = {p.stem for p in tmp_path.glob("entries/*/*.yaml")}
    for cat in catalog.load_all(ROOT):
        cat.templates = {k: t for k, t in cat.templates.items() if set(t.ids) <= present}
        catalog.save_project(cat, tmp_path / "catalog" / cat.path.name)
    # read once, so that each test's copy carries the parsed catalogue in its .cache/ (keyed
    # on each file's bytes: a test that edits a file parses that one again): ~4 s a test
    catalog.load_all(tmp_path)
    return tmp_path


@pytest.fixture()
def checkout(pristine_checkout, tmp_path):
    """A fresh copy of the minimal checkout for each test to break (built once per module)."""
    shutil.copytree(pristine_checkout, tmp_path / "checkout")
    return tmp_path / "checkout"


def edit(checkout: Path, old: str, new: str, count: int = 1) -> Path:
    p = checkout / "entries" / "rendezvous" / MODEL.name
    text = p.read_text()
    assert old in text, old
    p.write_text(text.replace(old, new, count))
    return p


def problems(checkout: Path) -> list[str]:
    _, probs = validate(checkout)
    return [str(p) for p in probs]


def line_of(checkout: Path, needle: str) -> int:
    text = (checkout / "entries" / "rendezvous" / MODEL.name).read_text()
    return text[:text.index(needle)].count("\n") + 1


def test_the_clean_checkout_validates(checkout):
    assert problems(checkout) == []


REL = "entries/rendezvous/torchrun-rendezvous-timeout.yaml"


@pytest.mark.parametrize("old,new,code,needle", [
    ("severity: high", "severity: high\nseverity_level: 3", "FDX002", "severity_level"),
    ("verify: >", "verified: >", "FDX002", "verified"),
    ("severity: high", "severity: urgent", "FDX005", "severity: urgent"),
    ("id: torchrun-rendezvous-timeout", "id: torchrun-rdzv-timeout", "FDX010", "id: torchrun-rdzv"),
    ("category: rendezvous", "category: nccl", "FDX011", "category: nccl"),
    ("related: [rendezvous-closed", "related: [no-such-entry", "FDX013", "related: [no-such"),
    ("regex: 'RendezvousTimeoutError'", "regex: 'RendezvousTimeoutError('", "FDX014", "regex: 'Rendezvous"),
    ("url: https://docs.pytorch.org/docs/stable/elastic/run.html", "url: ftp://docs.pytorch.org/x",
     "FDX015", "url: ftp"),
    ("regex: 'RendezvousTimeoutError'", "regex: 'Using network IB'", "FDX016", "regex: 'Using network IB'"),
    ("regex: 'RendezvousTimeoutError'", "regex: '(?i)rendezvoustimeouterror'", "FDX031", "regex: '(?i)"),
    ("regex: 'RendezvousTimeoutError'", "regex: '(Rendezvous+)+TimeoutError'", "FDX018", "regex: '(Rend"),
    ("regex: 'RendezvousTimeoutError'", "regex: 'RendezvousTimeoutErrorXYZ'", "FDX020", "regex: 'RendezvousTimeoutErrorXYZ'"),
    ("regex: 'RendezvousTimeoutError'", "regex: '[A-Z]\\w{3}'", "FDX017", "regex: '[A-Z]"),
    ("  - id: rdzv-join-timeout-conf", "  - id: rdzv-timeout-error", "FDX026", "  - id: rdzv-timeout-error\n    regex: \"rdzv"),
    ("    url: https://github.com/ymcui/Chinese-LLaMA-Alpaca-2/issues/274",
     "    url: https://docs.pytorch.org/docs/stable/elastic/run.html/", "FDX038", "run.html/"),
    # FDX039: a defining signature whose text no catalogue template holds and whose source
    # cites no report (the same line, as the example prints it, with its URL gone)
    ("regex: 'RendezvousTimeoutError'\n    strength: defining\n    source: pytorch/pytorch torch/distributed/elastic/rendezvous/api.py (class RendezvousTimeoutError), raised in dynamic_rendezvous.py _RendezvousOpExecutor.run; real output in https://github.com/facebookresearch/av_hubert/issues/19",
     "regex: 'RendezvousTimeoutError'\n    strength: defining\n    source: pytorch/pytorch torch/distributed/elastic/rendezvous/api.py",
     "FDX039", "regex: 'RendezvousTimeoutError'"),
    # FDX007: a title longer than the schema's 90 characters
    ("title: torchrun rendezvous times out before every node joins (RendezvousTimeoutError)",
     "title: " + "torchrun rendezvous times out " * 4, "FDX007", "title: torchrun rendezvous times out torchrun"),
    # FDX019: an example no signature of the entry matches
    ("examples:\n", "examples:\n  - source: https://example.org/thread/1\n    log: 'all good here, step 10 of 10'\n",
     "FDX019", "  - source: https://example.org/thread/1"),
    # FDX025: an example file that is not there
    ("examples:\n", "examples:\n  - source: https://example.org/thread/2\n    file: torchrun-rendezvous-timeout/no-such.log\n",
     "FDX025", "    file: torchrun-rendezvous-timeout/no-such.log"),
    # FDX027: a discriminator's fact without its here_pattern
    ("  - signal: Which error the waiting nodes print\n",
     "  - signal: Which error the waiting nodes print\n    fact: join_timeout\n", "FDX027",
     "  - signal: Which error the waiting nodes print"),
    # FDX037: a discriminator fact that no signature and no context pattern extracts
    ("  - signal: Which error the waiting nodes print\n",
     "  - signal: Which error the waiting nodes print\n    fact: no_such_fact\n    here_pattern: 'x'\n", "FDX037",
     "  - signal: Which error the waiting nodes print"),
    # FDX028: an entry among its own related entries
    ("related: [rendezvous-closed", "related: [torchrun-rendezvous-timeout, rendezvous-closed", "FDX028",
     "related: [torchrun-rendezvous-timeout"),
    # FDX043: a check recorded on a day that has not come; FDX006: a release without a number
    ("  on: '2026-12-06'\n  against: [PyTorch 2.13]\n", "  on: '2999-01-01'\n  against: [PyTorch 2.13]\n", "FDX043",
     "  on: '2999"),
    ("  on: '2026-12-06'\n  against: [PyTorch 2.13]\n", "  on: '2026-11-30'\n  against: [PyTorch latest]\n", "FDX006",
     "  against: [PyTorch latest]"),
    ("  on: '2026-12-06'\n  against: [PyTorch 2.13]\n", "  on: 2026-11-30\n  against: [PyTorch 2.13]\n", "FDX004",
     "  on: 2026-11-30"),
    # FDX044: a fix step for a signature the entry does not have
    ("    why: The rendezvous completes the moment the last expected agent registers with the same endpoint and run id.\n",
     "    why: The rendezvous completes the moment the last expected agent registers with the same endpoint and run id.\n"
     "    for_signatures: [no-such-signature]\n", "FDX044", "    for_signatures: [no-such-signature]"),
    # FDX032: a version range that ends before it starts
    ("affects: []", "affects:\n  - software: pytorch\n    introduced: '2.5.0'\n    fixed: '2.4.0'", "FDX032",
     "  - software: pytorch\n    introduced"),
])
def test_each_broken_copy_fails_with_its_code(checkout, old, new, code, needle):
    edit(checkout, old, new)
    got = problems(checkout)
    line = line_of(checkout, needle)
    assert any(p.startswith(f"{REL}:{line}:") and f" {code} " in p for p in got), (code, line, got)


def test_lookalike_without_a_link_back(checkout):
    target = checkout / "entries" / "rendezvous" / "rendezvous-closed.yaml"
    from ruamel.yaml import YAML
    d = YAML(typ="rt").load(target.read_text())
    d.pop("discriminators", None)
    d.pop("not_this", None)
    with open(target, "w") as fh:
        YAML(typ="rt").dump(d, fh)
    got = problems(checkout)
    line = line_of(checkout, "      entry: rendezvous-closed")
    assert any(g.startswith(f"{REL}:{line}:") and " FDX033 rendezvous-closed has no" in g for g in got), got


def test_missing_required_field(checkout):
    p = edit(checkout, "verify: >\n", "x_verify: >\n")
    got = problems(checkout)
    assert any(f" FDX003 missing required field 'verify'" in g for g in got), got


def test_duplicate_id_across_files(checkout):
    src = checkout / "entries" / "rendezvous" / MODEL.name
    dup = checkout / "entries" / "cuda" / MODEL.name
    dup.parent.mkdir(exist_ok=True)
    text = src.read_text().replace("category: rendezvous", "category: cuda")
    dup.write_text(text)
    got = problems(checkout)
    assert any(" FDX012 " in g for g in got), got


def test_yaml_syntax_error_has_position(checkout):
    edit(checkout, "severity: high", "severity: [high")
    got = problems(checkout)
    assert any(" FDX001 " in g and g.startswith(REL + ":") for g in got), got


def test_duplicate_yaml_key(checkout):
    edit(checkout, "severity: high", "severity: high\nseverity: low")
    got = problems(checkout)
    assert any(f"{REL}:{line_of(checkout, 'severity: low')}:" in g and " FDX021 " in g for g in got), got


def test_all_errors_are_reported_at_once(checkout):
    edit(checkout, "severity: high", "severity: urgent")
    edit(checkout, "verify: >", "verified: >")
    codes = {g.split()[1] for g in problems(checkout)}
    assert {"FDX005", "FDX002", "FDX003"} <= codes


def test_billion_laughs_is_refused_fast(checkout):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)},"
        f" *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(12))
    (checkout / "entries" / "rendezvous" / "bomb.yaml").write_text(bomb)
    # CPU time of this process: a busy machine stretched the wall clock past 30 s in CI, while
    # an expanded bomb (9^13 nodes) would take hours of CPU
    t = time.process_time()
    got = problems(checkout)
    assert time.process_time() - t < 30
    assert any(g.startswith("entries/rendezvous/bomb.yaml:2:") and " FDX022 " in g for g in got), got


def test_huge_entry_file_is_refused(checkout):
    (checkout / "entries" / "rendezvous" / "huge.yaml").write_text("id: huge\n" + "# x\n" * ((13 << 20) // 4))
    got = problems(checkout)
    assert any(g.startswith("entries/rendezvous/huge.yaml:1:1: FDX023") for g in got), got


def test_non_utf8_entry_file(checkout):
    (checkout / "entries" / "rendezvous" / "latin.yaml").write_bytes(b"id: latin\ntitle: caf\xe9\n")
    got = problems(checkout)
    assert any(g.startswith("entries/rendezvous/latin.yaml:2:11: FDX024") for g in got), got


def test_not_a_mapping(checkout):
    (checkout / "entries" / "rendezvous" / "list.yaml").write_text("- a\n- b\n")
    assert any(" FDX029 " in g for g in problems(checkout))


def test_cli_exit_codes(checkout):
    ok = subprocess.run([sys.executable, "-m", "generator.cli", "validate"], cwd=ROOT,
                        env={"FAILDEX_ROOT": str(checkout), "PATH": "/usr/bin:/bin"},
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    edit(checkout, "severity: high", "severity: urgent")
    bad = subprocess.run([sys.executable, "-m", "generator.cli", "validate"], cwd=ROOT,
                         env={"FAILDEX_ROOT": str(checkout), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True)
    assert bad.returncode == 1
    assert f"{REL}:{line_of(checkout, 'severity: urgent')}:11: FDX005" in bad.stdout
    assert "Traceback" not in bad.stderr


def test_new_scaffolds_an_entry_pointing_at_the_schema(checkout):
    r = subprocess.run([sys.executable, "-m", "generator.cli", "new", "cuda/some-new-failure"], cwd=ROOT,
                       env={"FAILDEX_ROOT": str(checkout), "PATH": "/usr/bin:/bin"},
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    text = (checkout / "entries" / "cuda" / "some-new-failure.yaml").read_text()
    assert text.startswith("# yaml-language-server: $schema=")
    assert "id: some-new-failure" in text and "category: cuda" in text
    # The scaffold parses and has the entry's shape: validate points at what is left to
    # write (the TODO signature matches no example), never at the scaffold's syntax.
    got = [p for p in problems(checkout) if "some-new-failure" in p]
    codes = {p.split()[1] for p in got}
    assert got and not codes & {"FDX001", "FDX002", "FDX003", "FDX004", "FDX005", "FDX006", "FDX008"}, got
    assert "FDX020" in codes, got
    # its fields come in the order of the page sections that show them
    from generator.schema import ENTRY_SECTIONS
    order = [f for sec in ENTRY_SECTIONS for f in sec.fields]
    keys = [ln.split(":")[0] for ln in text.splitlines() if re.match(r"^[a-z_]+:", ln)]
    shown = [k for k in keys if k in order]
    assert shown == sorted(shown, key=order.index), keys


def test_schema_file_is_current():
    import json
    from generator.schema import json_schema
    committed = json.loads((ROOT / "generator" / "entry.schema.json").read_text())
    assert committed == json_schema(), "run: faildex schema -o generator/entry.schema.json"


def test_an_answer_that_repeats_another_section(checkout):
    """Questions hold what no other section says: an answer copied from the root cause fails."""
    qa = ("  - ask: Why does every node exit after ten minutes?\n"
          "    asked_at: https://github.com/pytorch/pytorch/issues/1\n"
          "    answer: >\n"
          "      Each waiting agent raises RendezvousTimeoutError from next_rendezvous() and\n"
          "      exits before starting a single worker process.\n"
          "    reference: https://github.com/pytorch/pytorch/blob/main/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py\n")
    edit(checkout, "questions:\n", "questions:\n" + qa)
    got = problems(checkout)
    line = line_of(checkout, "    answer: >\n      Each waiting agent")
    assert any(g.startswith(f"{REL}:{line}:") and " FDX034 the answer repeats root_cause " in g
               for g in got), got
    # the same question answered with a fact the entry does not state passes
    edit(checkout, "      Each waiting agent raises RendezvousTimeoutError from next_rendezvous() and\n"
                   "      exits before starting a single worker process.\n",
         "      Agents that reach the deadline stop; the launch configuration decides nothing else.\n")
    assert not [g for g in problems(checkout) if " FDX034 " in g]


def test_a_system_name_split_by_a_comma(checkout):
    edit(checkout, "systems: [torchrun, TorchElastic, c10d rendezvous]",
         "systems: [torchrun, IOMMU (VT-d, AMD-Vi)]")
    got = problems(checkout)
    line = line_of(checkout, "systems: [torchrun, IOMMU")
    assert any(g.startswith(f"{REL}:{line}:") and " FDX035 system name 'IOMMU (VT-d' has unbalanced" in g
               for g in got), got


def _catalog(checkout, body: str) -> None:
    """A one-template catalogue. Its messages are made up: these tests are about the
    checks' mechanics (mapping, matching, positions), not about what software prints."""
    (checkout / "catalog").mkdir(exist_ok=True)
    (checkout / "catalog" / "x.yaml").write_text(
        "project: x\nreleases: [{release: '1', mined_from: test}]\ntemplates:\n" + body, encoding="utf-8")


def test_catalog_template_mapped_to_an_entry_its_signatures_miss(checkout):
    _catalog(checkout, "  - message: 'Disk quota exceeded on {path}'\n    level: error\n    style: python-raise\n"
                       "    where: a.py:3\n    releases: '1'\n    entry: torchrun-rendezvous-timeout\n")
    _, problems = validate(checkout)
    assert [(p.file, p.line, p.code) for p in problems] == [("catalog/x.yaml", 4, "FDX040")]


def test_catalog_template_mapped_to_an_entry_its_signatures_match(checkout):
    _catalog(checkout, "  - message: 'The node {node} has failed to join the rendezvous'\n    level: error\n"
                       "    style: python-raise\n    raises: RendezvousTimeoutError\n    where: a.py:3\n"
                       "    releases: '1'\n    entry: torchrun-rendezvous-timeout\n")
    _, problems = validate(checkout)
    assert [p.code for p in problems] == []


def test_catalog_naming_an_unknown_entry_or_broken(checkout):
    _catalog(checkout, "  - message: 'x {y} z'\n    level: error\n    style: python-raise\n    where: a.py:3\n"
                       "    releases: '1'\n    collateral: [torchrun-rendezvous-timeot]\n")
    _, problems = validate(checkout)
    assert [(p.line, p.code) for p in problems] == [(4, "FDX041")]
    assert "did you mean 'torchrun-rendezvous-timeout'" in problems[0].message
    _catalog(checkout, "  - message: 'x'\n    level: error\n")
    _, problems = validate(checkout)
    assert [(p.file, p.line, p.code) for p in problems] == [("catalog/x.yaml", 4, "FDX041")]


# ---------------------------------------------------------------- every code, a failing fixture

def test_a_context_signature_on_most_healthy_lines(checkout):
    # FDX036: "NCCL INFO" is on more than half the lines of the healthy NCCL logs
    edit(checkout, "signatures:\n", "signatures:\n  - id: any-nccl-info\n    regex: 'NCCL INFO'\n"
                                     "    strength: context\n    source: test\n")
    got = problems(checkout)
    line = line_of(checkout, "    regex: 'NCCL INFO'")
    assert any(p.startswith(f"{REL}:{line}:") and " FDX036 " in p for p in got), got


def test_an_entry_file_with_the_wrong_extension(checkout):
    # FDX030: entries are .yaml files; a .yml one is named, not skipped silently
    src = checkout / "entries" / "rendezvous" / MODEL.name
    (checkout / "entries" / "rendezvous" / "stray-entry.yml").write_text(src.read_text())
    got = problems(checkout)
    assert any(p.startswith("entries/rendezvous/stray-entry.yml:1:") and " FDX030 " in p for p in got), got


def test_every_code_is_registered_and_every_active_one_has_a_fixture():
    import generator.validate as V
    here = Path(__file__).read_text()
    emitted = set()
    for f in (ROOT / "generator").glob("*.py"):
        emitted |= set(re.findall(r'"(FDX\d{3})"', f.read_text()))
    # every code a check or the loader reports is documented in the registry
    assert emitted <= set(V.CODES) | set(V.RESERVED), emitted - set(V.CODES)
    untested = sorted(c for c in V.CODES if c not in V.RESERVED and c not in here)
    assert not untested, f"no failing fixture names {untested}"


def test_a_page_that_states_a_registered_fact_differently(checkout):
    # FDX042: facts.yaml says join_timeout defaults to 600 s; a page saying 900 s is refused
    edit(checkout, "here: the configured join_timeout (600 s by default)",
         "here: the configured join_timeout (900 s by default)")
    got = problems(checkout)
    line = line_of(checkout, "here: the configured join_timeout (900 s")
    assert any(p.startswith(f"{REL}:{line}:") and " FDX042 " in p and "c10d-rendezvous-join-timeout" in p
               for p in got), got


def test_a_broken_facts_file_is_named(checkout):
    (checkout / "facts.yaml").write_text("- id: x\n  fact: y\n  source: https://example.org\n"
                                         "  said_wrongly_as: z\n  stated_wrongly: ['(unclosed']\n")
    got = problems(checkout)
    assert any(p.startswith("facts.yaml:1:") and " FDX042 " in p and "bad pattern" in p for p in got), got


def test_each_fact_catches_its_wrong_statement_and_not_itself():
    from generator.validate import Context
    ctx = Context.__new__(Context)
    ctx.root = ROOT
    facts, problems = Context.settled.func(ctx)
    assert facts and not problems
    for fact, patterns in facts:
        assert any(p.search(fact["said_wrongly_as"]) for p in patterns), fact["id"]
        assert not any(p.search(fact["fact"]) for p in patterns), fact["id"]


def test_a_passed_validation_is_remembered_only_for_the_same_files(tmp_path):
    # make check runs `faildex validate` and then the tests; the tests' fixture skips a
    # second validation only when these very files passed (generator.validate.passed_before)
    from generator.validate import passed_before, remember_passed
    for folder in ("entries/x", "generator", "pyodide_app/faildex", "catalog"):
        (tmp_path / folder).mkdir(parents=True)
    entry, cat = tmp_path / "entries/x/a.yaml", tmp_path / "catalog/nccl.yaml"
    entry.write_text("id: a\n", encoding="utf-8")
    cat.write_text("project: nccl\n", encoding="utf-8")
    assert not passed_before(tmp_path)
    remember_passed(tmp_path)
    assert passed_before(tmp_path)
    cat.write_text("project: nccl\ntemplates: []\n", encoding="utf-8")
    assert not passed_before(tmp_path)           # the catalogue is part of what passed
    remember_passed(tmp_path)
    entry.write_text("id: a\ntitle: b\n", encoding="utf-8")
    assert not passed_before(tmp_path)


def test_the_contributing_walkthrough_adds_an_entry(checkout):
    # CONTRIBUTING's "a new entry" block, command by command, in a checkout without the
    # entry; the comment line is the author's writing, done by copying the finished file
    from sitekit import contributing_block
    block = contributing_block("tests/test_validate.py", "a new entry")
    target = checkout / "entries" / "rendezvous" / MODEL.name
    target.unlink()
    shutil.copytree(ROOT / "generator", checkout / "generator")   # a checkout has its tools
    faildex = str(Path(sys.executable).parent / "faildex")
    env = {"FAILDEX_ROOT": str(checkout), "PATH": "/usr/bin:/bin"}
    results = []
    for line in block.splitlines():
        if line.startswith("#"):
            from ruamel.yaml import YAML
            target.write_text(MODEL.read_text(encoding="utf-8"), encoding="utf-8")
            example = YAML(typ="safe").load(MODEL.read_text(encoding="utf-8"))["examples"][0]["log"]
            (checkout / "my.log").write_text(example, encoding="utf-8")
            continue
        cmd = line.split("#")[0].split()
        assert cmd[0] == "faildex", line
        results.append(subprocess.run([faildex, *cmd[1:]], cwd=checkout, env=env, capture_output=True, text=True))
    new, todo, done, diagnosed = results
    assert new.returncode == 0 and target.is_file(), new.stderr
    assert todo.returncode == 1 and f"{REL}:" in todo.stdout and "FDX020" in todo.stdout, todo.stdout
    assert "FDX033" in todo.stdout        # look-alikes that link to it wait for a link back
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in diagnosed.stderr
    assert diagnosed.returncode != 2 and MODEL.stem in diagnosed.stdout.split("\n\n")[0], diagnosed.stdout


def test_the_site_benchmarks_synthetic_entries_validate(tmp_path):
    """bench/site.py builds the site from synthetic entries; a validator rule they break
    (FDX039 did, unnoticed) makes the benchmark measure nothing but a refused build."""
    sys.path.insert(0, str(ROOT))
    from bench.site import make_checkout
    root = make_checkout(tmp_path / "checkout", 12)
    _, probs = validate(root)
    assert probs == [], [str(p) for p in probs[:5]]


TRICKY_YAML = ["a: yes\n", "a: on\n", "a: No\n", "a: 010\n", "a: 0o10\n", "a: 1:20\n", "a: 2026-12-06\n",
               "a: ~\n", "a: null\n", "a:\n", "a: !!str 5\n", "a: !!bool yes\n", "a: 1e3\n", "a: 0x1F\n",
               "a: .inf\n", "a: True\n", "a: 'yes'\n", "a: \"1:20\"\n", "a: |\n  block\n  text\n",
               "a: >-\n  folded\n", "true: x\n", "1: x\n", "a: &x [1]\nb: *x\n", "a: 1\n---\nb: 2\n",
               "a: b\na: c\n", "? [a]\n: b\n", "a: !local x\n", "a: [x, {b: c}]\n", "- a\n- b: 1\n",
               "a:\n  - b\n  -\n    c: d\n", "a: 'it''s'\n", "a: \"\\t\\u00e9\"\n", "a: {b: [c, d], e: f}\n"]


def test_fast_yaml_reading_equals_ruamel():
    """libyaml reads the entries (generator.loader._read_fast, the site build's largest
    cost with ruamel); whatever it returns must be what ruamel's round-trip load gives,
    data, value positions and key positions, and anything else falls back to ruamel."""
    from generator import loader
    if not loader._C_SCAN:
        pytest.skip("PyYAML without libyaml: the fast reading is off")

    def slow(text):
        loader._C_SCAN = False
        try:
            return loader.read_yaml_text(text, "x.yaml")
        finally:
            loader._C_SCAN = True

    texts = [p.read_text(encoding="utf-8") for p in loader.entry_files(ROOT / "entries")]
    read = 0
    for text in texts + TRICKY_YAML:
        fast = loader._read_fast(text)
        if fast is None:
            continue
        read += 1
        data, positions, key_positions, problems = slow(text)
        assert not problems, text
        assert (fast[0], fast[1], fast[2]) == (data, positions, key_positions), text
        assert repr(fast[0]) == repr(data), text          # the same types, not only equal values
    assert read >= len(texts)       # every real entry is read the fast way
    for text in ("a: 010\n", "a: 1e3\n", "a: b\na: c\n", "a: &x [1]\nb: *x\n", "a: !!bool yes\n", "a:\n",
                 "a: é€漢字 text\nb: !!bool yes\n"):
        assert loader._read_fast(text) is None, text      # numbers, duplicates, aliases, tags: ruamel


def test_regex_walkers_leave_the_shared_parse_tree_unchanged():
    """regexes.parse is cached (the site build walks each signature several times), so a
    walker that changed the tree would change every later walker's answer."""
    from generator import regexes as R
    from generator.loader import entry_files, read_yaml_text
    patterns = {sig["regex"] for p in entry_files(ROOT / "entries")
                for sig in (read_yaml_text(p.read_text(encoding="utf-8"), p.name)[0].get("signatures") or [])}
    assert len(patterns) > 500
    R.parse.cache_clear()
    for pattern in sorted(patterns):
        for walker in (R.required_literals, R.branch_options, R.backtracking_risks, R.readable, R.literal_runs):
            walker(pattern)
        assert repr(R.parse(pattern)) == repr(R.parse.__wrapped__(pattern)), pattern
        assert R.parse(pattern).groupnames == R.parse.__wrapped__(pattern).groupnames, pattern
