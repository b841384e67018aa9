"""The site: every entry becomes pages of a mkdocs-material site.

    entries/**.yaml --validate--> EntryView (cross-links resolved both ways)
                    --Jinja2 (site_template/pages/*.j2)--> Markdown pages + data files

Nothing half-built is published: the entries are validated first, and any
problem (all of them, as `file:line:col: CODE message`) stops the build before
a page is rendered. The pages are handed to mkdocs as virtual files by
generator/mkdocs_hooks.py; `python -m generator.site --out DIR` writes the same
files to DIR to read or diff them.

Entry text comes from strangers' pull requests, so it never goes through
Markdown: every value is HTML-escaped (Jinja2 autoescape) inside HTML blocks
that are set aside while Markdown runs and put back afterwards (OutFile.blocks),
and `backticks` are the only markup recognised in prose. The Markdown itself
carries only the fixed headings, so the table of contents and the anchors are
the same on every entry page.

Build steps (STEPS) each add pages or files to a SiteBuild; the mkdocs hook
runs them in order and more can be appended there.
"""
from __future__ import annotations

import argparse
import json
import os
import posixpath
import re
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Callable, Iterable
from urllib.parse import urlsplit

import jinja2
from markupsafe import Markup, escape

from . import schema as S
from . import validate
from .loader import Entry, Problem
from .healthy import engine_module
from .regexes import readable
from .text import clean, log_lines
from .urls import page_url, relative_url

REPO = Path(__file__).resolve().parent.parent
TEMPLATE_DIR = REPO / "site_template"
REPO_URL = "https://github.com/faildex/faildex"
BRANCH = "main"
API_FORMAT = 1

EXAMPLE_MAX_LINES = 400       # longer example files are cut on the page (linked in full)
LINE_MAX_CHARS = 1000
SHOWN_TEXT_MAX = 240          # an error line shown in "What you will see" / the error index

SOFTWARE_NAMES = engine_module("context").SOFTWARE_NAME     # the engine's one software table
SEVERITY_RANK = {s: i for i, s in enumerate(reversed(S.SEVERITIES))}  # critical first

class SiteError(Exception):
    """The entries did not validate; nothing was rendered."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        files = len({p.file for p in problems})
        super().__init__(f"faildex: {len(problems)} problem(s) in {files} entry file(s); "
                         f"the site was not built (run `faildex validate`)")

    def report(self) -> str:
        return "\n".join(str(p) for p in self.problems)


# ---------------------------------------------------------------- text helpers

_TICK = re.compile(r"`([^`\n]+)`")
_ABBREV = re.compile(r"\b(?:e\.g|i\.e|vs|etc|cf|approx|incl)\.$")


def inline(text) -> Markup:
    """One line of prose as HTML: escaped, `code` spans recognised, whitespace collapsed."""
    text = " ".join(clean(text).split())
    out, pos = [], 0
    for m in _TICK.finditer(text):
        out.append(str(escape(text[pos:m.start()])))
        out.append(f"<code>{escape(m.group(1))}</code>")
        pos = m.end()
    out.append(str(escape(text[pos:])))
    return Markup("".join(out))


def prose(text) -> Markup:
    """Prose as HTML paragraphs (a blank line separates paragraphs)."""
    paras = [p for p in re.split(r"\n[ \t]*\n", clean(text).strip()) if p.strip()]
    return Markup("\n".join(f"<p>{inline(p)}</p>" for p in paras))


@jinja2.pass_eval_context
def finalize(eval_ctx, value):
    """Every {{ value }} in a page template: HTML-escaped, and backticks too, so that a
    line of entry text could not open a Markdown code fence even if it reached
    Markdown. Plain-text templates (llms.txt) turn autoescape off."""
    if value is None:
        return ""
    if isinstance(value, Markup) or not eval_ctx.autoescape:
        return value
    return Markup(str(escape(value)).replace("`", "&#96;"))


def code_text(text) -> str:
    """A command or log for a <pre> block: no colour codes, no final newline."""
    return clean(text).rstrip("\n")


def front(text) -> Markup:
    """A front-matter value: HTML-escaped (themes print page titles unescaped), JSON-quoted."""
    return Markup(json.dumps(str(escape(" ".join(clean(text).split())))))


def first_sentence(text) -> str:
    """The first sentence of prose (abbreviations such as e.g. do not end it)."""
    text = " ".join(clean(text).split())
    for m in re.finditer(r"[.!?](?=\s+[A-Z0-9`\"'(])", text):
        if not _ABBREV.search(text[max(0, m.end() - 8):m.end()]):
            return text[:m.end()]
    return text


def slug(text: str) -> str:
    """A URL-safe name: "g++" -> "g-plus-plus", not "g" (which any "g" would share)."""
    s = re.sub(r"[^a-z0-9]+", "-", text.lower().replace("+", " plus ")).strip("-")
    return s or "x"


def is_http_url(value) -> bool:
    return isinstance(value, str) and re.match(r"^https?://[^\s/]+\.[^\s]+$", value) is not None


def url_host(url: str) -> str:
    return urlsplit(url).netloc


# ---------------------------------------------------------------- the data

@dataclass
class Shown:
    """How a signature is shown: the line it matches in an example (and the part of it
    that matched), or the pattern written out as text."""
    id: str
    regex: str
    strength: str
    text: str
    match: str
    from_example: bool

    @property
    def message(self) -> str:
        """The general message: the pattern written out, never one example's text."""
        return readable(self.regex) or self.regex


