"""The validator: every check is a small function with a stable code.

Each check yields Problems (`file:line:col: FDXnnn message`). `validate()`
runs them all and returns every problem at once, sorted. To add a check, write
a function, give it the next free code in CODES, list it in CHECKS, and add a
failing fixture test in tests/test_validate.py.

The codes are CODES below: permanent, each with its line of documentation (the
Contributing page's table is made from it); tests/test_validate.py holds a failing fixture
for every code that is not RESERVED.
"""
from __future__ import annotations

import datetime
import re
from functools import cached_property
from pathlib import Path
from typing import Callable, Iterable, Iterator

from . import catalog as catalogue
from . import schema as S
from .healthy import HealthyCorpus, engine_module
from .loader import PARALLEL_FROM, Entry, Problem, load_all, load_all_parallel, source_digest
from .regexes import MIN_ANCHOR, anchor_size, backtracking_risks, required_literals
from .text import log_lines

# Every code the validator and the loader report. A code is never renumbered or given to
# another check; a retired code stays in RESERVED.
CODES: dict[str, str] = {
    "FDX001": "YAML syntax error",
    "FDX002": "unknown key",
    "FDX003": "missing required field",
    "FDX004": "wrong type",
    "FDX005": "value not allowed",
    "FDX006": "value has the wrong form",
    "FDX007": "text too long",
    "FDX008": "needs exactly one of",
    "FDX010": "id differs from file name",
    "FDX011": "category differs from folder",
    "FDX012": "duplicate id",
    "FDX013": "link to an unknown entry",
    "FDX014": "regex does not compile",
    "FDX015": "reference URL not http(s)",
    "FDX016": "signature matches healthy output",
    "FDX017": "signature has no literal anchor",
    "FDX018": "regex may backtrack catastrophically",
    "FDX019": "example matched by no signature of its entry",
    "FDX020": "signature matches no example or mapped template",
    "FDX021": "duplicate YAML key",
    "FDX022": "YAML alias",
    "FDX023": "file too large",
    "FDX024": "not UTF-8 / unreadable",
    "FDX025": "example file missing",
    "FDX026": "duplicate signature id in an entry",
    "FDX027": "discriminator fact/pattern inconsistent",
    "FDX028": "an entry links to itself",
    "FDX029": "file is not a mapping",
    "FDX030": "wrong file extension",
    "FDX031": "case-insensitive signature",
    "FDX032": "version range is empty",
    "FDX033": "look-alike not linked back",
    "FDX034": "answer repeats another section",
    "FDX035": "system name with unbalanced brackets",
    "FDX036": "context signature on most healthy lines",
    "FDX037": "discriminator fact nothing extracts",
    "FDX038": "reference listed twice",
    "FDX039": "signature matches no catalogue template, cites no report",
    "FDX040": "catalogue template not matched by its entry's signatures",
    "FDX041": "catalogue file invalid or names an unknown entry",
    "FDX042": "entry states a registered fact (facts.yaml) differently, or facts.yaml is invalid",
    "FDX043": "checked on a day that has not come yet",
    "FDX044": "fix step names a signature the entry does not have",
}
# codes that no check reports (yet): said here so that nobody reuses them
RESERVED: dict[str, str] = {
    "FDX009": "retired before the codes were frozen; never reused",
}

Check = Callable[[Entry, "Context"], Iterator[Problem]]
# facts the engine reads from any log line (versions, launcher, sizes)
CONTEXT_FACTS = frozenset(f for f, _, _ in engine_module("context").PATTERNS)


