"""Site URLs as mkdocs makes them: a docs file's URL, and one page's link to another.
Shared by the site build and the search data."""
from __future__ import annotations

import posixpath


def page_url(uri: str, use_directory_urls: bool = True) -> str:
    """The URL (relative to the site root) mkdocs gives a docs file."""
    if not uri.endswith(".md"):
        return uri
    stem = uri[:-3]
    if not use_directory_urls:
        return stem + ".html"
    if stem == "index":
        return ""
    if stem.endswith("/index"):
        return stem[:-len("index")]
    return stem + "/"


def relative_url(target: str, base: str) -> str:
    """target and base are site-root URLs ('' is the home page)."""
    if target == base:
        return "./"
    base_dir = base if base.endswith("/") or base == "" else posixpath.dirname(base) + "/"
    rel = posixpath.relpath("/" + target, "/" + base_dir)
    if (target == "" or target.endswith("/")) and not rel.endswith("/"):
        rel += "/"
    return rel
