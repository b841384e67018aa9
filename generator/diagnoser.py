"""The browser diagnoser's assets, shipped with the site by a site build step.

    assets/pyodide/      the Pyodide runtime, copied from node_modules/pyodide (npm, pinned)
    assets/faildex/      the faildex wheel, the index, example logs, worker and page scripts,
                         and snapshot-*.bin: Pyodide's memory with the wheel imported, which
                         the workers start from (~0.5 s instead of ~5)
    sw.js                the service worker: every page and asset, cached on the first
                         visit, so the site and the diagnoser work offline afterwards
    *.gz, *.br           beside each big compressible file, for static hosts that serve
                         precompressed files (README: "Hosting the site")

The wheel is the one `pipx install faildex` installs (generator/wheel.py: setuptools,
the index inside), so the browser runs exactly the released engine. It is pure
Python (py3-none-any); Pyodide loads it with loadPackage from the site's origin.
Nothing is ever loaded from another origin: check_same_origin() fails the build
if a page or script points off-site.
"""
from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import brotli

PYODIDE_FILES = ["pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip",
                 "pyodide-lock.json"]
EXAMPLE_MAX = 64 * 1024
COMPRESS_MIN = 100 * 1024           # smaller files gain little from a precompressed copy
COMPRESS_SUFFIXES = {".wasm", ".mjs", ".js", ".json", ".css", ".html", ".zip", ".whl"}
COMPRESS_GAIN = 0.9                 # keep a copy only when it is at most 90% of the original
# Not cached by the service worker: source maps, copies of other files, the sitemap, and
# lunr's word splitter for Thai/Japanese (0.7 MB, loaded only for those languages).
OFFLINE_SKIP = re.compile(r"\.(?:map|gz|br)$|^sitemap\.xml|^sw\.js$|^assets/javascripts/lunr/(?:wordcut|tinyseg)\.js$")


class AssetError(Exception):
    pass


def engine_wheel(root: Path) -> Path:
    """The faildex wheel of the checkout, built once per change of its sources."""
    from .wheel import WheelError, build_wheel
    try:
        return build_wheel(root / ".cache" / "wheel", root)
    except WheelError as err:
        raise AssetError(str(err)) from None


