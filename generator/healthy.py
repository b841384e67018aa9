"""The healthy corpus: real output of runs that did not fail (entries/healthy/).

It is product data, not a test fixture: the validator rejects a defining or
supporting signature that matches one of its lines (FDX016) and a context
signature that matches most lines of one log (FDX035); the index chooses the
scanner's anchors so that lines healthy jobs print by the hundred thousand are
not candidates, and records the candidate rate each healthy log gets.

Lines are read the way the engine reads them: split on \\n and \\r, ANSI colour
codes removed. Signatures are tried on the whole line and on the line with its
launcher prefixes (`[rank3]:`, timestamps, `srun -l`) peeled off.
"""
from __future__ import annotations

import bisect
import re
import sys
from collections import Counter
from functools import cached_property
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEALTHY_DIR = Path("entries") / "healthy"
_DIGITS = re.compile(r"[0-9]+")
GRAM = 4


def engine_module(name: str):
    """A module of the engine (pure Python, beside the generator in this checkout)."""
    import importlib
    if str(ROOT / "pyodide_app") not in sys.path:
        sys.path.insert(0, str(ROOT / "pyodide_app"))
    return importlib.import_module(f"faildex.{name}")


def _engine_lines():
    lines = engine_module("lines")
    return lines.parse_prefix, lines.strip_ansi


def fold(text: str) -> str:
    """Digits folded to one 0: lines that differ only in numbers share a shape."""
    return _DIGITS.sub("0", text)


class HealthyCorpus:
    def __init__(self, root: Path):
        parse_prefix, strip_ansi = _engine_lines()
        self.files: dict[str, list[str]] = {}
        for path in sorted((root / HEALTHY_DIR).glob("*.log")):
            raw = path.read_text(encoding="utf-8", errors="replace")
            self.files[str(path.relative_to(root))] = [strip_ansi(x) for x in re.split(r"\r\n|\n|\r", raw)
                                                       if x.strip()]
        self._parse_prefix = parse_prefix
        self._stats: dict[str, tuple[int, float]] = {}
        self._peeled: dict[str, str] = {}      # line -> the line with its prefixes peeled off

    def __bool__(self) -> bool:
        return bool(self.files)

    @property
    def total_lines(self) -> int:
        return sum(len(v) for v in self.files.values())

    @property
    def total_bytes(self) -> int:
        return sum(len(x) + 1 for v in self.files.values() for x in v)

    def lines_containing(self, literal: str):
        """(file, line number, line) of every line that contains literal, in file order."""
        groups, order = self._shapes[2], {name: i for i, name in enumerate(self.files)}
        found = [hit for i in self._shapes_holding(fold(literal)) for hit in groups[i] if literal in hit[2]]
        return sorted(found, key=lambda hit: (order[hit[0]], hit[1]))

    def matches(self, rx: re.Pattern, literal: str = ""):
        """Lines the signature regex matches, whole or with prefixes peeled off."""
        source = self.lines_containing(literal) if literal else (
            (name, n, line) for name, lines in self.files.items() for n, line in enumerate(lines, 1))
        peeled = self._peeled
        for name, n, line in source:
            if rx.search(line):
                yield name, n, line
                continue
            rest = peeled.get(line)
            if rest is None:
                rest = peeled[line] = self._parse_prefix(line)[1]
            if rest != line and rx.search(rest):
                yield name, n, line

    # ---- the folded-shape index (digits folded, identical shapes counted once): the
    # lookups above and the anchor statistics below go through it

    @cached_property
    def _shapes(self) -> tuple[str, list[int], list[list[tuple[str, int, str]]]]:
        """The distinct shapes joined one per line, their start offsets, and each
        shape's lines as (file, line number, line)."""
        groups: dict[str, list[tuple[str, int, str]]] = {}
        for name, lines in self.files.items():
            for n, line in enumerate(lines, 1):
                groups.setdefault(fold(line), []).append((name, n, line))
        shapes = sorted(groups)
        starts, pos = [], 0
        for s in shapes:
            starts.append(pos)
            pos += len(s) + 1
        return "\n".join(shapes), starts, [groups[s] for s in shapes]

    @cached_property
    def _shape_list(self) -> list[str]:
        return self._shapes[0].split("\n")

    @cached_property
    def _grams(self) -> dict[str, list[int]]:
        """4-gram -> the shapes that hold it (an inverted index for hit_stats)."""
        grams: dict[str, list[int]] = {}
        for i, shape in enumerate(self._shape_list):
            for g in {shape[j:j + GRAM] for j in range(len(shape) - GRAM + 1)}:
                grams.setdefault(g, []).append(i)
        return grams

    def _shapes_holding(self, needle: str) -> list[int]:
        """The shapes that contain needle (already folded)."""
        if len(needle) >= GRAM:
            # the shapes that hold the needle's rarest 4-gram, checked one by one
            postings = min((self._grams.get(needle[i:i + GRAM], ()) for i in range(len(needle) - GRAM + 1)),
                           key=len)
            shapes = self._shape_list
            return [i for i in postings if needle in shapes[i]]
        text, starts, _ = self._shapes
        hits, pos = [], text.find(needle)
        while pos != -1:
            i = bisect.bisect_right(starts, pos) - 1
            if not hits or hits[-1] != i:
                hits.append(i)
            pos = text.find(needle, pos + 1)
        return hits

    def hit_stats(self, sub: str) -> tuple[int, float]:
        """(lines holding sub in the whole corpus, the highest fraction of one log's lines)."""
        if sub in self._stats:
            return self._stats[sub]
        groups = self._shapes[2]
        # A line that holds sub has a shape that holds fold(sub) (a digit run of sub is
        # part of one of the line's); with digits in sub, "to 1" must not count "to 2".
        exact = any(ch.isdigit() for ch in sub)
        per_file: dict[str, int] = {}
        for i in self._shapes_holding(fold(sub)):
            for name, _, line in groups[i]:
                if not exact or sub in line:
                    per_file[name] = per_file.get(name, 0) + 1
        total = sum(per_file.values())
        worst = max((c / len(self.files[n]) for n, c in per_file.items()), default=0.0)
        self._stats[sub] = (total, worst)
        return self._stats[sub]

    @cached_property
    def _byte_share(self) -> list[dict[str, float]]:
        """Per log of at least 100 lines: each character's share of its text."""
        out = []
        for lines in self.files.values():
            if len(lines) >= 100:
                text = "\n".join(lines)
                out.append({ch: n / len(text) for ch, n in Counter(text).items()})
        return out

    def char_freq(self, ch: str) -> float:
        """A character's share in the logs that print it most (the third highest of the
        logs, so that one odd log does not decide): what a scan for it meets on a bad day."""
        shares = sorted((d.get(ch, 0.0) for d in self._byte_share), reverse=True)
        return shares[min(2, len(shares) - 1)] if shares else 0.0
