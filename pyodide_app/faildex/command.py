"""`faildex`: the one command.

    faildex diagnose LOG...            name the failure (faildex diagnose --help)
    faildex triage PATH... -o OUT      one JSON line per job, in parallel, resumable
    faildex fleet report LINES... -o DIR   the fleet page (needs faildex[fleet])
    faildex run [--triage F] -- CMD... run a job; when it fails, say why at its log's end
    faildex --version                  release, index digest, entry count

Installed from the wheel, the index of the release is bundled inside. In a
checkout the index is compiled from entries/ (and cached), and the repository
tools are there too: validate, new, schema, index (generator/cli.py).
The index can be replaced with --index FILE or FAILDEX_INDEX=FILE (checked for
format and digest), e.g. the index.json a newer site publishes.
"""
from __future__ import annotations

import sys
from pathlib import Path

from . import __version__, load_index
from .indexfile import BUNDLED_INDEX, checkout_root, index_path
from .scan import prefilter_name

REPO_TOOLS = ("validate", "new", "schema", "index")
ENGINE_COMMANDS = ("diagnose", "triage", "fleet", "run")


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
    # `run`: what follows "--" is the job's own command line, its flags not ours
    mine, theirs = (rest[:rest.index("--")], rest[rest.index("--"):]) if cmd == "run" and "--" in rest else (rest, [])
    if any(a in ("-h", "--help") for a in mine):
        return _run(cmd, mine, None)
    rest, chosen = _pop_index(mine)
    rest += theirs
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
    if cmd == "run":
        from .run import main as run_main
        return run_main(rest, index_path=path)
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