class Context:
    """What checks need beyond one entry: all ids, and healthy training output."""

    def __init__(self, root: Path, entries: list[Entry], healthy: HealthyCorpus):
        self.root = root
        self.entries = entries
        self.ids = {e.id for e in entries}
        self.healthy = healthy   # entries/healthy/: real output of runs that did not fail
        # every fact the engine can know: named groups of all signatures, context facts
        self.facts = set(CONTEXT_FACTS)
        for e in entries:
            for _, sig in _signatures(e):
                try:
                    self.facts |= set(re.compile(sig["regex"]).groupindex)
                except (re.error, TypeError):
                    pass


    @cached_property
    def catalog(self) -> tuple[list, list[Problem]]:
        """The message catalogue (catalog/*.yaml) and the problems of reading it."""
        templates, problems = [], []
        for path in sorted((self.root / "catalog").glob("*.yaml")):
            try:
                templates += catalogue.load_project(path, root=self.root).templates.values()
            except catalogue.CatalogError as err:
                problems.append(Problem(err.file, err.line, 1, "FDX041", err.message))
        return templates, problems

    @cached_property
    def settled(self) -> tuple[list[tuple[dict, list[re.Pattern]]], list[Problem]]:
        """The facts of facts.yaml with their compiled `stated_wrongly` patterns, and the
        problems of reading it (a missing file: no facts)."""
        path = self.root / "facts.yaml"
        if not path.is_file():
            return [], []
        from ruamel.yaml import YAML, YAMLError
        try:
            items = YAML(typ="safe").load(path.read_text(encoding="utf-8")) or []
        except YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            return [], [Problem("facts.yaml", (mark.line + 1) if mark else 1, 1, "FDX042", f"not valid YAML: {err}")]
        facts, problems = [], []
        for n, item in enumerate(items if isinstance(items, list) else [None], 1):
            if not (isinstance(item, dict) and {"id", "fact", "source", "stated_wrongly", "said_wrongly_as"} <= set(item)):
                problems.append(Problem("facts.yaml", 1, 1, "FDX042",
                                        f"item {n}: needs id, fact, source, stated_wrongly and said_wrongly_as"))
                continue
            try:
                facts.append((item, [re.compile(p) for p in item["stated_wrongly"]]))
            except (re.error, TypeError) as err:
                problems.append(Problem("facts.yaml", 1, 1, "FDX042", f"fact {item['id']!r}: bad pattern: {err}"))
        return facts, problems

    @cached_property
    def rendered(self) -> "catalogue.Rendered":
        """Every template rendered with typical and probe values (catalog.Rendered)."""
        return catalogue.Rendered(self.catalog[0])


# ---------------------------------------------------------------- structure

def _type_name(value) -> str:
    if isinstance(value, datetime.date):
        return "a date"
    return {dict: "a mapping", list: "a list", str: "text", bool: "true/false",
            int: "a number", float: "a number", type(None): "empty"}.get(type(value), type(value).__name__)


