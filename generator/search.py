"""The data behind "paste an error, get the entry": assets/faildex/search.json.

The header search and the home page's paste box (site_template/static/assets/
faildex/find.js) rank entries for a whole error line or a few words. They run each
signature's regex on the pasted lines (translated to JavaScript here, at build
time), then score words against the signature's general message (the regex written
out, never one example's text), the title, the systems and the entry's prose.

Measured against mkdocs-material's own search (lunr, even with a separator that
splits on .:()[]/= and boosted pages) in bench/search.py; the browser test in
tests/test_browser.py holds the bar.
"""
from __future__ import annotations

import json
import re

from .healthy import engine_module
from .regexes import literal_runs, readable, required_literals
from .text import clean
from .urls import page_url

SEARCH_FORMAT = 1
SHOWN = ("defining", "supporting", "collateral")   # context lines are printed by healthy runs


def js_regex(pattern: str) -> str | None:
    """The pattern in JavaScript's syntax, or None when it uses something JavaScript
    reads differently (the page then scores that signature by its words only)."""
    if re.search(r"\(\?[aiLmsux]|\\[AZ]|\(\?>|[*+?}]\+|\(\?\(", pattern):
        return None
    return re.sub(r"\(\?P=(\w+)\)", r"\\k<\1>", pattern.replace("(?P<", "(?<"))


def _prose(d: dict) -> str:
    # the symptoms travel apart, as "seen", scored like signature text; the rest of the page
    # (why each symptom shows, the checks, the fix and why it works, how to verify and prevent
    # it) is in the words a reader asks with ("resume with a different number of GPUs")
    parts = [d["quick_answer"], d["root_cause"], d.get("misread_as") or ""]
    parts += [x["why"] for x in d["symptoms"]]
    parts += [x["do"] for x in d.get("confirm") or []]
    parts += [x["do"] + " " + x["why"] for x in d.get("fix") or []]
    parts += [d.get("verify") or "", *(d.get("prevent") or [])]
    return " ".join(clean(p) for p in parts)


def catalog_words(catalogs) -> dict[str, dict[str, list[str]]]:
    """Per entry, the literal text of the catalogue messages mapped to it ("own") and of
    those that follow from it ("after"): pasting a cataloged message finds its entry
    even where no signature matches the whole line."""
    from . import catalog
    out: dict[str, dict[str, list[str]]] = {}
    for cat in catalogs:
        for t in cat.templates.values():
            text = " ".join(catalog.FIELD.sub(" ", t.message).split())
            if t.entry:
                out.setdefault(t.entry, {}).setdefault("own", []).append(text)
            for eid in t.collateral or []:
                out.setdefault(eid, {}).setdefault("after", []).append(text)
    return out


def search_data(views, url, messages: dict | None = None) -> dict:
    """views: the site's EntryViews; url(uri) -> the page's URL relative to the site root;
    messages: catalog_words() (absent: no catalogue)."""
    messages = messages or {}
    entries = []
    for v in sorted(views, key=lambda v: v.id):
        d = v.d
        sigs = []
        for s in d["signatures"]:
            if s["strength"] not in SHOWN:
                continue
            sigs.append({"id": s["id"], "strength": s["strength"], "re": js_regex(s["regex"]),
                         "text": readable(s["regex"]),
                         "words": " ".join(literal_runs(s["regex"])),
                         "literals": [x for x in required_literals(s["regex"]) if len(x) >= 4]})
        entries.append({
            "id": v.id, "title": clean(v.title), "url": url(v.uri),
            "category": v.category_title, "summary": v.summary,
            "systems": list(d["systems"]), "downstream": bool(d.get("downstream")),
            "refines": list(d.get("refines") or []), "signatures": sigs,
            "prose": " ".join([_prose(d), *messages.get(v.id, {}).get("after", [])]),
            # the catalogue's messages that name this failure: scored like signature text
            "messages": " \n ".join(messages.get(v.id, {}).get("own", [])),
            # what the reader sees in the log, in the entry's words: scored like signatures
            "seen": " ".join(clean(x["see"]) for x in d["symptoms"]),
            # when this entry and the one it refines match the same line, these decide
            "unless": [{"entry": x["elsewhere"]["entry"], "compare": x["compare"]}
                       for x in d.get("discriminators") or [] if x.get("compare")
                       and x["elsewhere"]["entry"] in (d.get("refines") or [])],
        })
    # the prefixes the engine peels off a line (faildex.lines.PREFIXES, in its order): the
    # page strips the same ones before trying a signature anchored at a message's start
    prefixes = [js_regex(rx.pattern) for rx in engine_module("lines").PREFIXES]
    return {"format": SEARCH_FORMAT, "entries": entries, "prefixes": [p for p in prefixes if p]}


def search_step(b) -> None:
    """Site build step: ship assets/faildex/search.json."""
    data = search_data(b.entries, lambda uri: page_url(uri, b.use_directory_urls), catalog_words(b.catalogs))
    b.add_text("assets/faildex/search.json",
               json.dumps(data, ensure_ascii=False, separators=(",", ":")))
