"""Read entry files safely, keeping the line and column of every value.

Entries come from strangers' pull requests, so reading one must be bounded
and must never execute or expand anything: the size is capped, the bytes must
be UTF-8, YAML aliases are refused before anything is built (a billion-laughs
file never expands), and duplicate keys are errors, not silent overrides.
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import io
import os
from dataclasses import dataclass, field
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import AliasEvent

MAX_ENTRY_BYTES = 512 * 1024  # the largest real entry is ~20 KB; big logs go in example files

Path_ = tuple  # a path into the entry: ("signatures", 0, "regex")


@dataclass(order=True)
class Problem:
    file: str
    line: int
    col: int
    code: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}: {self.code} {self.message}"


@dataclass
class Entry:
    path: Path                 # the YAML file
    rel: str                   # its path as shown in messages (entries/<cat>/<id>.yaml)
    data: dict                 # plain Python data
    positions: dict = field(default_factory=dict)  # path -> (line, col), 1-based, of the value
    key_positions: dict = field(default_factory=dict)  # path -> (line, col) of the key

    @property
    def id(self) -> str:
        return self.data.get("id") if isinstance(self.data.get("id"), str) else self.path.stem

    def pos(self, path: Path_) -> tuple[int, int]:
        """Best position for a path: the value, else its key, else the nearest parent."""
        path = tuple(path)
        while True:
            if path in self.positions:
                return self.positions[path]
            if path in self.key_positions:
                return self.key_positions[path]
            if not path:
                return (1, 1)
            path = path[:-1]

    def key_pos(self, path: Path_) -> tuple[int, int]:
        return self.key_positions.get(tuple(path)) or self.pos(path)

    def problem(self, path: Path_, code: str, message: str, at_key: bool = False) -> Problem:
        line, col = self.key_pos(path) if at_key else self.pos(path)
        return Problem(self.rel, line, col, code, message)


def _plain(node, path, positions, key_positions):
    """Convert ruamel's round-trip objects to plain data, recording positions."""
    if isinstance(node, CommentedMap):
        out = {}
        for k in node:
            child = path + (k,)
            try:
                kl, kc = node.lc.key(k)
                key_positions[child] = (kl + 1, kc + 1)
                vl, vc = node.lc.value(k)
                positions[child] = (vl + 1, vc + 1)
            except (KeyError, TypeError, AttributeError):
                pass
            out[k] = _plain(node[k], child, positions, key_positions)
        return out
    if isinstance(node, CommentedSeq):
        out = []
        for i, v in enumerate(node):
            child = path + (i,)
            try:
                line, col = node.lc.item(i)
                positions[child] = (line + 1, col + 1)
            except (KeyError, TypeError, AttributeError):
                pass
            out.append(_plain(v, child, positions, key_positions))
        return out
    if isinstance(node, str):
        return str(node)
    return node


def _mark(err) -> tuple[int, int]:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    if mark is None:
        return (1, 1)
    return (mark.line + 1, mark.column + 1)


try:  # PyYAML (an mkdocs dependency) with libyaml: a C event scanner, ~30x faster
    import yaml as _pyyaml
    _C_SCAN = bool(getattr(_pyyaml, "__with_libyaml__", False))
except ImportError:  # pragma: no cover
    _pyyaml, _C_SCAN = None, False


def _surely_no_alias(text: str) -> bool:
    """True when libyaml parses the whole text and meets no alias. Anything else (an
    alias, a syntax error, no libyaml) leaves the decision to ruamel's own pass below."""
    if "*" not in text:
        return True  # an alias always starts with *
    if not _C_SCAN:
        return False
    try:
        return not any(isinstance(ev, _pyyaml.AliasEvent)
                       for ev in _pyyaml.parse(text, Loader=_pyyaml.CSafeLoader))
    except Exception:
        return False


def _syntax_problem(err: YAMLError, rel: str) -> Problem:
    if isinstance(err, MarkedYAMLError):
        line, col = _mark(err)
        return Problem(rel, line, col, "FDX001", f"YAML syntax error: {err.problem or err.context}")
    return Problem(rel, 1, 1, "FDX001", f"YAML syntax error: {err}")


class _NotPlain(Exception):
    """The fast reading met something only ruamel's own load decides (a duplicate key, a
    tag, a value that is not a string, a boolean or null): that file is read again by it."""


if _C_SCAN:
    from ruamel.yaml.nodes import ScalarNode as _RScalarNode
    from ruamel.yaml.resolver import VersionedResolver as _Resolver12
    _RESOLVER_12 = _Resolver12(version=(1, 2))    # how ruamel's own load reads a plain scalar
    _RESOLVE_12 = _RESOLVER_12.resolve
    # the first characters its implicit types (bool, int, float, null, ...) can start with
    _NOT_STR_FIRST = (None if None in _RESOLVER_12.versioned_resolver
                      else frozenset(k for k in _RESOLVER_12.versioned_resolver if k))
    _TAG = "tag:yaml.org,2002:"
    _BOOL = {"true": True, "false": False}
    _NULL = {"~", "null", "Null", "NULL"}