def _walk(entry: Entry, spec, value, path: tuple) -> Iterator[Problem]:
    where = ".".join(str(p) for p in path) or "entry"
    if isinstance(spec, S.Obj):
        if not isinstance(value, dict):
            yield entry.problem(path, "FDX004", f"{where} must be a mapping, found {_type_name(value)}")
            return
        known = {f.name for f in spec.fields}
        for key in value:
            if key not in known:
                near = _closest(str(key), known)
                hint = f" (did you mean {near!r}?)" if near else f"; allowed: {', '.join(sorted(known))}"
                yield entry.problem(path + (key,), "FDX002", f"unknown key {key!r} in {where}{hint}",
                                    at_key=True)
        for f in spec.fields:
            if f.name in value:
                yield from _walk(entry, f.type, value[f.name], path + (f.name,))
            elif f.required:
                yield entry.problem(path, "FDX003",
                                    f"missing required field {f.name!r} in {where}: {f.doc}",
                                    at_key=bool(path))
        if spec.one_of_required:
            present = [k for k in spec.one_of_required if k in value]
            if len(present) != 1:
                yield entry.problem(path, "FDX008",
                                    f"{where} needs exactly one of {' or '.join(spec.one_of_required)}"
                                    f" (found {len(present)})")
    elif isinstance(spec, S.List):
        if not isinstance(value, list):
            yield entry.problem(path, "FDX004", f"{where} must be a list, found {_type_name(value)}")
            return
        if len(value) < spec.min_items:
            yield entry.problem(path, "FDX003",
                                f"{where} needs at least {spec.min_items} item(s), found {len(value)}")
        if spec.unique:
            seen = set()
            for i, item in enumerate(value):
                if isinstance(item, str) and item in seen:
                    yield entry.problem(path + (i,), "FDX006", f"{where} lists {item!r} twice")
                seen.add(item if isinstance(item, str) else id(item))
        for i, item in enumerate(value):
            yield from _walk(entry, spec.item, item, path + (i,))
    elif isinstance(spec, (S.Str, S.EntryRef)):
        if not isinstance(value, str):
            yield entry.problem(path, "FDX004", f"{where} must be text, found {_type_name(value)}"
                                + (" (quote it)" if isinstance(value, (int, float, bool, datetime.date)) else ""))
            return
        if not value.strip():
            yield entry.problem(path, "FDX003", f"{where} is empty")
            return
        if isinstance(spec, S.EntryRef):
            if not re.match(S.KEBAB, value):
                yield entry.problem(path, "FDX006", f"{where}: {value!r} is not an entry id (kebab-case)")
            return
        if spec.enum and value not in spec.enum:
            yield entry.problem(path, "FDX005",
                                f"{where}: {value!r} is not one of {', '.join(spec.enum)}")
        if spec.pattern and not re.match(spec.pattern, value):
            yield entry.problem(path, "FDX006", f"{where}: {value!r} does not match {spec.pattern}")
        if spec.max_len and len(value) > spec.max_len:
            yield entry.problem(path, "FDX007",
                                f"{where} is {len(value)} characters; keep it under {spec.max_len}")
        if spec.format == "uri" and not re.match(r"^https?://[^\s/]+\.[^\s]+$", value):
            yield entry.problem(path, "FDX015", f"{where}: {value!r} is not an http(s) URL")
        if spec.format == "regex":
            try:
                re.compile(value)
            except re.error as err:
                yield entry.problem(path, "FDX014", f"{where}: regex does not compile: {err}")
    elif isinstance(spec, S.Bool):
        if not isinstance(value, bool):
            yield entry.problem(path, "FDX004", f"{where} must be true or false")


def _closest(word: str, options: Iterable[str]) -> str | None:
    import difflib
    got = difflib.get_close_matches(word, list(options), n=1, cutoff=0.75)
    return got[0] if got else None


def check_structure(entry: Entry, ctx: Context) -> Iterator[Problem]:
    yield from _walk(entry, S.ENTRY, entry.data, ())


# ---------------------------------------------------------------- identity

def check_id_matches_file(entry: Entry, ctx: Context) -> Iterator[Problem]:
    eid = entry.data.get("id")
    if isinstance(eid, str) and eid != entry.path.stem:
        yield entry.problem(("id",), "FDX010",
                            f"id {eid!r} differs from the file name {entry.path.name!r}: "
                            f"rename the file or fix the id (ids are permanent)")


def check_category_matches_folder(entry: Entry, ctx: Context) -> Iterator[Problem]:
    cat = entry.data.get("category")
    folder = entry.path.parent.name
    if isinstance(cat, str) and cat != folder:
        yield entry.problem(("category",), "FDX011",
                            f"category {cat!r} differs from the folder entries/{folder}/: "
                            f"move the file or fix the category")


def check_self_links(entry: Entry, ctx: Context) -> Iterator[Problem]:
    for path, target in _links(entry):
        if target == entry.id:
            yield entry.problem(path, "FDX028", f"{'.'.join(map(str, path))} links the entry to itself")


def _links(entry: Entry) -> Iterator[tuple[tuple, str]]:
    d = entry.data
    for i, r in enumerate(d.get("related") or []):
        if isinstance(r, str):
            yield ("related", i), r
    for i, n in enumerate(d.get("not_this") or []):
        if isinstance(n, dict) and isinstance(n.get("entry"), str):
            yield ("not_this", i, "entry"), n["entry"]
    for i, dis in enumerate(d.get("discriminators") or []):
        if isinstance(dis, dict) and isinstance(dis.get("elsewhere"), dict):
            target = dis["elsewhere"].get("entry")
            if isinstance(target, str):
                yield ("discriminators", i, "elsewhere", "entry"), target
    for i, ex in enumerate(d.get("examples") or []):
        if isinstance(ex, dict) and isinstance(ex.get("expect"), str) and ex["expect"] != "none":
            yield ("examples", i, "expect"), ex["expect"]
    for i, r in enumerate(d.get("refines") or []):
        if isinstance(r, str):
            yield ("refines", i), r


