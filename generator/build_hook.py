"""setuptools build_py for the wheel: bundle what the engine needs at run time.

    faildex/index.json        the index of this release, compiled from entries/
    faildex/fleet/            the fleet page's template and the site's CSS
                                     (site_template/fleet/, site_template/static/...)

Named in pyproject.toml ([tool.setuptools] cmdclass), so `python -m build --wheel`
and `pip wheel .` both produce it. An entry that does not validate fails the build.
Editable installs (`make setup`) skip this: in a checkout the CLI compiles the
index from entries/ itself.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent.parent
# setuptools loads this file by its path; the generator package must be importable
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
PACKAGE = "faildex"
# every template the fleet page extends or includes, its script, and the site's CSS
FLEET_FILES = sorted((ROOT / "site_template" / "fleet").glob("*.*")) + [
    ROOT / "site_template" / "static" / "assets" / "faildex" / "faildex.css"]


def bundle(out: Path) -> dict:
    """Write index.json and the fleet page's files into the package folder out."""
    from generator.index import cached_index_path
    # validated and compiled unless .cache/ holds the index of these very sources (build_wheel
    # copies in the checkout's); the cache's bytes are what index.json holds
    cached = cached_index_path(ROOT)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cached, out / "index.json")
    index = json.loads(cached.read_text(encoding="utf-8"))
    (out / "fleet").mkdir(exist_ok=True)
    for f in FLEET_FILES:
        shutil.copyfile(f, out / "fleet" / f.name)
    return index


class BuildPy(build_py):
    def run(self):
        super().run()
        if not getattr(self, "editable_mode", False):
            index = bundle(Path(self.build_lib) / PACKAGE)
            print(f"faildex: bundled index {index['digest']} ({len(index['entries'])} entries)")

    def get_outputs(self, include_bytecode=1):
        names = ["index.json"] + [f"fleet/{f.name}" for f in FLEET_FILES]
        extra = [str(Path(self.build_lib) / PACKAGE / n) for n in names]
        return super().get_outputs(include_bytecode) + ([] if getattr(self, "editable_mode", False)
                                                        else extra)
