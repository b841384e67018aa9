"""The repository tools of `faildex`: validate, new, schema, index.

`faildex` itself is faildex.command (diagnose, triage, fleet); from a
checkout it hands these subcommands here. This module imports nothing of the
engine's commands, so the two packages never import each other in a circle."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from . import schema as S


def find_root(start: Path | None = None) -> Path:
    """The faildex checkout: the folder holding entries/ (cwd upwards, then this package's)."""
    env = os.environ.get("FAILDEX_ROOT")
    if env:
        return Path(env).resolve()
    for base in [Path(start or Path.cwd()).resolve(), Path(__file__).resolve().parent.parent]:
        for p in [base, *base.parents]:
            if (p / "entries").is_dir() and (p / "generator").is_dir():
                return p
    raise SystemExit("faildex: no entries/ folder found; run inside the faildex checkout "
                     "or set FAILDEX_ROOT")


def cmd_validate(args) -> int:
    from .validate import remember_passed, validate
    root = find_root()
    entries, problems = validate(root)
    if not problems:
        remember_passed(root)
    for p in problems:
        print(p)
    cats = {e.data.get("category") for e in entries}
    if problems:
        print(f"faildex validate: {len(problems)} problem(s) in {len({p.file for p in problems})} "
              f"file(s) ({len(entries)} entries read)", file=sys.stderr)
        return 1
    print(f"faildex validate: {len(entries)} entries in {len(cats)} categories, no problems")
    coverage = root / "tests" / "coverage.yaml"
    if coverage.is_file():
        from ruamel.yaml import YAML
        wanted = YAML(typ="safe").load(coverage.read_text(encoding="utf-8")) or {}
        have = {e.id for e in entries}
        ids = [i for group in wanted.values() for i in group]
        missing = [i for i in ids if i not in have]
        print(f"coverage: {len(ids) - len(missing)}/{len(ids)} failure classes of "
              f"tests/coverage.yaml have an entry" + (f"; missing: {', '.join(missing)}" if missing else ""))
    return 0


def cmd_schema(args) -> int:
    text = json.dumps(S.json_schema(), indent=2, ensure_ascii=False) + "\n"
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


# Placeholder values of `faildex new`: every one is valid YAML of the field's type, so
# the scaffold parses and `faildex validate` points at what to fill in, not at syntax.
PLACEHOLDERS: dict[str, object] = {
    "title": "TODO the failure as a reader would search for it",
    "severity": "high",
    "systems": ["TODO"],
    "quick_answer": "TODO the cause, and the first thing to do.",
    "root_cause": "TODO the mechanism.",
    "symptoms": [{"see": "TODO what the user sees", "why": "TODO why this failure produces it"}],
    "signatures": [{"id": "todo-signature", "regex": "TODO exact text the software prints",
                    "strength": "defining",
                    "source": "TODO upstream file or the URL of a real report that prints it"}],
    "confirm": [{"do": "TODO a check", "command": "TODO the command"}],
    "fix": [{"do": "TODO the fix", "command": "TODO the command or setting",
             "why": "TODO why it works"}],
    "verify": "TODO how to prove the fix worked",
    "prevent": ["TODO"],
    "references": [{"title": "TODO", "url": "https://TODO.example/"}],
    "examples": [{"source": "TODO reproduced: how, or the URL of the report",
                  "log": "TODO paste the log as printed\n"},
                 {"source": "TODO", "log": "TODO\n"}],
}


def _yaml_field(key: str, value, indent: int, lead: str = "") -> str:
    text = _yaml_value(value, indent)
    return f"{lead}{key}:{'' if text.startswith(chr(10)) else ' '}{text}"


def _yaml_value(value, indent: int) -> str:
    """value as block YAML (strings JSON-quoted: always valid, whatever they hold)."""
    pad = " " * indent
    if isinstance(value, str):
        if value.endswith("\n"):
            return "|\n" + "".join(f"{pad}  {ln}\n" for ln in value.splitlines())
        return (value if re.fullmatch(S.KEBAB, value) else json.dumps(value)) + "\n"
    if isinstance(value, list):
        out = "\n"
        for item in value:
            if isinstance(item, dict):
                first = True
                for k, v in item.items():
                    lead = f"{pad}- " if first else f"{pad}  "
                    out += _yaml_field(k, v, indent + 4, lead)
                    first = False
            else:
                out += f"{pad}- {_yaml_value(item, indent + 2)}"
        return out
    return json.dumps(value) + "\n"


def entry_template(eid: str, category: str, schema_path: str) -> str:
    """The scaffold of a new entry: required fields, in the order of the page sections
    (generator/schema.py ENTRY_SECTIONS) that show them, each under its section's name."""
    head = {"id": eid, "title": PLACEHOLDERS["title"], "category": category,
            "severity": PLACEHOLDERS["severity"], "systems": PLACEHOLDERS["systems"]}
    out = [f"# yaml-language-server: $schema={schema_path}\n",
           "# Format: CONTRIBUTING.md and the site's Contributing page. Check: faildex validate\n"]
    out += [_yaml_field(k, v, 2) for k, v in head.items()]
    done = set(head)
    for sec in S.ENTRY_SECTIONS:
        fields = [f for f in sec.fields if f not in done and f in PLACEHOLDERS]
        if not fields:
            continue
        out.append(f"# {sec.heading}: {sec.doc}\n")
        for f in fields:
            out.append(_yaml_field(f, PLACEHOLDERS[f], 2))
            done.add(f)
    missing = [f.name for f in S.ENTRY.fields if f.required and f.name not in done]
    assert not missing, f"no placeholder for required field(s) {missing}"
    return "".join(out)


def cmd_new(args) -> int:
    root = find_root()
    try:
        category, eid = args.name.split("/", 1)
    except ValueError:
        print("faildex new: give <category>/<id>, e.g. nccl/nccl-wrong-interface", file=sys.stderr)
        return 2
    import re
    if category not in S.CATEGORIES:
        print(f"faildex new: unknown category {category!r}; one of: {', '.join(S.CATEGORIES)}",
              file=sys.stderr)
        return 2
    if not re.match(S.KEBAB, eid):
        print(f"faildex new: {eid!r} is not kebab-case (e.g. nccl-wrong-interface)", file=sys.stderr)
        return 2
    path = root / "entries" / category / f"{eid}.yaml"
    existing = list((root / "entries").glob(f"*/{eid}.yaml"))
    if existing:
        print(f"faildex new: {existing[0].relative_to(root)} already exists (ids are unique)",
              file=sys.stderr)
        return 2
    path.parent.mkdir(parents=True, exist_ok=True)
    schema_rel = os.path.relpath(root / "generator" / "entry.schema.json", path.parent)
    path.write_text(entry_template(eid, category, schema_rel), encoding="utf-8")
    print(f"created {path.relative_to(root)}; fill in the TODOs, then run: faildex validate")
    return 0


def cmd_index(args) -> int:
    from .index import build_index_or_exit
    root = find_root()
    index = build_index_or_exit(root)
    out = Path(args.output) if args.output else root / ".cache" / "index.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(index, sort_keys=True, separators=(",", ":")), encoding="utf-8")
    print(f"wrote {out} ({len(index['entries'])} entries, {len(index['signatures'])} signatures, "
          f"{len(index['anchors'])} anchors, {len(index['passes'])} passes)")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="faildex", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("validate", help="check every entry; file:line:col: CODE message")
    p = sub.add_parser("schema", help="print the JSON Schema of an entry")
    p.add_argument("-o", "--output")
    p = sub.add_parser("new", help="scaffold entries/<category>/<id>.yaml")
    p.add_argument("name", metavar="CATEGORY/ID")
    p = sub.add_parser("index", help="compile the engine's index JSON")
    p.add_argument("-o", "--output")
    args = ap.parse_args(argv)
    return {"validate": cmd_validate, "schema": cmd_schema, "new": cmd_new,
            "index": cmd_index}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
