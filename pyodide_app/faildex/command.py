"""`faildex`: the one command.

    faildex diagnose LOG...            name the failure (faildex diagnose --help)
    faildex triage PATH... -o OUT      one JSON line per job, in parallel, resumable
    faildex fleet report LINES... -o DIR   the fleet page (needs faildex[fleet])
    faildex --version                  release, index digest, entry count

Installed from the wheel, the index of the release is bundled inside. In a
checkout the index is compiled from entries/ (and cached), and the repository
tools are there too: validate, new, schema, index (generator/cli.py).
The index can be replaced with --index FILE or FAILDEX_INDEX=FILE (checked for
format and digest), e.g. the index.json a newer site publishes.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from . import __version__, load_index
from .scan import prefilter_name

REPO_TOOLS = ("validate", "new", "schema", "index")
ENGINE_COMMANDS = ("diagnose", "triage", "fleet")
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
    """The checkout this package lives in (editable install), or None (a wheel)."""
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


def _pop_index(argv: list[str]) -> tuple[list[str], str | None]:
    """Take --index FILE / --index=FILE out of argv (it may stand before the subcommand)."""
    out, chosen, i = [], None, 0
    while i < len(argv):
        a = argv[i]
        if a == "--index" and i + 1 < len(argv):
            chosen, i = argv[i + 1], i + 2
            continue
        if a.startswith("--index="):
            chosen, i = a.split("=", 1)[1], i + 1
            continue
        out.append(a)
        i += 1
    return out, chosen


def version_line(index_file: str | None = None) -> str:
    try:
        path = index_path(index_file)
        index = load_index(path)
        where = "bundled" if Path(path).resolve() == BUNDLED_INDEX else path
        return (f"faildex {__version__} · index {index['digest']} · {len(index['entries'])} entries "
                f"({where}) · prefilter {prefilter_name()}")
    except (OSError, ValueError) as err:
        return f"faildex {__version__} · index unavailable: {err}"


USAGE = __doc__.split("\n\n")[1]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = "faildex"
    if not argv or argv[0] in ("-h", "--help"):
        print(f"usage: {prog} COMMAND ...\n\n{USAGE}\n\nrepository tools (in a checkout): "
              + ", ".join(REPO_TOOLS))
        return 0 if argv else 2
    if argv[0] == "--version" or (argv[0].startswith("--index") and "--version" in argv):
        rest, chosen = _pop_index(argv)
        print(version_line(chosen))
        return 0
    cmd, rest = argv[0], argv[1:]
    if cmd in REPO_TOOLS:
        return _repo_tool(cmd, rest)
    if cmd not in ENGINE_COMMANDS:
        print(f"{prog}: unknown command {cmd!r}; one of: "
              f"{', '.join(ENGINE_COMMANDS + REPO_TOOLS)} (faildex --help)", file=sys.stderr)
        return 2
    if any(a in ("-h", "--help") for a in rest):
        return _run(cmd, rest, None)
    rest, chosen = _pop_index(rest)
    if cmd == "fleet":      # aggregates lines: no index needed
        return _run(cmd, rest, None)
    try:
        path = index_path(chosen)
    except ValueError as err:
        print(f"faildex {cmd}: cannot read the index: {err}", file=sys.stderr)
        return 2
    return _run(cmd, rest, path)


def _run(cmd: str, rest: list[str], path: str | None) -> int:
    if cmd == "diagnose":
        from .cli import main as diagnose_main
        return diagnose_main(rest, index_path=path)
    if cmd == "triage":
        from .triage import main as triage_main
        return triage_main(rest, index_path=path)
    from .fleet import main as fleet_main
    return fleet_main(rest)


def _repo_tool(cmd: str, rest: list[str]) -> int:
    root = checkout_root()
    if root is None:
        print(f"faildex {cmd}: a repository tool; run it inside a faildex checkout "
              f"(git clone, then make setup) or set FAILDEX_ROOT", file=sys.stderr)
        return 2
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        from generator.cli import main as repo_main
    except ImportError as err:
        print(f"faildex {cmd}: the repository tools need the site packages ({err.name} is "
              f"missing): pip install -e '.[site]' in {root}", file=sys.stderr)
        return 2
    return repo_main([cmd, *rest])