def _fast_plain(node, path, positions, key_positions, text, seen):
    """The data and positions ruamel's round-trip load and _plain give, from libyaml's
    node tree (~40x faster: most of a large site's build was ruamel reading entries)."""
    if id(node) in seen:
        raise _NotPlain     # an alias (compose shares the anchored node; never expanded here)
    seen.add(id(node))
    if text.startswith("!", node.start_mark.index):
        raise _NotPlain                     # an explicit tag
    if isinstance(node, _pyyaml.ScalarNode):
        value = node.value
        if node.style:                      # quoted or block: a string
            return value
        if not value:
            raise _NotPlain                 # an empty value: ruamel places it elsewhere
        # libyaml resolved it by YAML 1.1 ("on" is a boolean there); ruamel reads 1.2
        if _NOT_STR_FIRST is not None and value[0] not in _NOT_STR_FIRST:
            tag = _TAG + "str"
        else:
            tag = str(_RESOLVE_12(_RScalarNode, value, (True, False)))
        if tag == _TAG + "str":
            return value
        if tag == _TAG + "bool" and value.lower() in _BOOL:
            return _BOOL[value.lower()]
        if tag == _TAG + "null" and value in _NULL:
            return None
        raise _NotPlain                     # numbers, timestamps: ruamel's constructors decide
    if isinstance(node, _pyyaml.MappingNode):
        out = {}
        for knode, vnode in node.value:
            if not isinstance(knode, _pyyaml.ScalarNode):
                raise _NotPlain
            k = _fast_plain(knode, path, {}, {}, text, seen)
            if k in out:
                raise _NotPlain             # duplicate key: ruamel's error names it
            child = path + (k,)
            key_positions[child] = (knode.start_mark.line + 1, knode.start_mark.column + 1)
            positions[child] = (vnode.start_mark.line + 1, vnode.start_mark.column + 1)
            out[k] = _fast_plain(vnode, child, positions, key_positions, text, seen)
        return out
    if isinstance(node, _pyyaml.SequenceNode):
        out = []
        for i, v in enumerate(node.value):
            child = path + (i,)
            positions[child] = (v.start_mark.line + 1, v.start_mark.column + 1)
            out.append(_fast_plain(v, child, positions, key_positions, text, seen))
        return out
    raise _NotPlain


def _read_fast(text: str):
    """(data, positions, key_positions) read by libyaml, or None when ruamel must decide
    (an alias, a syntax error, a duplicate key, a tag, a number)."""
    if not _C_SCAN:
        return None
    try:
        node = _pyyaml.compose(text, Loader=_pyyaml.CSafeLoader)
        positions: dict = {}
        key_positions: dict = {}
        data = None if node is None else _fast_plain(node, (), positions, key_positions, text, set())
        return data, positions, key_positions
    except (_NotPlain, _pyyaml.YAMLError, RecursionError):
        return None


def read_yaml_text(text: str, rel: str) -> tuple[object, dict, dict, list[Problem]]:
    """Parse YAML text; return (data, positions, key_positions, problems)."""
    fast = _read_fast(text)
    if fast is not None:
        return (*fast, [])
    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    # Refuse aliases before constructing anything: no expansion bombs, and an entry
    # stays readable on its own. (The pure-Python event pass costs as much as the load
    # itself, so it runs only when the C scan cannot rule aliases out.)
    try:
        for event in ([] if _surely_no_alias(text) else yaml.parse(io.StringIO(text))):
            if isinstance(event, AliasEvent):
                line, col = event.start_mark.line + 1, event.start_mark.column + 1
                return None, {}, {}, [Problem(rel, line, col, "FDX022",
                                              "YAML alias (*name) is not allowed in entries: "
                                              "write the value out")]
    except YAMLError as err:
        return None, {}, {}, [_syntax_problem(err, rel)]
    try:
        node = yaml.load(text)
    except DuplicateKeyError as err:
        line, col = _mark(err)
        key = (err.problem or "").split('"')[1] if '"' in (err.problem or "") else "a key"
        return None, {}, {}, [Problem(rel, line, col, "FDX021",
                                      f"duplicate key {key!r}: each key may appear once; merge the two")]
    except YAMLError as err:
        return None, {}, {}, [_syntax_problem(err, rel)]
    positions: dict = {}
    key_positions: dict = {}
    data = _plain(node, (), positions, key_positions)
    return data, positions, key_positions, []