@dataclass
class System:
    slug: str
    name: str
    entries: list

    @property
    def uri(self) -> str:
        return f"systems/{self.slug}.md"


class EntryView:
    """One validated entry plus what the pages need: URLs, shown texts, links both ways."""

    def __init__(self, entry: Entry):
        d = entry.data
        self.entry = entry
        self.d = d
        self.id: str = d["id"]
        self.title: str = d["title"]
        self.category: str = d["category"]
        self.severity: str = d["severity"]
        self.source = "entries/" + Path(entry.rel).as_posix().split("entries/", 1)[-1]
        self.uri = f"entries/{self.id}.md"
        self.category_uri = f"categories/{self.category}.md"
        self.category_title = S.CATEGORIES[self.category][0]
        self.summary = first_sentence(d["quick_answer"])
        general = [f for f in d["fix"] if not f.get("only_for")]
        # the first move that holds for every form of the failure (a fix step, else a check)
        self.first_move = general[0]["do"] if general else d["confirm"][0]["do"]
        self.examples = [self._example(ex) for ex in d.get("examples") or []]
        lines = [ln for ex in self.examples for ln in ex["all_lines"]]
        self.signatures = [self._shown(sig, lines) for sig in d["signatures"]]
        self.systems: list[System] = []
        self.related: list[EntryView] = []          # own list first, then those linking here
        self.related_out: list[str] = list(d.get("related") or [])
        self.related_in: list[str] = []
        self.lookalikes: list[tuple[EntryView, list[dict]]] = []
        self.not_this_views: list[EntryView] = []

    @property
    def checked(self) -> str:
        """'PyTorch 2.13 and NCCL 2.28, 2026-12-06', or '' when the entry was never re-checked."""
        c = self.d.get("checked")
        if not c:
            return ""
        names = list(c["against"])
        joined = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
        return f"{joined}, {c['on']}"

    @property
    def edit_url(self) -> str:
        return f"{REPO_URL}/edit/{BRANCH}/{self.source}"

    @property
    def blob_url(self) -> str:
        return f"{REPO_URL}/blob/{BRANCH}/{self.source}"

    @property
    def shown_signatures(self) -> list[Shown]:
        return [s for s in self.signatures if s.strength in ("defining", "supporting")]

    @property
    def defining(self) -> list[Shown]:
        return [s for s in self.signatures if s.strength == "defining"]

    @property
    def see(self) -> str:
        """What you see, for a symptom table: the general message of the first defining
        signature (or the first shown one)."""
        sigs = self.defining or self.shown_signatures or self.signatures
        return sigs[0].message

    @property
    def confused_with(self) -> list["EntryView"]:
        """The entries people take this one for: what-this-is-not first, then look-alikes."""
        seen = [o for o in (self.not_this_views + [o for o, _ in self.lookalikes])]
        return list(dict.fromkeys(seen))[:3]

    @property
    def sections(self) -> list[S.Section]:
        """The page's sections (generator/schema.py ENTRY_SECTIONS) this entry fills."""
        def filled(sec: S.Section) -> bool:
            if sec.anchor == "related":
                return bool(self.related)
            return not sec.optional or bool(self.d.get(sec.fields[0]))
        return [sec for sec in S.ENTRY_SECTIONS if filled(sec)]

    @property
    def ticket(self) -> dict:
        """What a support ticket for this failure needs: the line, the values the
        signatures read from it, the versions that decide, the checks' output."""
        # an entry of advisory lines only (context signatures) still shows what it prints
        sigs = self.defining or self.shown_signatures or self.signatures
        facts = list(dict.fromkeys(
            name for s in self.d["signatures"] if s["strength"] != "context"
            for name in re.compile(s["regex"]).groupindex))
        versions = [a["software"] for a in self.d.get("affects") or []]
        versions += [x["fact"][:-len("_version")] for x in self.d.get("discriminators") or []
                     if (x.get("fact") or "").endswith("_version")]
        versions = [v for v in dict.fromkeys(versions + ["pytorch"]) if v in SOFTWARE_NAMES]
        return {"message": sigs[0].message, "facts": facts, "versions": versions,
                "commands": [c["command"] for c in self.d["confirm"] if c.get("command")]}

    def _example(self, ex: dict) -> dict:
        text = validate.example_text(self.entry, ex) or ""
        lines = [clean(ln) for ln in log_lines(text.rstrip("\n"))]
        shown = [ln if len(ln) <= LINE_MAX_CHARS else ln[:LINE_MAX_CHARS] + " …" for ln in
                 lines[:EXAMPLE_MAX_LINES]]
        file_url = None
        if isinstance(ex.get("file"), str):
            file_url = f"{REPO_URL}/blob/{BRANCH}/{posixpath.dirname(self.source)}/{ex['file']}"
        return {
            "text": "\n".join(shown),
            "all_lines": lines,
            "lines": len(lines),
            "cut": len(lines) > EXAMPLE_MAX_LINES,
            "file": ex.get("file"),
            "file_url": file_url,
            "source": ex.get("source", ""),
            "source_is_url": is_http_url(ex.get("source")),
            "expect": ex.get("expect") if ex.get("expect") not in (None, self.id) else None,
        }

    @staticmethod
    def _shown(sig: dict, lines: list[str]) -> Shown:
        rx = re.compile(sig["regex"])
        hits = [(ln, m) for ln in lines if (m := rx.search(ln))]
        if hits:
            # A line that starts in column 0 is the message itself; indented ones are
            # usually traceback source lines (`raise XError`).
            ln, m = next(((ln, m) for ln, m in hits if not ln[:1].isspace()), hits[0])
            text = ln
            if len(text) > SHOWN_TEXT_MAX:
                start = max(0, m.start() - 40)
                text = ("… " if start else "") + text[start:start + SHOWN_TEXT_MAX].rstrip() + " …"
            match = m.group(0)
            if len(match) > SHOWN_TEXT_MAX:
                match = match[:SHOWN_TEXT_MAX].rstrip() + " …"
            return Shown(sig["id"], sig["regex"], sig["strength"], text, match or text, True)
        text = readable(sig["regex"]) or sig["regex"]
        return Shown(sig["id"], sig["regex"], sig["strength"], text, text, False)


