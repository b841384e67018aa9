"""What the build ships for the browser diagnoser: the engine wheel, Pyodide from the
pinned npm package, the index, and nothing that loads from another origin."""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

from generator.diagnoser import PYODIDE_FILES, check_same_origin, engine_wheel

ROOT = Path(__file__).resolve().parent.parent


def test_off_origin_assets_are_found(tmp_path):
    (tmp_path / "a.html").write_text(
        '<link rel="canonical" href="https://faildex.dev/">\n'
        '<a href="https://github.com/x">ok</a>\n'
        '<script src="https://cdn.example.com/pyodide.js"></script>\n'
        '<link rel="stylesheet" href="//fonts.example.com/x.css">\n')
    (tmp_path / "b.css").write_text("body { background: url(https://img.example.com/x.png) }\n")
    (tmp_path / "c.js").write_text('importScripts("https://cdn.example.com/w.js");\n')
    bad = check_same_origin(tmp_path)
    assert [b.split(":")[0] + ":" + b.split(":")[1] for b in bad] == ["a.html:3", "a.html:4", "b.css:1", "c.js:1"]


def test_built_site_ships_the_diagnoser_and_stays_on_origin(real_site):
    site = real_site.site
    assert check_same_origin(site) == []
    for f in PYODIDE_FILES:
        assert (site / "assets" / "pyodide" / f).stat().st_size > 0
    manifest = json.loads((site / "assets" / "faildex" / "manifest.json").read_text())
    # the browser loads the very wheel that `pip install` installs, its index inside
    shipped = site / "assets" / "faildex" / manifest["wheel"]
    assert shipped.read_bytes() == engine_wheel(ROOT).read_bytes()
    bundled = json.loads(zipfile.ZipFile(shipped).read("faildex/index.json"))
    assert bundled["digest"] == manifest["index_digest"]
    index = json.loads((site / "assets" / "faildex" / "index.json").read_text())
    assert set(index["entries"]) == {e.id for e in real_site.build.entries}
    npm = json.loads((ROOT / "package-lock.json").read_text())
    assert manifest["pyodide"] == npm["packages"]["node_modules/pyodide"]["version"]


def test_no_inline_scripts_for_the_csp_to_block(real_site):
    """script-src 'self' blocks inline scripts: the built pages must not rely on any."""
    import re
    inline = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*type=\"application/json\")[^>]*>", re.I)
    offenders = [str(p.relative_to(real_site.site)) for p in real_site.site.rglob("*.html")
                 if inline.search(p.read_text(encoding="utf-8"))]
    assert offenders == []