def load_entry(path: Path, root: Path) -> tuple[Entry | None, list[Problem]]:
    try:
        rel = str(path.relative_to(root))
    except ValueError:
        rel = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_ENTRY_BYTES:
            return None, [Problem(rel, 1, 1, "FDX023",
                                  f"file is {size // 1024} KB; entries are capped at "
                                  f"{MAX_ENTRY_BYTES // 1024} KB: move large logs to "
                                  f"example files in a folder named after the entry")]
        raw = path.read_bytes()
    except OSError as err:
        return None, [Problem(rel, 1, 1, "FDX024", f"cannot read file: {err.strerror}")]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        col = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        return None, [Problem(rel, line, col, "FDX024",
                              f"not UTF-8 (byte 0x{raw[err.start]:02x}): save the file as UTF-8")]
    if text.startswith("\ufeff"):
        text = text[1:]
    data, positions, key_positions, problems = read_yaml_text(text, rel)
    if problems:
        return None, problems
    if not isinstance(data, dict):
        return None, [Problem(rel, 1, 1, "FDX029",
                              "an entry must be a YAML mapping of fields (id:, title:, ...); "
                              "run `faildex new <category>/<id>` for a template")]
    return Entry(path, rel, data, positions, key_positions), []


def entry_files(entries_dir: Path) -> list[Path]:
    """Every entry file: entries/<category>/<id>.yaml (sorted, deterministic)."""
    return sorted(p for p in entries_dir.glob("*/*.yaml") if p.is_file())


def load_all(root: Path) -> tuple[list[Entry], list[Problem]]:
    entries: list[Entry] = []
    problems: list[Problem] = []
    edir = root / "entries"
    for p in sorted(edir.glob("*/*.yml")):
        problems.append(Problem(str(p.relative_to(root)), 1, 1, "FDX030",
                                "entry files end in .yaml: rename it"))
    for path in entry_files(edir):
        entry, probs = load_entry(path, root)
        problems.extend(probs)
        if entry:
            entries.append(entry)
    return entries, problems


PARALLEL_FROM = 200   # entries; below this one process reads them faster than a pool


def _load_chunk(job: tuple[list[str], str]):
    paths, root = job
    return [load_entry(Path(p), Path(root)) for p in paths]


def load_all_parallel(root: Path, jobs: int | None = None,
                      parallel_from: int = PARALLEL_FROM) -> tuple[list[Entry], list[Problem]]:
    """load_all(root), with ruamel's YAML parsing (most of the build time for thousands
    of entries) spread over processes: same entries in the same order, same problems.
    With libyaml (_read_fast) one process is faster: 3,000 entries in 4 s, 7 s in a pool."""
    root = Path(root)
    files = entry_files(root / "entries")
    jobs = jobs or min(os.cpu_count() or 1, 16)
    if jobs < 2 or len(files) < parallel_from or _C_SCAN:
        return load_all(root)
    # The folder check of load_all, then its per-file loading, in a pool.
    problems = [Problem(str(p.relative_to(root)), 1, 1, "FDX030", "entry files end in .yaml: rename it")
                for p in sorted((root / "entries").glob("*/*.yml"))]
    chunks = [files[i::jobs * 4] for i in range(jobs * 4)]
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(_load_chunk, [([str(p) for p in c], str(root)) for c in chunks if c]))
    loaded = {str(entry.path) if entry else f"!{n}": (entry, probs)
              for n, (entry, probs) in enumerate(r for chunk in results for r in chunk)}
    entries: list[Entry] = []
    for entry, probs in loaded.values():
        problems.extend(probs)
        if entry:
            entries.append(entry)
    order = {str(p): i for i, p in enumerate(files)}
    entries.sort(key=lambda e: order[str(e.path)])
    return entries, problems


def replace_cached(path: Path, text: str, stale: str) -> None:
    """Write a keyed cache file in .cache/ and drop the other keys' files (the glob stale,
    in path's folder). Several processes of one test run may write the same key at once:
    each writes its own temporary file, and none removes the file it may have just written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for old in path.parent.glob(stale):
        if old != path:
            old.unlink(missing_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def source_digest(root: Path, also: tuple[str, ...] = ()) -> str:
    """A cheap fingerprint of everything the index depends on (and of the files named by
    the globs in also: what validation reads besides, see validate.VALIDATION_ALSO)."""
    h = hashlib.sha256()
    files = sorted((root / "entries").rglob("*"))   # entries, their examples, and entries/healthy/
    files += sorted((root / "generator").glob("*.py"))
    # the engine modules the build imports (reason.tokens, lines, context, scan's anchors): an
    # engine edit must not leave `faildex diagnose` a stale index
    files += sorted((root / "pyodide_app" / "faildex").glob("*.py"))
    for pattern in also:
        files += sorted(root.glob(pattern))
    for p in files:
        if p.is_file():
            st = p.stat()
            h.update(f"{p.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]