def pyodide_snapshot(code: Path, pyodide_src: Path, wheel: Path) -> Path:
    """Pyodide's memory after importing the wheel, gzip-compressed (generator/
    pyodide_snapshot.mjs): the workers start from it. Named by what it was made from,
    and made once per wheel and Pyodide: a snapshot is not byte-for-byte reproducible."""
    script = code / "generator" / "pyodide_snapshot.mjs"
    digest = hashlib.sha256(wheel.read_bytes() + (pyodide_src / "pyodide.asm.wasm").read_bytes()
                            + script.read_bytes()).hexdigest()[:16]
    out = code / ".cache" / "snapshot" / f"snapshot-{digest}.bin"
    if out.is_file():
        return out
    node = shutil.which("node")
    if node is None:
        raise AssetError("node not found: the diagnoser's Pyodide snapshot is made with node (make setup)")
    out.parent.mkdir(parents=True, exist_ok=True)
    for old in out.parent.glob("snapshot-*"):
        old.unlink()
    tmp = out.with_suffix(".tmp")
    p = subprocess.run([node, str(script), str(pyodide_src.resolve()), str(wheel), str(tmp)],
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0 or not tmp.is_file():
        raise AssetError(f"the Pyodide snapshot failed ({script.name}): {(p.stderr or p.stdout)[-2000:]}")
    tmp.rename(out)
    return out


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
    from .index import cached_index_path
    entries = [v.entry for v in b.entries]
    # the checkout's compiled index when it is current (the CLI's and the tests' own), else
    # compiled now, in a process of its own, and kept in b.root/.cache/; shipped as written
    index_text = cached_index_path(b.root, child=True).read_text(encoding="utf-8")
    digest = json.loads(index_text).get("digest", "")
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
    snapshot = pyodide_snapshot(code, pyodide_src, wheel)
    b.add_file(f"assets/faildex/{snapshot.name}", snapshot)
    for p in sorted((code / "pyodide_app" / "web").glob("*")):
        if p.is_file() and p.name != "sw.js":   # sw.js goes to the site's root (offline_step)
            b.add_file(f"assets/faildex/{p.name}", p)
    b.add_text("assets/faildex/index.json", index_text)
    b.add_text("assets/faildex/examples.json", json.dumps(example_logs(entries), ensure_ascii=False))
    version = json.loads((pyodide_src / "package.json").read_text())["version"]
    b.add_text("assets/faildex/manifest.json", json.dumps({
        "wheel": wheel.name, "snapshot": snapshot.name, "index": "index.json", "examples": "examples.json",
        "pyodide": version, "index_digest": digest,
        "new_entry": new_entry_target()}, indent=1))


def new_entry_target() -> dict:
    """Where "add this failure to faildex" goes: GitHub's web editor creates
    entries/<category>/<id>.yaml from the skeleton `faildex new` writes."""
    from . import schema as S
    from .cli import entry_template
    from .site import BRANCH, REPO_URL
    # the page fills in {id} and {category}
    template = entry_template("{id}", "{category}", "../../generator/entry.schema.json")
    template = template.replace('"{id}"', "{id}").replace('"{category}"', "{category}")
    return {"url": f"{REPO_URL}/new/{BRANCH}/entries/", "categories": list(S.CATEGORIES),
            "template": template}


# ---------------------------------------------------------------- after mkdocs wrote the site

def compress_big_assets(site_dir: Path, cache: Path) -> list[Path]:
    """Write f.gz and f.br beside every big compressible file of the site. Copies are
    kept in `cache` by content digest: the 10 MB runtime is compressed once, not per build."""
    written = []
    cache.mkdir(parents=True, exist_ok=True)
    for p in sorted(site_dir.rglob("*")):
        if not p.is_file() or p.suffix not in COMPRESS_SUFFIXES or p.stat().st_size < COMPRESS_MIN:
            continue
        data = p.read_bytes()
        digest = hashlib.sha256(data).hexdigest()[:32]
        for ext, squeeze in ((".gz", lambda d: gzip.compress(d, 6, mtime=0)),
                             (".br", lambda d: brotli.compress(d, quality=6))):
            kept = cache / f"{digest}{ext}"
            skipped = cache / f"{digest}{ext}.skip"
            if skipped.exists():
                continue
            if not kept.exists():
                packed = squeeze(data)
                if len(packed) > COMPRESS_GAIN * len(data):
                    skipped.touch()
                    continue
                kept.write_bytes(packed)
            out = p.with_name(p.name + ext)
            out.write_bytes(kept.read_bytes())
            written.append(out)
    return written


def service_worker(site_dir: Path, code: Path) -> Path:
    """site/sw.js: pyodide_app/web/sw.js after a list of every file it caches and a
    version (a digest of their contents: a new build replaces the old cache)."""
    files, digest = [], hashlib.sha256()
    for p in sorted(site_dir.rglob("*")):
        rel = p.relative_to(site_dir).as_posix()
        if not p.is_file() or OFFLINE_SKIP.search(rel):
            continue
        digest.update(rel.encode() + b"\0" + hashlib.sha256(p.read_bytes()).digest())
        # directory URLs: entries/x/index.html is fetched as entries/x/
        files.append(rel[:-len("index.html")] if rel == "index.html" or rel.endswith("/index.html") else rel)
    head = (f"// Generated by generator/diagnoser.py at build time.\n"
            f"const VERSION = {json.dumps(digest.hexdigest()[:16])};\n"
            f"const FILES = {json.dumps([f or './' for f in files], indent=0)};\n")
    out = site_dir / "sw.js"
    out.write_text(head + (code / "pyodide_app" / "web" / "sw.js").read_text(encoding="utf-8"),
                   encoding="utf-8")
    return out


# `mkdocs serve` rebuilds on every edit: a cache there would show stale pages, so the
# hook sets this False and the site gets a worker that removes itself instead.
OFFLINE = True
_UNREGISTER = ("// mkdocs serve: no offline cache while editing; remove a worker left by a built site.\n"
               "self.addEventListener('install', () => self.skipWaiting());\n"
               "self.addEventListener('activate', (e) => e.waitUntil(self.registration.unregister()));\n")


def offline_step(b, site_dir: Path) -> None:
    """Post-build step (generator/mkdocs_hooks.py): compressed copies, then the service
    worker (its list leaves the copies out: a browser asks for the file, the server picks)."""
    code = Path(__file__).resolve().parent.parent
    if not OFFLINE:
        (site_dir / "sw.js").write_text(_UNREGISTER, encoding="utf-8")
        return
    compress_big_assets(site_dir, code / ".cache" / "compressed")
    service_worker(site_dir, code)