def link_entries(views: list[EntryView]) -> None:
    """Resolve links between entries: related both ways, look-alikes, systems."""
    by_id = {v.id: v for v in views}
    for v in views:
        for other in v.related_out:
            if other in by_id and v.id not in by_id[other].related_in:
                by_id[other].related_in.append(v.id)
    for v in views:
        ids = list(dict.fromkeys(v.related_out + sorted(set(v.related_in) - set(v.related_out))))
        v.related = [by_id[i] for i in ids if i in by_id]
        groups: dict[str, list[dict]] = {}
        for dis in v.d.get("discriminators") or []:
            groups.setdefault(dis["elsewhere"]["entry"], []).append(dis)
        v.lookalikes = [(by_id[k], g) for k, g in groups.items() if k in by_id]
        v.not_this_views = [by_id[n["entry"]] for n in v.d.get("not_this") or [] if n["entry"] in by_id]


def collect_systems(views: list[EntryView]) -> list[System]:
    spellings: dict[str, Counter] = defaultdict(Counter)
    members: dict[str, list[EntryView]] = defaultdict(list)
    for v in views:
        for name in dict.fromkeys(v.d["systems"]):
            key = slug(name)
            spellings[key][name] += 1
            if v not in members[key]:
                members[key].append(v)
    systems = {k: System(k, spellings[k].most_common(1)[0][0], sorted(members[k], key=sort_key))
               for k in spellings}
    for v in views:
        v.systems = [systems[k] for k in dict.fromkeys(slug(n) for n in v.d["systems"])]
    return sorted(systems.values(), key=lambda s: s.name.lower())


