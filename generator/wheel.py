"""The one wheel: built by setuptools (pyproject.toml), the index inside.

The CLI, `pipx install`, the release and the browser diagnoser all use the file
build_wheel() returns, so what the browser runs cannot drift from the command.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A fixed date for every file in the zip: the same sources give the same bytes.
SOURCE_DATE_EPOCH = "1577836800"   # 2020-01-01


class WheelError(Exception):
    pass


def _inputs_digest(root: Path) -> str:
    """What the wheel is made of: engine, entries, healthy logs, generator, fleet page."""
    h = hashlib.sha256()
    files = [root / "pyproject.toml", root / "README.md"]
    for sub, pattern in [("pyodide_app/faildex", "*.py"), ("entries", "*"),
                         ("generator", "*.py"),
                         ("site_template/fleet", "*"), ("site_template/static/assets/faildex", "*")]:
        files += sorted((root / sub).rglob(pattern))
    for p in files:
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(f"{p.relative_to(root)}\0".encode() + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def build_wheel(out_dir: Path, root: Path = ROOT, reuse_index: bool = True) -> Path:
    """The faildex wheel of the checkout root, built offline (`python -m build
    --wheel --no-isolation`) into out_dir, reused while its inputs are unchanged.
    reuse_index: the build bundles the checkout's cached index when it is current
    (.cache/index-<source digest>.json, written only after the entries validated) instead
    of validating and compiling all entries again (about a minute)."""
    out_dir = Path(out_dir)
    stamp = out_dir / f".inputs-{_inputs_digest(root)}"
    wheels = sorted(out_dir.glob("faildex-*-py3-none-any.whl"))
    if stamp.exists() and len(wheels) == 1:
        return wheels[0]
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    env = dict(os.environ, SOURCE_DATE_EPOCH=SOURCE_DATE_EPOCH, PIP_NO_INDEX="1")
    with tempfile.TemporaryDirectory(prefix="faildex-wheel-") as tmp:
        # build from a copy: setuptools writes build/ and *.egg-info beside the sources
        src = Path(tmp) / "src"
        shutil.copytree(root, src, ignore=shutil.ignore_patterns(
            ".git", ".venv", "node_modules", "site", "build", "dist", ".cache", "docs_build",
            "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis", "bench"))
        if reuse_index:
            _copy_current_index(root, src)
        proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation",
                               "--outdir", str(out_dir), str(src)],
                              env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
        raise WheelError("building the faildex wheel failed:\n" + "\n".join(tail))
    wheels = sorted(out_dir.glob("faildex-*-py3-none-any.whl"))
    if len(wheels) != 1:
        raise WheelError(f"expected one wheel in {out_dir}, found {[w.name for w in wheels]}")
    stamp.touch()
    return wheels[0]


def _copy_current_index(root: Path, copy: Path) -> None:
    """The checkout's cached index, into the copy, when it is the one the copy's sources
    give (copytree keeps the modification times source_digest reads)."""
    from .loader import source_digest
    digest = source_digest(root)
    cached = root / ".cache" / f"index-{digest}.json"
    if cached.is_file() and source_digest(copy) == digest:
        (copy / ".cache").mkdir(exist_ok=True)
        shutil.copy2(cached, copy / ".cache" / cached.name)


def main(argv: list[str] | None = None) -> int:
    import argparse
    ap = argparse.ArgumentParser(prog="python -m generator.wheel", description=__doc__)
    ap.add_argument("--out", default=str(ROOT / "dist"))
    args = ap.parse_args(argv)
    try:
        wheel = build_wheel(Path(args.out))
    except WheelError as err:
        print(err, file=sys.stderr)
        return 1
    print(wheel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
