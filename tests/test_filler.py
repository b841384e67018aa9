"""No filler: a generated sentence of eight or more words that appears on more than a
quarter of the entry pages fails, naming the sentence and the pages.

Headings, table headers, field labels, link text (titles of other entries and of
references) and code blocks are not sentences. Template
text counts like entry text: a sentence the template writes on every page is filler
too, so templates use labels.
"""
from __future__ import annotations

import re
import shutil
from collections import defaultdict

import markdown

from generator import site as G
from sitekit import FIXTURES, REPO, Node, article, make_root, norm, parse_html

MIN_WORDS = 8
MAX_SHARE = 0.25

NOT_PROSE_TAGS = {"h1", "h2", "h3", "h4", "h5", "h6", "th", "pre", "script", "style", "svg",
                  "button", "select", "option", "input", "label", "a"}
LABEL_CLASSES = {"fdx-label", "fdx-sev", "fdx-regex", "headerlink", "admonition-title", "md-content__button",
                 "md-button"}
BLOCK_TAGS = {"p", "li", "td", "dd", "dt", "div", "figcaption", "blockquote", "tr", "ul", "ol",
              "dl", "figure", "section", "article", "table", "tbody", "thead", "details",
              "summary"}
_SPLIT = re.compile(r"(?<=[.!?])[\"”')]?\s+(?=[A-Z0-9\"“(`])")


def text_blocks(node: Node) -> list[str]:
    """The prose of a page, one string per block element (cells and items stay apart)."""
    blocks: list[str] = []
    buf: list[str] = []

    def flush():
        text = norm("".join(buf))
        if text:
            blocks.append(text)
        buf.clear()

    def walk(n: Node):
        for c in n.children:
            if isinstance(c, str):
                buf.append(c)
                continue
            if c.tag in NOT_PROSE_TAGS or LABEL_CLASSES & set((c.attrs.get("class") or "").split()):
                buf.append(" ")
                continue
            if c.tag in BLOCK_TAGS:
                flush()
                walk(c)
                flush()
            else:
                walk(c)

    walk(node)
    flush()
    return blocks


def sentences(node: Node) -> set[str]:
    out = set()
    for block in text_blocks(node):
        for s in _SPLIT.split(block):
            s = s.strip()
            if len(s.split()) >= MIN_WORDS:
                out.add(s)
    return out


def find_filler(pages: dict[str, set[str]]) -> list[tuple[str, list[str]]]:
    """(sentence, pages) for each sentence on more than MAX_SHARE of the pages (and on two
    or more: one page alone repeats nothing)."""
    where: dict[str, list[str]] = defaultdict(list)
    for page, found in pages.items():
        for s in found:
            where[s].append(page)
    limit = len(pages) * MAX_SHARE
    return sorted((s, sorted(ps)) for s, ps in where.items() if len(ps) > limit and len(ps) >= 2)


def report(found: list[tuple[str, list[str]]], total: int) -> str:
    lines = [f"{len(found)} sentence(s) repeated on more than a quarter of {total} entry pages:"]
    for s, ps in found:
        lines.append(f"  {s!r}\n    on {len(ps)} pages: {', '.join(ps[:12])}"
                     + (" ..." if len(ps) > 12 else ""))
    return "\n".join(lines)


# ---------------------------------------------------------------- the site

def test_no_sentence_repeats_across_entry_pages(built):
    pages = {v.id: sentences(article(built.doc(built.entry_url(v.id))))
             for v in built.build.entries}
    assert all(pages.values()), "an entry page without a single sentence: the parser is wrong"
    found = find_filler(pages)
    assert not found, report(found, len(pages))


# ---------------------------------------------------------------- the check itself

def test_check_names_the_sentence_and_the_pages():
    filler = "Loss curves become non-monotonic when this failure happens."
    pages = {f"e{i}": {f"Entry {i} has its own sentence of more than eight words."}
             for i in range(8)}
    for i in (1, 4, 6):
        pages[f"e{i}"].add(filler)
    found = find_filler(pages)
    assert found == [(filler, ["e1", "e4", "e6"])]
    assert "e4" in report(found, 8) and filler in report(found, 8)
    pages["e4"].discard(filler)   # on 2 of 8 pages: a quarter, not more
    assert find_filler(pages) == []


def test_headings_labels_and_code_are_not_sentences():
    doc = parse_html(
        "<article><h2>What you will see on every single page of this site</h2>"
        "<p><span class='fdx-label'>Source of this example log, as it was printed</span></p>"
        "<table><tr><th>What the user sees when it fails in this way</th></tr>"
        "<tr><td>Short cell.</td><td>Another cell that is long enough to be a sentence here.</td></tr></table>"
        "<pre>a log line with many words in it, which is not prose at all</pre>"
        "<ul><li><a href='x'>Title of another entry that is long enough to count</a></li></ul>"
        "<p>First sentence has exactly eight words in it. Second one is short.</p></article>")
    assert sentences(doc) == {"Another cell that is long enough to be a sentence here.",
                              "First sentence has exactly eight words in it."}


def test_template_boilerplate_is_caught(tmp_path):
    """A sentence written by the template lands on every entry page: the check fails."""
    templates = tmp_path / "site_template"
    shutil.copytree(REPO / "site_template", templates)
    section_tpl = templates / "pages" / "sections" / "root-cause.md.j2"
    text = section_tpl.read_text()
    section_tpl.write_text(text + "\n<p>Loss curves become non-monotonic and throughput drops for a while.</p>\n")
    root = make_root(tmp_path / "root", FIXTURES / "site_entries")
    b = G.build(root, template_dir=templates)
    pages = {}
    for v in b.entries:
        text = b.files[v.uri].markdown().split("\n---\n", 1)[1]
        html = markdown.markdown(text, extensions=["toc", "admonition", "tables"])
        pages[v.id] = sentences(parse_html(f"<article>{html}</article>"))
    found = find_filler(pages)
    assert [s for s, _ in found] == ["Loss curves become non-monotonic and throughput drops for a while."]
    assert found[0][1] == sorted(v.id for v in b.entries)