def sort_key(v: EntryView):
    return (SEVERITY_RANK[v.severity], v.title.lower())


# ---------------------------------------------------------------- URLs

# ---------------------------------------------------------------- the build

BLOCK = re.compile(r"<!--fdx-block-(\d+)-->")


@dataclass
class OutFile:
    uri: str                        # path in the docs tree, e.g. entries/<id>.md
    content: str | bytes | None = None
    abs_src_path: str | None = None  # or: a file on disk, copied as it is
    in_nav: bool = False
    edit_url: str | None = None     # where "Edit this page" goes (None: no button)
    # HTML blocks of the page, set aside while Markdown runs (it would only parse them to
    # pass them through: most of its time on an entry page); content holds a
    # <!--fdx-block-N--> line in their place and the hook puts them back.
    blocks: list = field(default_factory=list)

    def fill(self, html: str) -> str:
        """html with its block placeholders replaced (each must be there exactly once)."""
        seen = []

        def put(m):
            seen.append(int(m.group(1)))
            return self.blocks[int(m.group(1))]

        out = BLOCK.sub(put, html)
        if sorted(seen) != list(range(len(self.blocks))):
            raise ValueError(f"{self.uri}: HTML block placeholders lost or repeated: {seen}")
        return out

    def markdown(self) -> str:
        """The page as self-contained Markdown (blocks in place)."""
        return self.fill(self.content) if self.blocks else self.content


