"""Helpers for the site tests: build a site with mkdocs, and read the HTML it wrote."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
        "source", "track", "wbr"}


# ---------------------------------------------------------------- building

def contributing_block(replayed_by: str, marker: str) -> str:
    """The fenced block after `<!-- replayed by <replayed_by>: <marker> -->` in CONTRIBUTING.md:
    a worked example that the named test runs exactly as written."""
    text = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    at = text.index(f"<!-- replayed by {replayed_by}: {marker} -->")
    start = text.index("\n", text.index("```", at)) + 1
    return text[start:text.index("\n```", start)]


def make_root(dest: Path, *entry_trees: Path) -> Path:
    """A checkout with the entries of the given trees (entries/<cat>/<id>.yaml each),
    sharing this repository's healthy logs (the validator reads them)."""
    (dest / "entries").mkdir(parents=True, exist_ok=True)
    for tree in entry_trees:
        shutil.copytree(tree, dest / "entries", dirs_exist_ok=True)
    if not (dest / "entries" / "healthy").exists():
        (dest / "entries" / "healthy").symlink_to(REPO / "entries" / "healthy")
    return dest


def mkdocs_build(root: Path, site_dir: Path, timeout: int = 900) -> subprocess.CompletedProcess:
    """`mkdocs build --strict` of this repository's site with the entries under root."""
    env = {**os.environ, "FAILDEX_ROOT": str(root), "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"),
         "-d", str(site_dir)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


@dataclass
class Node:
    tag: str
    attrs: dict
    children: list = field(default_factory=list)
    parent: "Node | None" = None

    def iter(self):
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None, **attrs) -> list["Node"]:
        out = []
        for n in self.iter():
            if tag and n.tag != tag:
                continue
            if cls and cls not in (n.attrs.get("class") or "").split():
                continue
            if any(n.attrs.get(k.replace("_", "-")) != v for k, v in attrs.items()):
                continue
            out.append(n)
        return out

    def find(self, tag: str | None = None, cls: str | None = None, **attrs) -> "Node | None":
        found = self.find_all(tag, cls, **attrs)
        return found[0] if found else None

    def text(self) -> str:
        parts = []
        for c in self.children:
            parts.append(c.text() if isinstance(c, Node) else c)
        return "".join(parts)

    def norm_text(self) -> str:
        return norm(self.text())


class _TreeBuilder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: (v if v is not None else "") for k, v in attrs}, parent=self.stack[-1])
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):
        node = Node(tag, {k: (v if v is not None else "") for k, v in attrs}, parent=self.stack[-1])
        self.stack[-1].children.append(node)

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def parse_html(text: str) -> Node:
    b = _TreeBuilder()
    b.feed(text)
    b.close()
    return b.root


def norm(text: str) -> str:
    return " ".join(text.split())


def article(doc: Node) -> Node:
    node = doc.find("article", cls="md-content__inner")
    assert node is not None, "no <article> in page"
    return node


def sections(art: Node) -> dict[str, list[Node]]:
    """The article split at its h2 headings: heading text -> the nodes under it."""
    out: dict[str, list[Node]] = {}
    current = None
    for c in art.children:
        if isinstance(c, Node) and c.tag == "h2":
            current = heading_text(c)
            out[current] = []
        elif current is not None and isinstance(c, Node):
            out[current].append(c)
    return out


def heading_text(h: Node) -> str:
    return norm("".join(c.text() if isinstance(c, Node) and "headerlink" not in
                        (c.attrs.get("class") or "") else (c if isinstance(c, str) else "")
                        for c in h.children))


def section_text(nodes: list[Node]) -> str:
    return norm(" ".join(n.text() for n in nodes))


def section_links(nodes: list[Node]) -> list[str]:
    return [a.attrs.get("href", "") for n in nodes for a in n.find_all("a")]


def resolve(page_url: str, href: str) -> str:
    """Site-root path a relative href on page_url points at (no fragment or query)."""
    import posixpath
    href = re.split(r"[#?]", href, maxsplit=1)[0]
    if not href:
        return page_url
    base = page_url if page_url.endswith("/") or page_url == "" else posixpath.dirname(page_url) + "/"
    path = posixpath.normpath(posixpath.join("/" + base, href)).lstrip("/")
    if href.endswith("/") and path:
        path += "/"
    return "" if path == "." else path


def target_exists(site: Path, path: str) -> bool:
    p = site / path
    if path == "" or path.endswith("/"):
        return (p / "index.html").is_file()
    return p.is_file() or (p / "index.html").is_file()