def check_links_exist(entry: Entry, ctx: Context) -> Iterator[Problem]:
    for path, target in _links(entry):
        if target not in ctx.ids and re.match(S.KEBAB, target):
            near = _closest(target, ctx.ids)
            hint = f" (did you mean {near!r}?)" if near else ""
            yield entry.problem(path, "FDX013", f"{'.'.join(map(str, path))}: no entry with id "
                                                f"{target!r}{hint}")


# ---------------------------------------------------------------- signatures

def _signatures(entry: Entry) -> Iterator[tuple[int, dict]]:
    for i, sig in enumerate(entry.data.get("signatures") or []):
        if isinstance(sig, dict) and isinstance(sig.get("regex"), str):
            try:
                re.compile(sig["regex"])
            except re.error:
                continue
            yield i, sig


def check_signature_ids_unique(entry: Entry, ctx: Context) -> Iterator[Problem]:
    seen = set()
    for i, sig in enumerate(entry.data.get("signatures") or []):
        sid = sig.get("id") if isinstance(sig, dict) else None
        if isinstance(sid, str):
            if sid in seen:
                yield entry.problem(("signatures", i, "id"), "FDX026", f"signature id {sid!r} is used twice")
            seen.add(sid)


def check_signature_anchor(entry: Entry, ctx: Context) -> Iterator[Problem]:
    for i, sig in _signatures(entry):
        if re.compile(sig["regex"]).flags & re.IGNORECASE:
            yield entry.problem(("signatures", i, "regex"), "FDX031",
                                "signatures are case-sensitive (the exact text printed): "
                                "remove (?i); list the real spellings as alternatives")
            continue
        lits = required_literals(sig["regex"])
        if not any(anchor_size(x) >= MIN_ANCHOR for x in lits):
            yield entry.problem(("signatures", i, "regex"), "FDX017",
                                f"every match must contain a literal of {MIN_ANCHOR}+ characters (UTF-8 bytes) "
                                f"(the scanner looks for it before running regexes); "
                                f"found only {lits or 'none'}")


def check_signature_backtracking(entry: Entry, ctx: Context) -> Iterator[Problem]:
    for i, sig in _signatures(entry):
        for reason in backtracking_risks(sig["regex"]):
            yield entry.problem(("signatures", i, "regex"), "FDX018",
                                f"signature {sig.get('id')!r} may backtrack catastrophically "
                                f"on hostile lines: {reason}")


def _compiled_with_literal(sig: dict):
    try:
        rx = re.compile(sig["regex"])
    except (re.error, TypeError):
        return None, ""
    lits = required_literals(sig["regex"])
    return rx, (lits[0] if lits else "")


def check_signature_not_in_healthy(entry: Entry, ctx: Context) -> Iterator[Problem]:
    """Lines are tried whole and with their launcher prefixes peeled off."""
    for i, sig in _signatures(entry):
        if sig.get("strength") not in ("defining", "supporting"):
            continue
        rx, literal = _compiled_with_literal(sig)
        if rx is None:
            continue
        for file, n, line in ctx.healthy.matches(rx, literal):
            yield entry.problem(("signatures", i, "regex"), "FDX016",
                                f"{sig.get('strength')} signature {sig.get('id')!r} matches healthy "
                                f"output {file}:{n}: {line.strip()[:120]!r}; make it specific to "
                                f"the failure, or use strength: context if it is only a source of facts")
            break


def check_context_signature_not_on_most_lines(entry: Entry, ctx: Context) -> Iterator[Problem]:
    """A context signature that matches most lines of a healthy log costs every scan a
    regex per line and says nothing about this run: narrow it to the line that states
    the fact."""
    for i, sig in _signatures(entry):
        if sig.get("strength") != "context":
            continue
        rx, literal = _compiled_with_literal(sig)
        if rx is None:
            continue
        per_file: dict[str, int] = {}
        for file, _, _ in ctx.healthy.matches(rx, literal):
            per_file[file] = per_file.get(file, 0) + 1
        for file, hits in sorted(per_file.items()):
            total = len(ctx.healthy.files[file])
            if total >= 50 and hits * 2 > total:
                yield entry.problem(("signatures", i, "regex"), "FDX036",
                                    f"context signature {sig.get('id')!r} matches {hits} of the {total} "
                                    f"lines of healthy log {file}: match only the line that states the fact")
                break