class SiteBuild:
    """Everything one build knows: the validated entries, the pages made so far, the nav."""

    def __init__(self, root: Path, entries: list[Entry], *, template_dir: Path = TEMPLATE_DIR,
                 use_directory_urls: bool = True, site_url: str | None = None):
        self.root = Path(root)
        self.template_dir = Path(template_dir)
        self.use_directory_urls = use_directory_urls
        self.site_url = (site_url or "").rstrip("/") + "/" if site_url else None
        views = sorted((EntryView(e) for e in entries), key=sort_key)
        link_entries(views)
        self.entries: list[EntryView] = views
        self.by_id = {v.id: v for v in views}
        self.systems = collect_systems(views)
        self.categories = [(cat, title, desc, [v for v in views if v.category == cat])
                           for cat, (title, desc) in S.CATEGORIES.items()]
        self.categories = [c for c in self.categories if c[3]]
        self.files: dict[str, OutFile] = {}
        self.nav_extra: list = []    # (title, uri) pairs a later step wants in the nav
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(self.template_dir / "pages")),
            autoescape=True, finalize=finalize, trim_blocks=True,
            lstrip_blocks=True, keep_trailing_newline=True,
            auto_reload=False)   # one build, one environment: no stat of a template per include
        self.env.filters.update(prose=prose, inline=inline, code=code_text, front=front,
                                first_sentence=first_sentence, host=url_host)
        self.env.globals.update(sections=S.ENTRY_SECTIONS, software_names=SOFTWARE_NAMES,
                                is_http_url=is_http_url, repo_url=REPO_URL, branch=BRANCH,
                                api_format=API_FORMAT)

    @cached_property
    def catalogs(self) -> list:
        """The message catalogue of this checkout (catalog/*.yaml), read once per build."""
        from . import catalog
        return catalog.load_all(self.root)

    # -- adding output
    def add_text(self, uri: str, text: str, *, in_nav: bool = False, edit_url: str | None = None):
        self.files[uri] = OutFile(uri, content=text, in_nav=in_nav, edit_url=edit_url)

    def add_file(self, uri: str, path: str | Path):
        """Ship a file from disk as it is (e.g. a wheel or a vendored script)."""
        self.files[uri] = OutFile(uri, abs_src_path=str(Path(path).resolve()))

    def render(self, template: str, uri: str, *, in_nav: bool = False,
               edit_url: str | None = None, **ctx) -> str:
        here = page_url(uri, self.use_directory_urls)
        blocks: list[str] = []

        def url(target: str) -> str:
            return relative_url(page_url(target, self.use_directory_urls), here)

        def html(caller) -> Markup:
            """{% call html() %}...{% endcall %}: an HTML block Markdown must not touch."""
            blocks.append(str(caller()).strip("\n"))
            return Markup(f"\n<!--fdx-block-{len(blocks) - 1}-->\n\n")

        text = self.env.get_template(template).render(site=self, url=url, html=html, **ctx)
        self.add_text(uri, text, in_nav=in_nav, edit_url=edit_url)
        self.files[uri].blocks = blocks
        return text

    def absolute(self, uri: str) -> str:
        """A page's URL for other tools: absolute when the site URL is known."""
        path = page_url(uri, self.use_directory_urls)
        return (self.site_url + path) if self.site_url else "/" + path

    # -- navigation: a handful of pages, never one per entry (the site has thousands)
    def nav(self) -> list:
        nav: list = [{"Home": "index.md"}, {"Diagnose": "diagnose.md"}]
        nav.append({"Categories": [{title: f"categories/{cat}.md"}
                                   for cat, title, _, _ in self.categories]})
        nav.append({"Error index": "errors.md"})
        if "messages/index.md" in self.files:
            nav.append({"Messages faildex knows": "messages/index.md"})
        nav += [{"All entries": "entries/index.md"},
                {"Systems": "systems/index.md"}]
        nav += [{title: uri} for title, uri in self.nav_extra]
        nav.append({"Contributing": "contributing.md"})
        return nav


# ---------------------------------------------------------------- build steps

def entry_pages(b: SiteBuild) -> None:
    for v in b.entries:
        b.render("entry.md.j2", v.uri, e=v, edit_url=v.edit_url)


def index_pages(b: SiteBuild) -> None:
    tpl = f"{REPO_URL}/blob/{BRANCH}/site_template/pages/"
    b.render("home.md.j2", "index.md", in_nav=True, edit_url=tpl + "home.md.j2")
    for cat, title, desc, views in b.categories:
        b.render("category.md.j2", f"categories/{cat}.md", in_nav=True, cat=cat, title=title,
                 desc=desc, views=views)
    b.render("all.md.j2", "entries/index.md", in_nav=True)
    b.render("systems.md.j2", "systems/index.md", in_nav=True)
    for system in b.systems:
        b.render("system.md.j2", system.uri, system=system)
    rows = sorted(((s, v) for v in b.entries for s in v.defining),
                  key=lambda sv: (sv[0].message.strip().lower(), sv[1].id))
    b.render("errors.md.j2", "errors.md", in_nav=True, rows=rows)


