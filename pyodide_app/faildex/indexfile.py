"""Which index the engine's commands read, and where the faildex checkout is.

Kept apart from command.py so that the commands (cli, triage) and the dispatcher
import it without importing each other.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
BUNDLED_INDEX = PACKAGE_DIR / "index.json"


def checkout_root() -> Path | None:
    """The faildex checkout holding the generator: FAILDEX_ROOT, the current folder
    upwards, or the checkout this package was imported from (an editable install)."""
    env = os.environ.get("FAILDEX_ROOT")
    candidates = [Path(env)] if env else []
    cwd = Path.cwd().resolve()
    candidates += [cwd, *cwd.parents, PACKAGE_DIR.parent.parent]
    for p in candidates:
        if (p / "entries").is_dir() and (p / "generator" / "cli.py").is_file():
            return p.resolve()
    return None


def _own_checkout() -> Path | None:
    """The checkout named by FAILDEX_ROOT (as for `faildex validate`), else the one this
    package lives in (editable install), or None (a wheel)."""
    env = os.environ.get("FAILDEX_ROOT")
    if env and (Path(env) / "entries").is_dir():
        return Path(env).resolve()
    root = PACKAGE_DIR.parent.parent
    if (root / "entries").is_dir() and (root / "generator" / "index.py").is_file():
        return root
    return None


def index_path(explicit: str | None = None) -> str:
    """Which index to use: --index, FAILDEX_INDEX, the checkout's entries, the bundled one.
    Raises ValueError with a one-line reason."""
    chosen = explicit or os.environ.get("FAILDEX_INDEX")
    if chosen:
        if not os.path.isfile(chosen):
            raise ValueError(f"{chosen}: no such index file")
        return chosen
    root = _own_checkout()
    if root is not None:
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        try:
            from generator.index import cached_index_path   # needs the site extra
            return str(cached_index_path(root))
        except ImportError as err:
            raise ValueError(f"building the index from {root}/entries needs {err.name}: "
                             f"pip install -e '.[site]'") from None
        except SystemExit as err:     # entries that do not validate
            raise ValueError(str(err)) from None
    if BUNDLED_INDEX.is_file():
        return str(BUNDLED_INDEX)
    raise ValueError("no index: this faildex was installed without its bundled index.json; "
                     "give one with --index or FAILDEX_INDEX")