# ---------------------------------------------------------------- examples

def example_text(entry: Entry, ex: dict) -> str | None:
    if isinstance(ex.get("log"), str):
        return ex["log"]
    if isinstance(ex.get("file"), str):
        p = (entry.path.parent / ex["file"]).resolve()
        if p.is_file() and entry.path.parent.resolve() in p.parents:
            return p.read_text(encoding="utf-8", errors="replace")
    return None


def check_example_files(entry: Entry, ctx: Context) -> Iterator[Problem]:
    for i, ex in enumerate(entry.data.get("examples") or []):
        if isinstance(ex, dict) and isinstance(ex.get("file"), str) and example_text(entry, ex) is None:
            yield entry.problem(("examples", i, "file"), "FDX025",
                                f"example file {ex['file']!r} not found next to the entry")


def check_examples_match(entry: Entry, ctx: Context) -> Iterator[Problem]:
    """Examples are tests: each is matched by the entry, each defining regex by an example."""
    sigs = [(i, s, re.compile(s["regex"])) for i, s in _signatures(entry)]
    if not sigs:
        return
    texts = []
    for i, ex in enumerate(entry.data.get("examples") or []):
        if not isinstance(ex, dict):
            continue
        text = example_text(entry, ex)
        if text is None:
            continue
        lines = log_lines(text)
        texts.append(lines)
        own = ex.get("expect") in (None, entry.id)
        if own and not any(rx.search(ln) for _, s, rx in sigs
                           if s.get("strength") in ("defining", "supporting") for ln in lines):
            yield entry.problem(("examples", i), "FDX019",
                                "no defining or supporting signature of this entry matches any line "
                                "of this example: the example or the signatures are wrong")
    # a catalogue template mapped to this entry is an example as the software prints it
    mapped = [t for t in ctx.catalog[0] if t.entry == entry.id]
    rendered = catalogue.Rendered(mapped) if mapped else None
    for i, s, rx in sigs:
        if s.get("strength") in ("defining", "supporting") and \
                not any(rx.search(ln) for lines in texts for ln in lines) and \
                not (rendered and rendered.matches(rx)):
            yield entry.problem(("signatures", i, "regex"), "FDX020",
                                f"{s.get('strength')} signature {s.get('id')!r} matches no example and no "
                                f"catalogue template mapped here: add the real log that shows it")


# ---------------------------------------------------------------- discriminators, versions

def check_discriminator_facts(entry: Entry, ctx: Context) -> Iterator[Problem]:
    for i, dis in enumerate(entry.data.get("discriminators") or []):
        if not isinstance(dis, dict):
            continue
        named = [dis["fact"]] if isinstance(dis.get("fact"), str) else []
        if isinstance(dis.get("compare"), str):
            named += re.findall(r"[a-z][a-z0-9_]*", dis["compare"])[:1] + \
                re.findall(r"[a-z][a-z0-9_]*", dis["compare"])[-1:]
        for fact in named:
            if fact not in ctx.facts:
                yield entry.problem(("discriminators", i), "FDX037",
                                    f"fact {fact!r} is extracted by nothing: no signature has a named "
                                    f"group of that name and it is not a context fact "
                                    f"({', '.join(sorted(CONTEXT_FACTS)[:6])}, ...)")
        if ("fact" in dis) != ("here_pattern" in dis):
            yield entry.problem(("discriminators", i), "FDX027",
                                "`fact` and `here_pattern` go together: give both or neither")
        if "compare" in dis and "fact" in dis:
            yield entry.problem(("discriminators", i, "compare"), "FDX027",
                                "give either `compare` or `fact`/`here_pattern`, not both")