def message_pages(b: SiteBuild) -> None:
    """"Messages faildex knows": every mapped template of the catalogue (catalog/), one row
    each, and the contributors' list of the ones nobody has mapped yet."""
    cats = b.catalogs
    if not cats:
        return
    rows, todo, counts = [], [], []
    for cat in cats:
        ts = list(cat.templates.values())
        counts.append((cat.project, len(ts), sum(t.mapping != "uncovered" for t in ts)))
        for t in ts:
            views = [b.by_id[i] for i in t.ids if i in b.by_id]
            (todo if t.mapping == "uncovered" else rows).append((cat.project, t, views))
    rows.sort(key=lambda r: (r[1].message.lstrip("{").lower(), r[0]))
    b.render("messages.md.j2", "messages/index.md", in_nav=True, rows=rows, counts=counts)
    b.render("messages-uncovered.md.j2", "messages/uncovered.md", rows=todo, counts=counts)


def diagnose_page(b: SiteBuild) -> None:
    """The diagnoser's page: site_template/diagnose.md as it is (its assets come from a
    later build step)."""
    path = b.template_dir / "diagnose.md"
    if path.is_file():
        text = path.read_text(encoding="utf-8")
        edit = f"{REPO_URL}/edit/{BRANCH}/site_template/diagnose.md"
    else:
        text = "# Diagnose your log\n\nThe diagnoser is not part of this build.\n"
        edit = None
    b.add_text("diagnose.md", text, in_nav=True, edit_url=edit)


def contributing_page(b: SiteBuild) -> None:
    guide = REPO / "CONTRIBUTING.md"
    text = guide.read_text(encoding="utf-8") if guide.is_file() else "# Contributing\n"
    b.render("contributing.md.j2", "contributing.md", in_nav=True,
             edit_url=f"{REPO_URL}/edit/{BRANCH}/CONTRIBUTING.md",
             guide=Markup(github_links(text)), tables=schema_tables(), codes=validator_codes(),
             categories=S.CATEGORIES, severities=S.SEVERITIES, strengths=S.STRENGTHS,
             software=S.SOFTWARE, has_catalog=bool(b.catalogs))


def api_files(b: SiteBuild) -> None:
    b.add_text("api/entries.json", json.dumps(api_entries(b), indent=1, ensure_ascii=False) + "\n")
    b.render("llms.txt.j2", "llms.txt")   # plain text: the template turns autoescape off


def search_file(b: SiteBuild) -> None:
    from .search import search_step
    search_step(b)


STEPS: list[Callable[[SiteBuild], None]] = [
    entry_pages, index_pages, message_pages, diagnose_page, contributing_page, api_files, search_file,
]


# ---------------------------------------------------------------- data for pages

def github_links(markdown: str) -> str:
    """Relative links of a repository Markdown file, pointed at GitHub (they are not site pages)."""
    def repl(m):
        target = m.group(2)
        if re.match(r"^(?:[a-z]+:|#|/)", target):
            return m.group(0)
        return f"{m.group(1)}({REPO_URL}/blob/{BRANCH}/{target})"
    return re.sub(r"(\[[^\]\n]*\])\(([^)\s]+)\)", repl, markdown)


def schema_tables() -> list[dict]:
    """The entry format as tables: the entry, then each nested object, from generator/schema.py."""
    tables: list[dict] = []

    def visit(name: str, obj: S.Obj, doc: str):
        rows = []
        nested = []
        for f in obj.fields:
            t, suffix = f.type, ""
            if isinstance(t, S.List) and isinstance(t.item, S.Obj):
                t, suffix = t.item, "[]"
            if isinstance(t, S.Obj):
                child = f"{name}.{f.name}{suffix}" if name else f"{f.name}{suffix}"
                nested.append((child, t, f.doc))
                type_name = ("list of " if suffix else "") + "object (below)"
            else:
                type_name = S.describe_type(f.type)
            extra = []
            if isinstance(f.type, S.List) and f.type.min_items:
                extra.append(f"at least {f.type.min_items}")
            rows.append({"name": f.name, "type": type_name, "required": f.required,
                         "doc": f.doc, "extra": ", ".join(extra),
                         "anchor": slug(f"{name}-{f.name}" if name else f.name)})
        one_of = " or ".join(f"`{k}`" for k in obj.one_of_required)
        tables.append({"name": name or "entry", "doc": doc, "rows": rows, "one_of": one_of})
        for child, t, d in nested:
            visit(child, t, d)

    visit("", S.ENTRY, "The top level of an entry file.")
    return tables


