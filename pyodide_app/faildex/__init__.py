"""faildex engine: name the failure that started it all, from plain logs.

Pure Python, standard library only: the same code runs in the CLI and, under
Pyodide, in the reader's browser. The API is plain data in, plain data out:

    from faildex import diagnose, load_index
    report = diagnose(["rank0.log", "rank1.log.gz"], load_index("index.json"))
    report["primary"]  # {"id": ..., "title": ..., "confidence": ...} or None

Callers that stream (the browser worker) use Diagnosis directly:

    d = Diagnosis(index)
    d.feed("rank0.log", chunk_bytes); ...; d.close("rank0.log")
    d.add_dump("nccl_trace_rank_0", dump_bytes)   # flight-recorder or stack dump
    report = d.report()
"""
from __future__ import annotations

import gzip
import json
import sys
import zlib

from .frdump import DumpError
from .reason import REPORT_FORMAT, build_report
from .scan import Source, merge_ranges, plan_for
from .suspects import Artifacts, is_artifact

__all__ = ["Diagnosis", "diagnose", "load_index", "read_chunks", "InputError", "DumpError",
           "REPORT_FORMAT", "__version__"]

__version__ = "0.1.0"   # the release; pyproject.toml reads it from here
INDEX_FORMAT = 3
CHUNK = 8 << 20


class InputError(Exception):
    """An input that cannot be read at all (missing, a directory, no permission)."""


def index_digest(index: dict) -> str:
    """The digest generator/index.py stamps on an index: sha256 of the rest, sorted keys."""
    import hashlib
    body = {k: v for k, v in index.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def load_index(path_or_dict) -> dict:
    """An index from a dict or a JSON file. A file is checked: its format, and that
    its digest matches its content (a truncated or edited index is refused)."""
    if isinstance(path_or_dict, dict):
        index = path_or_dict
    else:
        try:
            with open(path_or_dict, encoding="utf-8") as fh:
                index = json.load(fh)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path_or_dict}: not JSON (line {err.lineno}: {err.msg})") from None
        except UnicodeDecodeError:
            raise ValueError(f"{path_or_dict}: not a UTF-8 JSON file") from None
        if not isinstance(index, dict) or "digest" not in index:
            raise ValueError(f"{path_or_dict}: not a faildex index (no digest)")
        if index.get("faildex_index") == INDEX_FORMAT and index_digest(index) != index["digest"]:
            raise ValueError(f"{path_or_dict}: digest mismatch (the file says {index['digest']}, "
                             f"its content gives {index_digest(index)}): a damaged or edited index")
    if not isinstance(index, dict) or index.get("faildex_index") != INDEX_FORMAT:
        raise ValueError("unsupported index format: this faildex reads format "
                         f"{INDEX_FORMAT}; rebuild it with `faildex index` or upgrade faildex")
    return index


class Diagnosis:
    """Incremental diagnosis over any number of named inputs."""

    def __init__(self, index: dict, baseline: bool = False):
        self.index = index
        self.plan = plan_for(index, baseline_mode=baseline)
        self.baseline_mode = baseline
        self.sources: dict[str, Source] = {}
        self.baseline_sources: dict[str, Source] = {}
        self.artifacts = Artifacts()

    def _source(self, name: str, is_baseline: bool) -> Source:
        table = self.baseline_sources if is_baseline else self.sources
        if name not in table:
            order = len(self.sources) + len(self.baseline_sources)
            table[name] = Source(name, order, self.plan, collect_shapes=self.baseline_mode)
        return table[name]

    def order_of(self, name: str) -> int:
        """Input `name`'s place among the inputs (the order its findings are told in)."""
        return self._source(name, False).order

    def feed(self, name: str, chunk: bytes, baseline: bool = False) -> None:
        self._source(name, baseline).feed(bytes(chunk))

    def close(self, name: str, truncated: str | None = None, baseline: bool = False) -> None:
        self._source(name, baseline).close(truncated)

    def scan_range(self, name: str, offset: int, prev_tail: bytes = b"") -> Source:
        """A scan of one range of input `name` that starts at byte `offset` (just after
        a newline); prev_tail is the input's bytes just before it (for context lines).
        Feed it with .feed(bytes), finish it with .end_range(is_last), and give the
        parts of one input, in order, to adopt_ranges(). Ranges can be scanned in other
        processes or workers: a finished part holds plain data only."""
        order = self.order_of(name)
        return Source(name, order, self.plan, self.baseline_mode, offset=offset,
                      prev_tail=bytes(prev_tail))

    def adopt_ranges(self, name: str, parts: list, baseline: bool = False) -> None:
        """Merge the finished range scans of one input (in input order) into its result."""
        merged = merge_ranges(list(parts))
        merged.plan = self.plan
        (self.baseline_sources if baseline else self.sources)[name] = merged
    def add_dump(self, name: str, data: bytes) -> str:
        """A flight-recorder dump (pickle or JSON) or a py-spy/faulthandler stack dump of one
        rank, whole; the rank comes from the name. Returns what it was read as; raises
        DumpError (one line, naming the file) for anything else or anything unsafe."""
        return self.artifacts.add(name, bytes(data))

    def report(self) -> dict:
        base = list(self.baseline_sources.values()) if self.baseline_mode else None
        report = build_report(self.index, list(self.sources.values()), base, self.artifacts)
        report["inputs"] += self.artifacts.inputs
        # which faildex and which index made it ("index" is the index's digest)
        report["release"] = __version__
        report["index_entries"] = len(self.index["entries"])
        return report