def check_fix_signatures(entry: Entry, ctx: Context) -> Iterator[Problem]:
    ids = {s.get("id") for s in entry.data.get("signatures") or [] if isinstance(s, dict)}
    for i, step in enumerate(entry.data.get("fix") or []):
        for j, sid in enumerate(step.get("for_signatures") or [] if isinstance(step, dict) else []):
            if sid not in ids:
                yield entry.problem(("fix", i, "for_signatures", j), "FDX044",
                                    f"{sid!r} is not a signature of this entry")


def _vkey(v: str) -> tuple:
    return tuple(int(x) for x in v.split("."))


def check_version_ranges(entry: Entry, ctx: Context) -> Iterator[Problem]:
    for i, a in enumerate(entry.data.get("affects") or []):
        if not isinstance(a, dict):
            continue
        lo, hi = a.get("introduced"), a.get("fixed")
        if isinstance(lo, str) and isinstance(hi, str) and re.match(S.VERSION, lo) and re.match(S.VERSION, hi):
            if _vkey(lo) >= _vkey(hi):
                yield entry.problem(("affects", i), "FDX032",
                                    f"introduced {lo} is not before fixed {hi}: the range is empty")


def check_checked_date(entry: Entry, ctx: Context) -> Iterator[Problem]:
    """A record of a check that has not happened yet is a typo, or a promise."""
    checked = entry.data.get("checked")
    day = checked.get("on") if isinstance(checked, dict) else None
    if isinstance(day, str) and re.match(S.DATE, day):   # else _walk reports its form
        try:
            when = datetime.date.fromisoformat(day)
        except ValueError:
            yield entry.problem(("checked", "on"), "FDX006", f"checked.on: {day!r} is not a day of the calendar")
            return
        if when > datetime.date.today():
            yield entry.problem(("checked", "on"), "FDX043", f"checked.on is {day}, after today")


def check_system_names(entry: Entry, ctx: Context) -> Iterator[Problem]:
    """A flow list splits at every comma: [IOMMU (VT-d, AMD-Vi)] is two broken names."""
    systems = entry.data.get("systems")
    for i, name in enumerate(systems if isinstance(systems, list) else []):
        if isinstance(name, str) and any(name.count(a) != name.count(b) for a, b in ("()", "[]")):
            yield entry.problem(("systems", i), "FDX035",
                                f"system name {name!r} has unbalanced brackets: a comma inside "
                                f"brackets split it; quote the whole name (\"IOMMU (VT-d, AMD-Vi)\")")


def check_references_unique(entry: Entry, ctx: Context) -> Iterator[Problem]:
    """One source, one reference: a URL listed twice under two titles reads as two sources."""
    refs = entry.data.get("references")
    seen: dict[str, int] = {}
    for i, ref in enumerate(refs if isinstance(refs, list) else []):
        url = ref.get("url") if isinstance(ref, dict) else None
        if not isinstance(url, str):
            continue
        key = url.rstrip("/")
        if key in seen:
            yield entry.problem(("references", i, "url"), "FDX038",
                                f"{url} is already reference {seen[key] + 1}: say both things in one title")
        else:
            seen[key] = i


_WORD = re.compile(r"[a-z0-9_]+")
REPEAT_WORDS = 8   # a run of this many words shared with another section is a repeat


def _runs(text: str, n: int = REPEAT_WORDS) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def _section_texts(data: dict) -> Iterator[tuple[str, str]]:
    """(field, text) of every prose value of an entry outside its questions."""
    def walk(value, where):
        if isinstance(value, str):
            yield where, value
        elif isinstance(value, list):
            for i, item in enumerate(value):
                yield from walk(item, f"{where}[{i}]")
        elif isinstance(value, dict):
            for k, v in value.items():
                yield from walk(v, f"{where}.{k}" if where else k)
    for key, value in data.items():
        if key not in ("questions", "examples", "signatures", "references"):
            yield from walk(value, key)


def check_answers_add_something(entry: Entry, ctx: Context) -> Iterator[Problem]:
    """A question's answer says what no other section says: it shares no run of
    REPEAT_WORDS words with another section's text."""
    questions = entry.data.get("questions")
    if not isinstance(questions, list):
        return
    others = [(where, _runs(text)) for where, text in _section_texts(entry.data)]
    for i, q in enumerate(questions):
        if not isinstance(q, dict) or not isinstance(q.get("answer"), str):
            continue
        mine = _runs(q["answer"])
        for where, runs in others:
            shared = mine & runs
            if shared:
                yield entry.problem(("questions", i, "answer"), "FDX034",
                                    f"the answer repeats {where} (\"{' '.join(sorted(shared)[0])}\"): "
                                    f"answer only what no other section says")
                break