def validator_codes() -> list[tuple[str, str]]:
    """(code, what it checks), from the validator's registry (reserved codes say so)."""
    return [(code, validate.CODES.get(code, "") +
             (f" (reserved: {validate.RESERVED[code]})" if code in validate.RESERVED else ""))
            for code in sorted(set(validate.CODES) | set(validate.RESERVED))]


def api_entries(b: SiteBuild) -> dict:
    out = []
    for v in sorted(b.entries, key=lambda v: v.id):
        d = v.d
        out.append({
            "id": v.id,
            "title": v.title,
            "category": v.category,
            "severity": v.severity,
            "systems": list(d["systems"]),
            "url": b.absolute(v.uri),
            "path": page_url(v.uri, b.use_directory_urls),
            "source": v.source,
            "edit_url": v.edit_url,
            "quick_answer": " ".join(d["quick_answer"].split()),
            "first_move": v.first_move,
            "downstream": bool(d.get("downstream", False)),
            "signatures": [{"id": s["id"], "regex": s["regex"], "strength": s["strength"],
                            "text": sh.text} for s, sh in zip(d["signatures"], v.signatures)],
            "links": {
                "related": list(d.get("related") or []),
                "related_from": sorted(v.related_in),
                "not_this": [n["entry"] for n in d.get("not_this") or []],
                "lookalikes": [{"entry": dis["elsewhere"]["entry"], "signal": dis["signal"]}
                               for dis in d.get("discriminators") or []],
            },
            "affects": list(d.get("affects") or []),
            "references": list(d.get("references") or []),
        })
    return {"format": API_FORMAT, "count": len(out), "entries": out}


# ---------------------------------------------------------------- entry points

def load_entries(root: Path) -> list[Entry]:
    """Load and validate; raise SiteError with every problem. Files that validated before
    unchanged (validate.passed_before: `faildex validate` or an earlier build) are only
    loaded: a second full check of the same bytes finds nothing new and costs ~25 s."""
    entries, problems = validate.validate_once(Path(root))
    if problems:
        raise SiteError(problems)
    for e in entries:   # positions only serve problem messages: free them for large sites
        e.positions, e.key_positions = {}, {}
    return entries


def build(root: Path, *, steps: Iterable[Callable[[SiteBuild], None]] | None = None,
          **kwargs) -> SiteBuild:
    b = SiteBuild(Path(root), load_entries(Path(root)), **kwargs)
    for step in (STEPS if steps is None else steps):
        step(b)
    return b


def write(b: SiteBuild, out: Path) -> None:
    """Write the generated docs tree to out (replacing what was there)."""
    import shutil
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    for f in b.files.values():
        p = out / f.uri
        p.parent.mkdir(parents=True, exist_ok=True)
        if f.abs_src_path:
            shutil.copyfile(f.abs_src_path, p)
        elif isinstance(f.content, bytes):
            p.write_bytes(f.content)
        else:
            p.write_text(f.markdown() or "", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m generator.site", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.environ.get("FAILDEX_ROOT", str(REPO)),
                    help="the checkout holding entries/ (default: this one, or $FAILDEX_ROOT)")
    ap.add_argument("--out", default=str(REPO / ".cache" / "docs"),
                    help="where to write the generated docs tree (default: .cache/docs)")
    args = ap.parse_args(argv)
    try:
        import yaml
        site_url = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8")).get("site_url")
    except Exception:
        site_url = None
    try:
        b = build(Path(args.root), site_url=site_url)
    except SiteError as err:
        print(err.report(), file=sys.stderr)
        print(err, file=sys.stderr)
        return 1
    write(b, Path(args.out))
    print(f"wrote {len(b.files)} files for {len(b.entries)} entries to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
