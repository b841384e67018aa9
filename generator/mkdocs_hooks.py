"""mkdocs hooks: the site's pages are generated from entries/ during the build.

on_config   validate every entry (any problem: all are printed and the build stops
            before the site directory is touched), run BUILD_STEPS, set the nav.
on_files    hand the generated pages and files to mkdocs (virtual files: nothing is
            written to a docs folder, nothing stale survives).
on_page_content  put back the page's HTML blocks, kept out of Markdown's way.
on_page_context  "Edit this page" opens the page's source: an entry page its YAML file.
on_serve    `mkdocs serve` also watches entries/ and site_template/, so an edited
            entry re-renders on save.

To ship more with the site (the diagnoser's engine wheel, index, Pyodide), append a
function to BUILD_STEPS: it receives the SiteBuild (`b.entries`, `b.root`,
`b.add_text(uri, text)`, `b.add_file(uri, path)`, `b.nav_extra`) after the pages
were rendered. A function in POST_BUILD_STEPS receives (SiteBuild, site_dir) once
mkdocs has written the site, for files written straight into it.

The entries are read from $FAILDEX_ROOT when set (tests and benchmarks build other
checkouts this way), else from the folder holding mkdocs.yml.
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Callable

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from mkdocs.exceptions import PluginError  # noqa: E402
from mkdocs.structure.files import File, InclusionLevel  # noqa: E402

from generator import diagnoser, site  # noqa: E402

log = logging.getLogger("mkdocs.faildex")

# Run in order after the entries validated; each adds pages or files to the build.
BUILD_STEPS: list[Callable[[site.SiteBuild], None]] = list(site.STEPS) + [diagnoser.diagnoser_step]
# Run after mkdocs wrote the site: (SiteBuild, site_dir).
def _same_origin_only(b: site.SiteBuild, site_dir: Path) -> None:
    """Nothing in the published site may load from another origin (the diagnoser's
    promise that no byte of a log leaves the machine starts here)."""
    bad = diagnoser.check_same_origin(site_dir)
    if bad:
        for line in bad:
            log.error(line)
        raise PluginError(f"{len(bad)} asset reference(s) point off-origin")


POST_BUILD_STEPS: list[Callable[[site.SiteBuild, Path], None]] = [_same_origin_only, diagnoser.offline_step]

_build: site.SiteBuild | None = None


def entries_root(config) -> Path:
    env = os.environ.get("FAILDEX_ROOT")
    if env:
        return Path(env).resolve()
    return Path(config.config_file_path).resolve().parent


_serving = False


def on_startup(command, dirty):
    global _serving
    _serving = command == "serve"
    diagnoser.OFFLINE = not _serving


def on_config(config):
    global _build
    if _serving:
        # `mkdocs serve` injects its live-reload script inline; the dev server alone
        # allows that, so an edited entry refreshes the open page. Built sites keep
        # the strict policy (tests/test_browser.py checks it).
        config.extra["csp"] = config.extra["csp"].replace(
            "script-src 'self'", "script-src 'self' 'unsafe-inline'")
    root = entries_root(config)
    try:
        entries = site.load_entries(root)
    except site.SiteError as err:
        for problem in err.problems:
            log.error(str(problem))
        raise PluginError(str(err)) from None
    b = site.SiteBuild(root, entries, use_directory_urls=config.use_directory_urls,
                       site_url=config.site_url)
    for step in BUILD_STEPS:
        step(b)
    config.nav = b.nav()
    _build = b
    log.info(f"faildex: {len(b.entries)} entries, {len(b.files)} generated files")
    return config


def on_files(files, config):
    assert _build is not None, "on_config did not run"
    for out in _build.files.values():
        old = files.get_file_from_path(out.uri)
        if old is not None:
            files.remove(old)
        inclusion = InclusionLevel.INCLUDED if out.in_nav else InclusionLevel.NOT_IN_NAV
        if out.abs_src_path:
            f = File.generated(config, out.uri, abs_src_path=out.abs_src_path, inclusion=inclusion)
        else:
            f = File.generated(config, out.uri, content=out.content, inclusion=inclusion)
        files.append(f)
    return files


def on_page_content(html, page, config, files):
    out = _build.files.get(page.file.src_uri) if _build else None
    if out is None or not out.blocks:
        return html
    try:
        html = out.fill(html)
    except ValueError as err:
        raise PluginError(str(err)) from None
    out.blocks = []   # now in the page; thousands of pages are held until the build ends
    return html


def on_page_context(context, page, config, nav):
    out = _build.files.get(page.file.src_uri) if _build else None
    page.edit_url = out.edit_url if out else None
    return context


def on_post_build(config):
    for step in POST_BUILD_STEPS:
        step(_build, Path(config.site_dir))


def on_serve(server, config, builder):
    root = entries_root(config)
    for path in (root / "entries", site.TEMPLATE_DIR, _REPO / "CONTRIBUTING.md"):
        if path.exists():
            server.watch(str(path))
    return server
