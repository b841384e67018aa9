"""The browser diagnoser's assets, shipped with the site by a site build step.

    assets/pyodide/      the Pyodide runtime, copied from node_modules/pyodide (npm, pinned)
    assets/faildex/      the faildex wheel, the index, example logs, worker and page scripts

The wheel is the one `pipx install faildex` installs (generator/wheel.py: setuptools,
the index inside), so the browser runs exactly the released engine. It is pure
Python (py3-none-any); Pyodide loads it with loadPackage from the site's origin.
Nothing is ever loaded from another origin: check_same_origin() fails the build
if a page or script points off-site.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

PYODIDE_FILES = ["pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip",
                 "pyodide-lock.json"]
EXAMPLE_MAX = 64 * 1024


class AssetError(Exception):
    pass


def engine_wheel(root: Path) -> Path:
    """The faildex wheel of the checkout, built once per change of its sources."""
    from .wheel import WheelError, build_wheel
    try:
        return build_wheel(root / ".cache" / "wheel", root)
    except WheelError as err:
        raise AssetError(str(err)) from None


def example_logs(entries) -> list[dict]:
    """One real example per entry, for the page's "try an example" control."""
    from .validate import example_text
    out = []
    for e in sorted(entries, key=lambda e: e.id):
        for ex in e.data["examples"]:
            if ex.get("expect", e.id) != e.id:
                continue
            text = example_text(e, ex) or ""
            if len(text.encode()) <= EXAMPLE_MAX:
                out.append({"id": e.id, "title": e.data["title"], "log": text})
                break
    return out


_ASSET_REF = re.compile(
    r"""<(?:script|img|iframe|source|audio|video|embed)\b[^>]*?\bsrc\s*=\s*["']?(https?:)?//"""
    # <link> loads something only for these rels (canonical, alternate... are just links)
    r"""|<link\b(?=[^>]*\brel\s*=\s*["']?(?:stylesheet|preload|modulepreload|prefetch|icon|"""
    r"""shortcut icon|manifest|preconnect|dns-prefetch|apple-touch-icon)\b)[^>]*?\bhref\s*=\s*["']?(https?:)?//"""
    r"""|@import\s+(?:url\()?["']?(https?:)?//"""
    r"""|url\(\s*["']?(https?:)?//"""
    r"""|\bimport\s*\(?\s*["'](https?:)?//"""
    r"""|\bimportScripts\s*\(\s*["'](https?:)?//""", re.I)


def check_same_origin(site_dir: Path) -> list[str]:
    """Every asset reference in the built site that points at another origin."""
    bad = []
    for p in sorted(site_dir.rglob("*")):
        if p.suffix not in (".html", ".css", ".js", ".mjs") or not p.is_file():
            continue
        if p.parent.name == "pyodide":
            continue  # the runtime itself: loaded with an explicit same-origin indexURL
        text = p.read_text(encoding="utf-8", errors="replace")
        for m in _ASSET_REF.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            bad.append(f"{p.relative_to(site_dir)}:{line}: off-origin asset: {m.group(0)[:120]}")
    return bad


def diagnoser_step(b) -> None:
    """Site build step (generator.site.STEPS): ship the diagnoser with the site.

    b is a generator.site.SiteBuild; its entries are validated EntryViews, each
    wrapping the loaded Entry as `.entry`.
    """
    from .index import build_index
    entries = [v.entry for v in b.entries]
    index = build_index(b.root, entries)
    code = Path(__file__).resolve().parent.parent   # this checkout: engine, web files, npm
    wheel = engine_wheel(code)
    pyodide_src = code / "node_modules" / "pyodide"
    missing = [f for f in PYODIDE_FILES if not (pyodide_src / f).is_file()]
    if missing:
        raise AssetError(f"Pyodide runtime not found ({', '.join(missing)} missing in "
                         f"node_modules/pyodide): run `npm ci` (make setup)")
    for f in PYODIDE_FILES:
        b.add_file(f"assets/pyodide/{f}", pyodide_src / f)
    b.add_file(f"assets/faildex/{wheel.name}", wheel)
    for p in sorted((code / "pyodide_app" / "web").glob("*")):
        if p.is_file():
            b.add_file(f"assets/faildex/{p.name}", p)
    b.add_text("assets/faildex/index.json", json.dumps(index, sort_keys=True, separators=(",", ":")))
    b.add_text("assets/faildex/examples.json", json.dumps(example_logs(entries), ensure_ascii=False))
    version = json.loads((pyodide_src / "package.json").read_text())["version"]
    b.add_text("assets/faildex/manifest.json", json.dumps({
        "wheel": wheel.name, "index": "index.json", "examples": "examples.json",
        "pyodide": version, "index_digest": index.get("digest", "")}, indent=1))
