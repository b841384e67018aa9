"""Scan one large file with several processes (the CLI only; Pyodide has one thread).

bytes.find runs at about 1 GB/s per anchor on one core, so a big file is cut at
line boundaries into one range per core; each range is scanned by a forked
process and the results are merged with line numbers shifted (scan.merge_ranges).
"""
from __future__ import annotations

import multiprocessing
import os

from .scan import WINDOW, Plan, Source

MIN_PARALLEL = 64 << 20   # below this, starting processes costs more than it saves
_PLAN: Plan | None = None


def split_points(path: str, size: int, parts: int) -> list[int]:
    """Offsets just after a newline, near size*i/parts; fewer parts if lines are huge."""
    points = [0]
    with open(path, "rb") as fh:
        for i in range(1, parts):
            fh.seek(size * i // parts)
            block = fh.read(4 << 20)
            nl = block.find(b"\n")
            if nl == -1:
                continue
            pos = size * i // parts + nl + 1
            if pos > points[-1] and pos < size:
                points.append(pos)
    return points + [size]


def _scan_range(path: str, name: str, order: int, start: int, end: int, collect_shapes: bool):
    with open(path, "rb") as fh:
        prev = b""
        if start:
            fh.seek(max(0, start - 2 * WINDOW))
            prev = fh.read(start - max(0, start - 2 * WINDOW))
        src = Source(name, order, _PLAN, collect_shapes, offset=start, prev_tail=prev)
        left = end - start
        while left > 0:
            chunk = fh.read(min(8 << 20, left))
            if not chunk:
                break
            left -= len(chunk)
            src.feed(chunk)
    return src.end_range(is_last=end >= os.path.getsize(path))


def scan_file(path: str, name: str, order: int, plan: Plan, collect_shapes: bool,
              workers: int) -> list[Source] | None:
    """The finished range scans of path, in order (Diagnosis.adopt_ranges merges them),
    or None when the file is better read serially."""
    global _PLAN
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as fh:
            magic = fh.read(2)
    except OSError:
        return None
    # gzip streams cannot be split; UTF-16 needs its BOM-aware decoder from byte 0
    if workers < 2 or size < MIN_PARALLEL or magic in (b"\x1f\x8b", b"\xff\xfe", b"\xfe\xff") or \
            "fork" not in multiprocessing.get_all_start_methods():
        return None
    points = split_points(path, size, workers)
    if len(points) < 3:
        return None
    _PLAN = plan
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(len(points) - 1) as pool:
        parts = pool.starmap(_scan_range, [(path, name, order, points[i], points[i + 1], collect_shapes)
                                           for i in range(len(points) - 1)])
    return parts