def _prose(node, path=()) -> Iterator[tuple[tuple, str]]:
    """Every text of an entry a reader reads (not its signatures or log examples)."""
    if isinstance(node, dict):
        for k, v in node.items():
            if not path and k in ("signatures", "examples"):
                continue
            yield from _prose(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _prose(v, path + (i,))
    elif isinstance(node, str):
        yield path, node


def check_settled_facts(entry: Entry, ctx: Context) -> Iterator[Problem]:
    """A fact several pages state lives once, in facts.yaml; a page that says it
    differently (an old default, another backend's value) is refused."""
    facts, _ = ctx.settled
    for path, text in _prose(entry.data):
        flat = " ".join(text.split())
        for fact, patterns in facts:
            if any(p.search(flat) for p in patterns):
                yield entry.problem(path, "FDX042", f"says otherwise than fact {fact['id']!r} of facts.yaml: "
                                                    f"{fact['fact']} ({fact['source']})")


# a real report: a public thread or page (a URL), or a run reproduced on a named release
_REPORT = re.compile(r"https?://|\breproduced\b", re.I)


def check_signature_sourced(entry: Entry, ctx: Context) -> Iterator[Problem]:
    """A defining or supporting signature matches text the software prints: a catalogue
    template (mined from its source), or a real report its `source` cites."""
    for i, s in _signatures(entry):
        if s.get("strength") not in ("defining", "supporting") or _REPORT.search(str(s.get("source", ""))):
            continue
        try:
            rx = re.compile(s["regex"])
        except (re.error, TypeError, KeyError):
            continue   # FDX014 says so
        if not ctx.rendered.matches(rx, catalogue.longest_literal(rx.pattern), first=True):
            yield entry.problem(("signatures", i, "regex"), "FDX039",
                                f"{s.get('strength')} signature {s.get('id')!r} matches no catalogue template and its "
                                f"source cites no report: add the URL of a public report that shows the line, or "
                                f"mine the software that prints it into catalog/")


CHECKS: list[Check] = [
    check_structure,
    check_id_matches_file,
    check_category_matches_folder,
    check_self_links,
    check_links_exist,
    check_signature_ids_unique,
    check_signature_anchor,
    check_signature_backtracking,
    check_signature_not_in_healthy,
    check_context_signature_not_on_most_lines,
    check_example_files,
    check_examples_match,
    check_discriminator_facts,
    check_fix_signatures,
    check_version_ranges,
    check_checked_date,
    check_answers_add_something,
    check_system_names,
    check_references_unique,
    check_settled_facts,
    check_signature_sourced,
]


def check_duplicate_ids(entries: list[Entry]) -> Iterator[Problem]:
    first: dict[str, Entry] = {}
    for e in entries:
        eid = e.data.get("id")
        if not isinstance(eid, str):
            continue
        if eid in first:
            other = first[eid]
            yield e.problem(("id",), "FDX012", f"id {eid!r} is already used by {other.rel}; ids are unique")
        else:
            first[eid] = e


def check_lookalikes_link_back(entries: list[Entry]) -> Iterator[Problem]:
    """A discriminator A -> B needs B -> A (a discriminator or a not_this): a reader who
    lands on either page must learn how to tell the two apart."""
    by_id = {e.id: e for e in entries}

    def mentions(e: Entry) -> set:
        d = e.data
        out = {x["elsewhere"].get("entry") for x in d.get("discriminators") or []
               if isinstance(x, dict) and isinstance(x.get("elsewhere"), dict)}
        out |= {x.get("entry") for x in d.get("not_this") or [] if isinstance(x, dict)}
        return out

    for e in entries:
        for i, x in enumerate(e.data.get("discriminators") or []):
            if not (isinstance(x, dict) and isinstance(x.get("elsewhere"), dict)):
                continue
            other = by_id.get(x["elsewhere"].get("entry"))
            if other is not None and e.id not in mentions(other):
                yield e.problem(("discriminators", i, "elsewhere", "entry"), "FDX033",
                                f"{other.id} has no discriminator or not_this pointing back to "
                                f"{e.id}: add one to {other.rel} (look-alikes are linked both ways)")


def check_catalog(entries: list[Entry], ctx: Context) -> Iterator[Problem]:
    """The catalogue names only known entries, and a template mapped to an entry is
    matched by one of that entry's signatures (some rendering of it, as printed)."""
    templates, problems = ctx.catalog
    yield from problems
    by_id = {e.id: e for e in entries}
    mapped: dict[str, set[int]] = {}         # entry -> the templates mapped to it
    for i, t in enumerate(templates):
        if t.entry in by_id:
            mapped.setdefault(t.entry, set()).add(i)
    matched: dict[str, set[int]] = {}        # entry -> those of them its signatures match
    for eid, _, rx in catalogue.signature_table([by_id[i] for i in sorted(mapped)]):
        done = matched.setdefault(eid, set())
        done |= ctx.rendered.matches_among(rx, mapped[eid] - done)
    for i, t in enumerate(templates):
        file = f"catalog/{t.project}.yaml"
        for eid in t.ids:
            if eid not in by_id:
                near = _closest(eid, by_id)
                yield Problem(file, t.line, 1, "FDX041", f"unknown entry {eid!r}" +
                              (f" (did you mean {near!r}?)" if near else ""))
        if t.entry in by_id and i not in matched.get(t.entry, ()):
            yield Problem(file, t.line, 1, "FDX040",
                          f"{t.message[:80]!r} is mapped to {t.entry}, whose signatures do not match it: "
                          f"add a signature for it (or map it as collateral)")


def validate_entries(root: Path, entries: list[Entry]) -> list[Problem]:
    ctx = Context(root, entries, HealthyCorpus(root))
    problems = list(check_duplicate_ids(entries)) + list(check_lookalikes_link_back(entries))
    problems += list(check_catalog(entries, ctx)) + ctx.settled[1]
    for entry in entries:
        for check in CHECKS:
            problems.extend(check(entry, ctx))
    return problems


def load_and_validate(root: Path, jobs: int | None = None,
                      parallel_from: int = PARALLEL_FROM) -> tuple[list[Entry], list[Problem]]:
    """validate(root), with the entries read by a pool of processes (loader.load_all_parallel).
    Same entries, same problems: a test compares the two."""
    entries, problems = load_all_parallel(Path(root), jobs, parallel_from)
    problems += validate_entries(Path(root), entries)
    return entries, sorted(problems)


# What validation reads besides the index's sources (loader.source_digest): the
# catalogue and the registered facts.
VALIDATION_ALSO = ("catalog/*.yaml", "facts.yaml")


def _passed_marker(root: Path) -> Path:
    return Path(root) / ".cache" / f"validated-{source_digest(Path(root), VALIDATION_ALSO)}"


def passed_before(root: Path) -> bool:
    """Did these exact files (by size and time) validate without a problem before? The
    quick lane runs `faildex validate` and then the tests, which need valid entries."""
    return _passed_marker(root).is_file()


def remember_passed(root: Path) -> None:
    marker = _passed_marker(root)
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        for old in marker.parent.glob("validated-*"):
            old.unlink()
        marker.write_text("no problems\n", encoding="utf-8")
    except OSError:
        pass        # a read-only checkout validates every time


def validate(root: Path) -> tuple[list[Entry], list[Problem]]:
    """Load and check every entry under root/entries. Problems sorted by file and line."""
    entries, problems = load_all(root)
    problems += validate_entries(root, entries)
    return entries, sorted(problems)


def validate_once(root: Path) -> tuple[list[Entry], list[Problem]]:
    """validate(root), or only the entries read when these very files passed before
    (`faildex validate` just ran: the quick lane's tests and index build need no second pass)."""
    if passed_before(root):
        return load_all_parallel(Path(root))
    entries, problems = load_and_validate(root)
    if not problems:
        remember_passed(root)
    return entries, problems