def read_chunks(path: str, chunk_size: int = CHUNK):
    """Yield (bytes, None) chunks of a file, stdin ('-') or .gz; a final
    (b'', message) when a compressed stream ends early. Raises InputError when the
    input cannot be opened."""
    import os
    if path == "-":
        stream = sys.stdin.buffer
    else:
        if os.path.isdir(path):
            raise InputError(f"{path}: is a directory")
        try:
            stream = open(path, "rb")
        except FileNotFoundError:
            raise InputError(f"{path}: no such file") from None
        except PermissionError:
            raise InputError(f"{path}: permission denied") from None
        except OSError as err:
            raise InputError(f"{path}: {err.strerror}") from None
    try:
        head = stream.peek(2)[:2] if hasattr(stream, "peek") else b""
        if head == b"\x1f\x8b":
            yield from _gunzip(stream, chunk_size)
            return
        while True:
            try:
                chunk = stream.read(chunk_size)
            except OSError as err:
                yield b"", f"read error after some data: {err.strerror or err}"
                return
            if not chunk:
                return
            yield chunk, None
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _gunzip(stream, chunk_size: int):
    """Decompress gzip members one chunk at a time; report truncation, keep what was read."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    while True:
        raw = stream.read(chunk_size // 4)
        if not raw:
            if not d.eof:
                yield b"", "the .gz file is truncated: diagnosed what could be read"
            return
        try:
            out = d.decompress(raw, chunk_size * 4)
            while True:
                if out:
                    yield out, None
                if d.unconsumed_tail:
                    out = d.decompress(d.unconsumed_tail, chunk_size * 4)
                    continue
                break
            while d.eof and d.unused_data:   # concatenated gzip members
                rest = d.unused_data
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                out = d.decompress(rest, chunk_size * 4)
                if out:
                    yield out, None
        except zlib.error as err:
            yield b"", f"the .gz data is corrupt ({err}): diagnosed what could be read"
            return


def _read_dump(d: Diagnosis, path: str) -> bool:
    """Give a dump file to d whole. True for a flight-recorder dump or an NCCL RAS JSON
    status (read only as dumps); False for a log, and for a stack dump, which is read as
    a log too (a faulthandler block often sits inside a rank's stderr)."""
    from .frdump import MAX_DUMP_BYTES
    try:
        with open(path, "rb") as fh:
            head = fh.read(8192)
            kind = None if head[:2] == b"\x1f\x8b" else is_artifact(head)
            if kind is None:
                return False
            data = head + fh.read(MAX_DUMP_BYTES + 1 - len(head))
    except OSError:
        return False     # the log reader reports it
    try:
        d.add_dump(path, data)
    except DumpError as err:
        raise InputError(str(err)) from None
    return kind in ("fr", "ras")


def diagnose(paths, index, baseline=None, progress=None, workers: int = 1) -> dict:
    """Diagnose files (paths, '-' for stdin). baseline: paths of a good run.
    progress(bytes_done) is called after each chunk. workers > 1 scans large plain
    files with that many processes (native only). Raises InputError."""
    index = load_index(index)
    d = Diagnosis(index, baseline=bool(baseline))
    done = 0
    for group, is_base in ((list(baseline or []), True), (list(paths), False)):
        for path in group:
            name = "<stdin>" if path == "-" else str(path)
            if not is_base and path != "-" and _read_dump(d, str(path)):
                continue
            src = d._source(name, is_base)
            if workers > 1 and path != "-":
                from .parallel import scan_file
                parts = scan_file(str(path), name, src.order, d.plan, src.collect_shapes, workers)
                if parts is not None:
                    done += sum(p.bytes for p in parts)
                    d.adopt_ranges(name, parts, baseline=is_base)
                    if progress:
                        progress(done)
                    continue
            truncated = None
            for chunk, message in read_chunks(path):
                if message:
                    truncated = message
                    break
                d.feed(name, chunk, baseline=is_base)
                done += len(chunk)
                if progress:
                    progress(done)
            d.close(name, truncated=truncated, baseline=is_base)
    return d.report()
