"""Streaming scan: bytes in, findings out, memory bounded whatever the input.

The hot loop never looks at every line. For each chunk it runs one pass per key
byte of the literal anchors (chosen at build time, generator.regexes.
choose_anchors, so that every signature contains one anchor and the keys are bytes
healthy jobs rarely print): memchr finds the key, one regex tries the anchors
there. Only the lines around a hit are decoded and tested against the signatures
that own the anchors on that line. Lines are split on \\n and \\r, so tqdm's
carriage-return progress lines and CRLF files read naturally; a line longer than
WINDOW on either side of a hit is read as a window, never whole.
"""
from __future__ import annotations

import codecs
import os
import re
from bisect import bisect_right
from collections import Counter
from itertools import accumulate, compress, repeat
from operator import add, itemgetter, sub

from . import context
from .lines import fold, parse_prefix, strip_ansi
from .job import JOB_ANCHORS, TRACEBACK_LINES, JobLines
from .job import LAUNCHER_BANNER as JOB_BANNER
from .job import WORDS as JOB_WORDS
from .suspects import FRAME_BYTES, SCAN_ANCHORS, HangLines
from .suspects import WORDS as HANG_WORDS

HEAD_LINES_BYTES = 256 << 10   # bytes of a range's start read for the lines that end the range before's
WINDOW = 4096            # bytes kept on each side of a hit inside a very long line
MAX_CARRY = 1 << 20      # a partial line longer than this is scanned in windows
HEAD_BYTES = 2 << 20     # context (versions, launcher) is read from every line here
HEAD_KEY_LINES = 256     # ... but from at most this many lines per context key or signature
HEAD_SLICE = 128 << 10   # the head is read in slices; each drops the words read enough
CONTEXT_LINES = 2        # evidence lines shown before and after a finding
KEEP_FIRST = 3           # findings kept per signature and source (plus the last one)
MAX_SHAPES = 200_000     # distinct line shapes kept for --baseline
MAX_ERROR_SAMPLES = 12   # error lines kept per input (the first ones and the latest)

# Extra anchors used only when comparing with a baseline run: "events" are lines
# that look like warnings or errors.
BASELINE_ANCHORS = ("WARN", "arning", "ailed", "imeout", "imed out", "illed", "ignal",
                    "bort", "atal", "FATAL", "Traceback")

# A traceback or a stack dump starts here (Python, faulthandler and C++ "(most recent call
# first/last)", py-spy's thread headers): a log that shows one after a warning did not go
# on as if nothing happened, and one that ends in one died there (Source.last_error_line).
TRACE_MARKERS = ("(most recent call", '(idle): "', '(active): "', '(active+gil): "',
                 # py-spy's thread headers inside a JSON string (a container's json-file log)
                 '(idle): \\"', '(active): \\"', '(active+gil): \\"')

_EXCEPTION = re.compile(r"^\s*(?:[A-Za-z_][\w.]*\.)?(?P<name>[A-Z]\w*(?:Error|Exception|Exit))(?::|$)")
_ERRORISH = re.compile(r"\b(?:[A-Z]\w*(?:Error|Exception)\b|ERROR\b|[Ee]rror:|FATAL|[Ff]atal error)")


# the words _candidate's own checks look for (error lines, tracebacks), and the marks of a
# line whose text is read in another form than its bytes: ANSI colours (as syslog writes
# them too, lines.ANSI), escapes (a JSON string, a flattened traceback), a shipper's JSON object
ERROR_WORDS = ("rror", "RROR", "xception", "FATAL")
REWRITTEN = ("\x1b", "#033[", "\\", '{"')
# A buffer with at least this many candidate lines sorts them in bulk (Source._live)
BULK_LINES = 16
SCAN_SLICE = 1 << 20      # a chunk is scanned in slices of about this size (Source._scan)
FIRST_SLICE = 1 << 14     # the first one while no line shape is inert or saturated, each next 8x
SAMPLE_BYTES = 1 << 16   # of the candidates, to choose the live passes' key bytes
# How skipped lines are read for their origin (_origin): every one until ORIGIN_QUIET in a
# row name no new host or rank, then one in ORIGIN_SAMPLE lines, the gap doubling after each
# such line that names nothing new up to ORIGIN_SAMPLE_MAX (a parsed prefix costs ~80 us:
# one line in 32 held a file of benign anchor lines under 32 MB/s), back to every line on news
ORIGIN_QUIET, ORIGIN_SAMPLE, ORIGIN_SAMPLE_MAX = 2048, 32, 4096
# REPEAT_NOTE. A line a reader wants (it holds "Error", "FATAL", a job word) is read in
# full, ~60 us in Python, so a benign line type that holds such a word and an anchor
# ("... note FATAL (batch 3, 0.51 s)" on every step) would make a log crawl at ~1 MB/s.
# In a buffer with at least REPEAT_MIN such lines, each gets a shape: its bytes without
# digits and hex letters (_SHAPE_DELETE: one bytes.translate over all of them, so that
# numbers, times, ranks and ids fall out). Once REPEAT_READS lines of a shape in a row were
# read and changed nothing but the error tallies (no finding, job event, stack or fact:
# Source._state), the later lines of that shape are counted, not read, unless a signature
# may match them: the buffer's such lines are searched once with the union of the
# supersets of every signature whose anchor can be in that shape (Plan.shape_signatures),
# and the lines it matches are read as before. The last line counted in a buffer is read,
# so that the latest error line is where it was. A buffer (split on \n alone) whose lines
# are mostly of inert shapes goes further (Source._mask): the prefilter sees it with those
# lines blanked, and they are counted in bulk, their origins read as skipped lines' are.
# A shape whose reads record the same findings REPEAT_READS times in a row and change
# nothing else is saturated: its later lines are checked against those signatures (and
# against the others its shape may hold, where their union may match) and counted for
# them, except each shape's last such line in a slice, which is read, so that every
# signature's latest finding and the latest error line are where they are (Source._finds);
# a buffer mostly of inert and saturated shapes is blanked (_mask, _masked_lines).
# Lines a signature may match get shapes too, not only those a reader wants.
REPEAT_MIN = 64
REPEAT_READS = 16
REPEAT_SHAPES = 4096      # shapes remembered per input
REPEAT_LINE = 4096        # a longer line is always read (shapes kept: at most REPEAT_SHAPES of them)
_SHAPE_DELETE = b"0123456789abcdefABCDEF"
_RUNS = re.compile(b"\x01+")      # runs of blanked lines among a buffer's (Source._mask)
_SPACES = b" " * (1 << 20)

_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 12, 13, 27)) + b"\x7f"


class Plan:
    """The compiled index: anchors, the passes that find them, and the signatures each
    anchor guards.

    Each pass has a key byte that all its anchors hold (chosen at build time,
    generator.regexes.choose_anchors) and one regex, the key followed by a trie of
    what follows it in each anchor, with a lookbehind for what precedes it. A pass
    looks for its key with bytes.find (memchr) and tries the regex there; a rare key
    ("U" of "CUDA error") makes the pass almost free. See _collect_spans.
    """

    def __init__(self, index: dict, baseline_mode: bool = False):
        passes = [(k.encode(), [a.encode() for a in group]) for k, group in index["passes"]]
        # lines the suspects need (suspects.HangLines) that no signature may anchor
        extra = [a for a in SCAN_ANCHORS + JOB_ANCHORS if a not in index["anchors"]]
        if baseline_mode:
            extra += [a for a in BASELINE_ANCHORS if a not in index["anchors"] and a not in extra]
        extra += [a for a in TRACE_MARKERS if a not in index["anchors"] and a not in extra]
        for a in (x.encode() for x in extra):
            # into the pass whose key comes first in it (the rest is a literal to match
            # before any lookbehind), else a pass of its own
            keyed = [(a.find(key), n) for n, (key, _) in enumerate(passes) if key in a]
            if keyed:
                passes[min(keyed)[1]][1].append(a)
            else:
                passes.append((a[:1], [a]))
        every = sorted({a for _, group in passes for a in group})
        # A host may find the anchors itself (set_hit_finder): the browser's worker hands
        # each chunk to JavaScript, where sre in WebAssembly runs each pass 2-4x slower.
        self._host_finder = _hit_finder
        # With RE2 installed, the CLI runs every anchor in one pass (see RE2_NOTE).
        re2 = _re2_module() if _hit_finder is None and every else None
        if _hit_finder is not None:
            self.prefilter, self.passes = "host", [(None, _hit_finder(every))]
        elif re2 is not None:
            self.prefilter, self.passes = "re2", [(b"", _re2_alternation(re2, every))]
        else:
            self.prefilter = "passes"
            self.passes = [(key, re.compile(_keyed_trie(key, group))) for key, group in passes]
        # (key byte, anchors) of the stdlib passes, rebuilt without demoted anchors (DenseChecks)
        self.pass_groups = passes
        # On a candidate line, which anchors are there? (one search, not a test per anchor)
        self.anchors_in = _Which(every)
        self.sigs_by_anchor: dict[bytes, list] = {a: [] for a in every}
        # Context signatures (lines healthy runs print too, read only for their facts)
        # are not in the prefilter: they are tried on the lines of the head of each
        # input that hold their literal, like the version patterns of context.py.
        self.context_sigs: list[tuple[int, dict, re.Pattern, bytes]] = []
        # signatures with a start-of-line `^`: tried again after the launcher prefix
        self.anchored = {n for n, s in enumerate(index["signatures"])
                         if re.search(r"(?<!\[)(?<!\\)\^", s["regex"])}
        self.signature_checks: dict[int, tuple] = {}    # signature -> (its regex, its literal)
        for n, s in enumerate(index["signatures"]):
            rx = _Signature(s["regex"])
            if s["strength"] == "context":
                self.context_sigs.append((n, s, rx, s["literal"].encode()))
            for a in s["anchors"]:
                self.sigs_by_anchor[a.encode()].append((n, s, rx, s["literal"]))
            self.signature_checks[n] = (rx, s["literal"])
        # The head of each input is read for context (versions, launcher) and for the
        # context signatures: its lines holding a context key or a context signature's
        # literal, found like the scan's candidates (word_passes), then which of those
        # words each holds (head_words_in).
        self.context_keys = frozenset(k.encode() for k in context.KEYS)
        self.context_sigs_by_literal: dict[bytes, list[tuple[int, dict, _Signature]]] = {}
        for n, s, rx, literal in self.context_sigs:
            if literal:
                self.context_sigs_by_literal.setdefault(literal, []).append((n, s, rx))
        self.head_words = frozenset(self.context_keys | set(self.context_sigs_by_literal))
        self.head_words_in = _Which(self.head_words)
        self._re2 = re2
        self._word_passes: dict[frozenset, list] = {}   # a memo, filled as inputs need it
        # dense anchors (DENSE_NOTE): each signature's superset (_re2_signature), or None
        # where the regex engine cannot run it; the checks of each set of demoted anchors
        self.superset: dict[int, str | None] = {}
        self._dense_checks: dict[tuple, DenseChecks] = {}
        self.signatures = index["signatures"]
        self._unions: dict[frozenset, object] = {}     # signature_union's memo (the stdlib)
        self._reader_cuts: dict[frozenset, tuple] = {}
        self._alternative_cuts: dict[int, list] = {}
        self._literal_cuts: dict[int, bytes] = {}
        self._groups: dict[int, int] | None = None     # signature_groups
        self._group_members: list[list[int]] = []
        self._group_unions: dict[int, object] = {}
        # each anchor as it is in a shape (REPEAT_NOTE), and the signatures each shape may hold:
        # an anchor without digits and hex letters (its cut) -> the anchors of that cut, and
        # which cuts a shape holds, found in one pass (~4 us with RE2's set, where an `in` test
        # per anchor cost ~80 us a shape: 1.2 s on a log of 14,600 shapes, issue 31)
        self._cut_anchors: dict[bytes, list[bytes]] = {}
        for a in every:
            self._cut_anchors.setdefault(a.translate(None, _SHAPE_DELETE), []).append(a)
        self._cuts_in = _Which([c for c in self._cut_anchors if c])
        self._shape_sigs: dict[bytes, frozenset] = {}
        # A candidate line holds an anchor; most such lines in a healthy job match nothing.
        # One that holds no word of a reader (the job model, the hang lines, the error and
        # traceback checks: reader_words) matters only if a signature matches it. So a
        # buffer's candidates are sorted in bulk: one search over all of them for the
        # readers' words (Source._live), one with the union of the signatures' supersets
        # over the rest (Source._signature_lines), and a line is read in full only when a
        # reader wants it or a signature may match it. The version and launcher keys are
        # reader words while their facts are unknown. Baseline runs read every
        # candidate's shape and are not sorted.
        self.bulk = not baseline_mode
        self.reader_static = frozenset(w.encode() for w in JOB_WORDS + HANG_WORDS + TRACE_MARKERS
                                       + ERROR_WORDS + REWRITTEN)
        self._context_words = [(fact, key.encode()) for fact, key, _ in context.PATTERNS]

    def prepare(self) -> None:
        """Compile now what the first input would: the which-anchor and head-word
        searches and the head's first passes (~0.17 s in Pyodide, ~0.02 s natively).
        The browser's workers call it while idle, so that a scan does not pay it."""
        self.anchors_in(b"")
        self.head_words_in(b"")
        self.word_passes(self.head_words)

    def word_passes(self, words: frozenset, sample: bytes = b"") -> list:
        """The passes that find the lines holding one of words (the head's context keys and
        context-signature literals; the readers' words and the literals among a buffer's
        candidates): the host's finder, else one RE2 search, else one stdlib regex per key
        byte, each key rare in sample (_keyed_passes); compiled once per set of words."""
        passes = self._word_passes.get(words)
        if passes is None:
            if self._host_finder is not None:
                passes = [(None, self._host_finder(sorted(words)))]
            elif self._re2 is not None:
                passes = [(b"", _re2_alternation(self._re2, sorted(words)))]
            else:
                passes = [(key, re.compile(_keyed_trie(key, group))) for key, group in _keyed_passes(words, sample)]
            if len(self._word_passes) >= 64:    # a long-lived process (triage, a browser tab)
                self._word_passes.clear()
            self._word_passes[words] = passes
        return passes

    def demotable(self, anchor: bytes, reader: frozenset) -> bool:
        """Whether the lines holding anchor can be found by DenseChecks: the prefilter's
        regex engine runs a superset of each of its signatures, and no reader's word is part
        of it (then each such line is read anyway)."""
        if any(r in anchor for r in reader):
            return False
        for n, sig, _rx, _literal in self.sigs_by_anchor[anchor]:
            if self._superset(n) is None:
                return False
        return True

    def block_signatures(self, shapes, block: bytes, plain: bool = False) -> frozenset:
        """The signatures lines of these shapes may hold an anchor of (shape_signatures); for
        the standard library's regex, only those whose literal is in block (a signature
        matches only a line that holds its literal): sre tries every alternative of a union
        at each position, where RE2's DFA runs them at once. plain: block is the lines of
        these shapes as they are, and only the signatures one of these shapes may hold are
        kept (may_hold)."""
        ids = frozenset().union(*map(self.shape_signatures, shapes))
        if plain and len(shapes) <= SHAPES_FILTERED:
            # (a smaller union: sre tries fewer alternatives, RE2's DFA has fewer states)
            return frozenset(n for n in ids if any(self.may_hold(n, sh) for sh in shapes))
        return self.present_signatures(ids, block)

    def may_hold(self, n: int, shape: bytes) -> bool:
        """Whether a line of this shape may hold a match of signature n: its literal's cut
        and the required text's cut of one of its superset's alternatives are in the shape."""
        if self._literal_cut(n) not in shape:
            return False
        if self._superset(n) is None:
            return True
        return any(need in shape for _, _, need in self.alternative_cuts(n))

    def _literal_cut(self, n: int) -> bytes:
        """Signature n's literal as it is in a line's shape (REPEAT_NOTE)."""
        cut = self._literal_cuts.get(n)
        if cut is None:
            cut = self._literal_cuts[n] = (self.signatures[n]["literal"] or "").encode().translate(None, _SHAPE_DELETE)
        return cut

    def present_signatures(self, ids: frozenset, block: bytes) -> frozenset:
        """Of these signatures, those that may match in block: all of them for RE2; for the
        standard library's regex, those whose literal is in block (block_signatures)."""
        if self._re2 is not None:
            return ids
        literals = {self.signatures[n]["literal"] for n in ids}
        present = {lit for lit in literals if not lit or lit.encode() in block}
        return ids if len(present) == len(literals) else frozenset(
            n for n in ids if self.signatures[n]["literal"] in present)

    def shape_signatures(self, shape: bytes) -> frozenset:
        """The signatures a line of this shape (REPEAT_NOTE) may hold an anchor of: an anchor
        in a line is, without digits and hex letters, in the line's shape."""
        ids = self._shape_sigs.get(shape)
        if ids is None:
            if len(self._shape_sigs) >= REPEAT_SHAPES:
                self._shape_sigs.clear()
            cuts = self._cuts_in(shape) + ([b""] if b"" in self._cut_anchors else [])
            ids = self._shape_sigs[shape] = frozenset(
                n for cut in cuts for a in self._cut_anchors[cut] for n, *_ in self.sigs_by_anchor[a])
        return ids

    def signature_union(self, ids: frozenset, repeated: bool = False, shapes=None) -> list | None:
        """(?m) regexes of the supersets of these signatures that together match, in a block
        of lines, at least wherever one of them matches a line: where RE2 is installed, their
        unions of UNION_CHARS at most, or, where that would take more than half as many
        unions as there are groups of signatures (signature_groups) holding one of them, the
        union of each such group (its other signatures only add lines to read); with the
        standard library, one per leading literal, written as the
        literal and an alternation of the rests (sre scans for a literal prefix, where a
        union of alternatives is tried at every position). None when a signature has no
        superset or a regex does not compile. shapes: those of the block's lines, when its
        lines are searched as they are (the standard library then leaves out the
        alternatives no line of these shapes can hold: _stdlib_union)."""
        if self._re2 is None:
            return self._stdlib_union(ids, shapes)
        chars = self.union_chars(ids)
        touched = None
        if chars > UNION_CHARS:
            groups = self.signature_groups()
            touched = sorted({groups[n] for n in ids if n in groups})
        # the groups, unless these are the signatures of lines of a few repeated shapes (a
        # block the size of a buffer, where each union searched costs) and unions of them
        # alone (compiled on first use, ~1 ms each) are far fewer: the 42 signatures of 575
        # characters each of a line holding "KeyError:" spread over 18 of the 36 groups, and
        # make 5 of their own. (Varied lines' sets of signatures keep changing: there the
        # groups, compiled once, serve; the memory own unions hold is bounded by UNIONS_KEPT.)
        if touched is not None and (not repeated or -(-chars // UNION_CHARS) * 2 > len(touched)):
            union = []
            for g in touched:
                part = self._group_union(g)
                if part is None:
                    return None
                union.append(part)
            return union or None
        if ids not in self._unions:
            if len(self._unions) >= UNIONS_KEPT:
                self._unions.clear()
            patterns = {self._superset(n) for n in ids}
            union = None
            if None not in patterns and patterns:
                try:
                    union, part, size = [], [], 0       # (each UNION_CHARS at most)
                    for p in sorted(patterns):
                        if part and size + len(p) > UNION_CHARS:
                            union.append(part)
                            part, size = [], 0
                        part.append(p)
                        size += len(p)
                    union = [_re2_compile(self._re2, ("(?m)" + "|".join(f"(?:{p})" for p in ps)).encode(),
                                          GROUP_MAX_MEM) for ps in union + [part]]
                except Exception:    # re2.error
                    union = None
            self._unions[ids] = union
        return self._unions[ids]

    def _stdlib_union(self, ids: frozenset, shapes) -> list | None:
        """signature_union for the standard library's regex: one regex per leading literal of
        the alternatives of these signatures' supersets (a family signature's superset is an
        alternation, "Error: (?:If ... |Expected ...|...)": as one regex sre tried each branch
        at every position, ~9 ns a byte, and at every "Error: " of a line holding "KeyError:"),
        bytes.find hopping to each literal (_Led). Given shapes (at most SHAPES_FILTERED), the
        alternatives whose required text is in none of them are left out (REPEAT_NOTE: a line
        holding a text has that text's cut in its shape). Compiled on first use."""
        alts = []
        for n in sorted(ids):
            if self._superset(n) is None:
                return None
            alts += self.alternative_cuts(n)
        if shapes is not None and len(shapes) <= SHAPES_FILTERED:
            joined = b"\n".join(shapes)
            alts = [a for a in alts if not a[2] or a[2] in joined]
        key = frozenset((lead, rest) for lead, rest, _ in alts)
        union = self._unions.get(key)
        if union is None:
            if len(self._unions) >= UNIONS_KEPT:
                self._unions.clear()
            groups: dict[str, list[str]] = {}
            for lead, rest, _ in sorted(alts):
                groups.setdefault(lead, []).append(rest)
            union = self._unions[key] = [
                _Led(lead.encode(), "(?m)" + re.escape(lead) + "(?:" + "|".join(f"(?:{r})" for r in rests) + ")")
                for lead, rests in groups.items()]
        return union or [_NEVER]

    def alternative_cuts(self, n: int) -> list[tuple[str, str, bytes]]:
        """Signature n's superset as alternatives (_alternatives), each (its leading
        literal, the rest, the shape cut of the longest text every match of it holds)."""
        alts = self._alternative_cuts.get(n)
        if alts is None:
            alts = self._alternative_cuts[n] = []
            for a in _alternatives(self._superset(n)):
                lead = _leading_literal(a)
                alts.append((lead, a[len(lead):], _required_text(a).encode().translate(None, _SHAPE_DELETE)))
        return alts

    def signature_groups(self) -> dict[int, int]:
        """Signature -> its group: the signatures in index order, cut where the group's
        supersets reach UNION_CHARS. One RE2 union of every signature (210,000 characters
        today) ran out of DFA memory on a block of varied lines: RE2 then fell back to its
        NFA (a log of benign lines each holding some anchor scanned at 1.5 MB/s) and
        logged each fallback to stderr, where a user would see it."""
        if self._groups is None:
            self._groups, self._group_members = {}, []
            size = UNION_CHARS
            for n, sig in enumerate(self.signatures):
                if sig["strength"] == "context":
                    continue        # (no anchor: never a candidate's signature, and healthy lines match it)
                cost = len(self._superset(n) or "")
                if size + cost > UNION_CHARS:
                    self._group_members.append([])
                    size = 0
                self._group_members[-1].append(n)
                self._groups[n] = len(self._group_members) - 1
                size += cost
        return self._groups

    def union_chars(self, ids) -> int:
        """The length of these signatures' supersets together."""
        return sum(len(self._superset(n) or "") for n in ids)

    def _superset(self, n: int) -> str | None:
        if n not in self.superset:
            self.superset[n] = _re2_signature(self._re2, self.signatures[n]["regex"])
        return self.superset[n]

    def _group_union(self, g: int):
        """The compiled RE2 union of group g's supersets, or None."""
        if g not in self._group_unions:
            patterns = [self.superset[n] for n in self._group_members[g]]
            union = None
            if None not in patterns:
                try:
                    union = _re2_compile(self._re2, ("(?m)" + "|".join(f"(?:{p})" for p in sorted(set(patterns)))).encode(),
                                         GROUP_MAX_MEM)
                except Exception:    # re2.error
                    union = None
            self._group_unions[g] = union
        return self._group_unions[g]

    def dense_checks(self, dense: frozenset, reader: frozenset) -> "DenseChecks | None":
        """The checks for a set of demoted anchors; None when they do not compile (RE2's
        memory bound), and the buffer is scanned as it is."""
        key = (dense, reader)
        if key not in self._dense_checks:
            if len(self._dense_checks) >= 16:
                self._dense_checks.clear()
            try:
                self._dense_checks[key] = DenseChecks(self, dense, reader)
            except Exception:    # re2.error
                self._dense_checks[key] = None
        return self._dense_checks[key]

    def reader_cuts(self, reader: frozenset) -> tuple:
        """The readers' words as they are in a line's shape (REPEAT_NOTE): a line that holds
        one has its cut in its shape (an empty cut is in every shape)."""
        cuts = self._reader_cuts.get(reader)
        if cuts is None:
            if len(self._reader_cuts) >= 16:
                self._reader_cuts.clear()
            cuts = self._reader_cuts[reader] = tuple({w.translate(None, _SHAPE_DELETE) for w in reader})
        return cuts

    def reader_words(self, facts: dict) -> frozenset:
        """The words that make a candidate line matter to a reader other than the signatures,
        given the facts the input has stated so far."""
        return self.reader_static | {k for fact, k in self._context_words if fact not in facts}


class _Which:
    """Which of many literals a line holds, sorted: RE2's set, else searches of their
    trie from each hit on, instead of an `in` test per literal.
    The trie stops at the shortest literal, so one that extends another ("Watchdog"
    after "Watch") is checked with `in`. Compiled at the first line that needs it."""

    def __init__(self, words):
        self.words = sorted(words)
        self.rx = None      # compiled at the first line: RE2's set where installed, else the trie
        self.set = None
        # the literals that start with another follow it in sorted order
        self.longer: dict[bytes, list[bytes]] = {}
        for i, a in enumerate(self.words):
            j = i + 1
            while j < len(self.words) and self.words[j].startswith(a):
                j += 1
            self.longer[a] = self.words[i + 1:j]

    def __call__(self, seg: bytes) -> list[bytes]:
        if self.rx is None and self.set is None:
            # RE2's set names every literal the segment holds in one pass (~4 us a line with
            # 2,300 anchors, where the trie's lookahead at every byte took ~57 us: issue 31)
            self.set = _re2_set(self.words)
            if self.set is None:
                self.rx = re.compile(_trie(self.words))
        if self.set is not None:
            return sorted(self.words[i] for i in (self.set.Match(seg) or ()))
        # a search from each hit's next byte (literals overlap): sre skips to the bytes a
        # literal can start with, where a lookahead at every byte took ~23 us a line
        found = set()
        search, pos = self.rx.search, 0
        while (m := search(seg, pos)) is not None:
            a = m.group()
            if a not in found:      # (a block of lines holds one many times)
                found.add(a)
                for b in self.longer[a]:
                    if b in seg:
                        found.add(b)
            pos = m.start() + 1
        return sorted(found)


class _Signature:
    """A signature's regex, compiled when a line first needs it: on most logs most
    signatures never meet a line that holds their anchor, and compiling all ~460 cost
    every run ~0.1 s."""
    __slots__ = ("pattern", "rx")

    def __init__(self, pattern: str):
        self.pattern, self.rx = pattern, None

    def search(self, text: str):
        if self.rx is None:
            self.rx = re.compile(self.pattern)
        return self.rx.search(text)


class Source:
    """Scan state for one input (one file or stream)."""

    def __init__(self, name: str, order: int, plan: Plan, collect_shapes: bool = False,
                 offset: int = 0, prev_tail: bytes = b""):
        self.name = name
        self.order = order
        self.plan = plan
        self.collect_shapes = collect_shapes
        self.offset = offset      # where this scan starts in the input (parallel ranges)
        self.bytes = 0
        self.lines = 0            # newlines before the current buffer
        self.carry = b""
        # Context lines are kept as lines, not bytes, so that evidence is the same
        # however the input was cut into chunks.
        self.recent: list[str] = _complete_lines(prev_tail)[-CONTEXT_LINES:]  # lines before the buffer
        self.pending: list[dict] = []   # findings still waiting for lines after them
        self.ended_cr = False           # the last buffer ended in \r (a \n may follow)
        self.first_lines: list[str] | None = None  # first lines of this scan (parallel merge)
        self.launcher_banner = False   # torchrun's start-up banner in the head (job.LAUNCHER_BANNER)
        # a range's first lines, which may end a traceback or a launcher report that the
        # range before left open (merge_ranges: JobLines.carry_over)
        self.head_lines: list[str] | None = None
        self._end = 0
        self._final = False
        self.status = "ok"
        self.messages: list[str] = []
        self.started = offset > 0   # only the start of an input is sniffed
        self.decoder = None       # set for UTF-16 input
        self.findings: dict[int, list] = {}   # signature index -> kept findings
        self.counts: dict[int, int] = {}
        self.head_key_lines: dict[bytes, int] = {}
        self.facts: dict = {}
        self.hosts: set = set()
        self.ranks: set = set()
        self.first_error: dict | None = None
        self.last_exception: dict | None = None
        self.error_lines = 0
        self.error_samples: list[str] = []
        self.last_error_line = 0  # the latest error line or traceback header (0: none)
        self.shapes: dict[str, dict] = {}
        self.last_ts = None
        self.candidates = 0       # lines the prefilter passed to the signatures
        self._repeat: dict[bytes, int] = {}   # shape -> reads in a row that changed nothing (REPEAT_NOTE)
        self._repeat_errors: dict[bytes, int] = {}   # shape -> error lines one of its lines counts, where it changes the tallies
        self._inert: set[bytes] = set()           # shapes read REPEAT_READS times in a row to no effect
        # shapes read REPEAT_READS times in a row to no effect but the same findings, and those
        # findings' signatures (REPEAT_NOTE: their lines are counted for them, the last read)
        self._saturated: dict[bytes, tuple] = {}
        self._shape_findings: dict[bytes, frozenset] = {}   # shape -> the signatures its last read recorded
        self._just: list | None = None            # the signatures the line being read records
        self._others_may: set[int] = set()        # _repeats: lines of saturated shapes another signature may match
        self._quiet = 0           # skipped candidate lines in a row that named no new origin (_origin)
        self._since = 0           # skipped candidate lines since the last one read for its origin
        self._gap = ORIGIN_SAMPLE  # past ORIGIN_QUIET, one skipped line in this many is read
        # Findings of the current buffer that still need their context lines: only
        # the kept ones get them, once, at the end of the buffer (see _scan).
        self._unattached: dict[int, tuple[dict, int, int]] = {}
        # watchdog / collective-timeout lines, for suspects; a range that starts inside
        # the input may start with the frames of a stack from the range before
        self.hang = HangLines(lead=offset > 0)
        # the job model's events: origins, launcher reports, exits, restarts (job.py)
        self.job = JobLines(name, order)
        self._job_next = 0       # the line number the job model follows next (0: none)

    # ------------------------------------------------------------ input

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        if not self.started:
            self.started = True
            chunk = self._sniff(chunk)
        self.bytes += len(chunk)
        if self.decoder is not None:
            chunk = self.decoder.decode(chunk).encode("utf-8", "replace")
        buf = self.carry + chunk if self.carry else chunk
        cr = b"\r" in buf   # (a whole pass over the chunk: found once, handed to _scan)
        cut = max(buf.rfind(b"\n"), buf.rfind(b"\r") if cr else -1) + 1
        if cut == 0 or len(buf) - cut > MAX_CARRY:
            # No line end for a long way: scan what we have as a window and keep
            # only enough for an anchor or a context window spanning the seam.
            if len(buf) > MAX_CARRY:
                keep = WINDOW
                self._scan(buf, len(buf) - keep, final=False, cr=cr)
                self.carry = buf[-keep:]
            else:
                self.carry = buf
            return
        head = _readable(buf[:cut]) if b"\\u" in buf or _FULLWIDTH_RX.search(buf) else None
        if head is not None:
            self._scan(head + buf[cut:], len(head), final=False, cr=cr)
        else:
            self._scan(buf, cut, final=False, cr=cr)
        self.carry = buf[cut:]

    def end_range(self, is_last: bool) -> "Source":
        """Finish a scan of one range of an input (see Diagnosis.scan_range): the last
        range is closed like a whole input; any other ends just after a newline. The
        part drops its plan so that it can be sent to another process and merged."""
        if is_last:
            self.close()
        else:
            self.carry = b""
        self.plan = None
        self._repeat, self._repeat_errors, self._inert = {}, {}, set()
        self._saturated, self._shape_findings = {}, {}
        return self

    def close(self, truncated: str | None = None) -> None:
        if self.decoder is not None:
            self.carry += self.decoder.decode(b"", final=True).encode("utf-8", "replace")
        if self.carry:
            self.carry = _readable(self.carry) or self.carry
            self._scan(self.carry, len(self.carry), final=True)
            if not self.carry.endswith((b"\n", b"\r")):
                self.lines += 1
        self.carry = b""
        if truncated:
            self.status = "truncated"
            self.messages.append(truncated)
        if self.bytes == 0 and self.offset == 0:
            self.status = "empty"
            self.messages.append("the input is empty")

    def _sniff(self, chunk: bytes) -> bytes:
        if chunk.startswith(codecs.BOM_UTF16_LE) or chunk.startswith(codecs.BOM_UTF16_BE):
            self.decoder = codecs.getincrementaldecoder("utf-16")("replace")
            self.messages.append("UTF-16 text: decoded")
            return chunk
        if chunk.startswith(codecs.BOM_UTF8):
            chunk = chunk[3:]
        sample = chunk[:65536]
        # Binary data is still scanned (a log may start with NUL padding), but the
        # reader is told: a checkpoint dropped by mistake should not look "healthy".
        control = len(sample) - len(sample.translate(None, _CONTROL))
        if sample and control > len(sample) // 10:
            self.status = "binary"
            self.messages.append("this looks like binary data, not a text log")
        return chunk

    # ------------------------------------------------------------ the scan

    def _scan(self, buf: bytes, end: int, final: bool, cr: bool | None = None) -> None:
        """Scan buf[:end] (cr: whether buf holds a \r, when the caller knows), in slices of
        about SCAN_SLICE bytes cut after a \n while shapes are being learnt: what a slice
        teaches (REPEAT_NOTE) serves the next one already. Where the first slices read no
        shaped line the rest goes in one piece (each slice probes its start again)."""
        at = self.offset + self.bytes - len(buf)     # where buf starts in the input
        lo, size = 0, FIRST_SLICE
        while end - lo > 2 * SCAN_SLICE and (lo == 0 or size < SCAN_SLICE or self._repeat or self._inert):
            # while no shape is inert or saturated yet, slices of FIRST_SLICE, then 8 and 64
            # times that: what they teach serves the rest of the buffer sooner (a file of one
            # benign line type holding "KeyError:" scanned its first 1 MB line by line, ~0.1 s
            # of 0.4; a failure line repeated, saturated after 17 reads, its first 128 kB)
            size = SCAN_SLICE if self._inert or self._saturated else min(size, SCAN_SLICE)
            hi = buf.rfind(b"\n", lo + size // 2, lo + size) + 1
            if hi == 0:
                break
            self._scan_slice(buf[lo:hi], hi - lo, False, cr, at + lo)
            lo, size = hi, size * 8
        self._scan_slice(buf[lo:] if lo else buf, end - lo, final, cr, at + lo)

    def _scan_slice(self, buf: bytes, end: int, final: bool, cr: bool | None, at: int) -> None:
        plan = self.plan
        self._end, self._final = end, final
        if self.first_lines is None:
            self.first_lines = _complete_lines(buf[:min(end, 4 * WINDOW)], final)[:CONTEXT_LINES]
            # whole lines (a shipper's JSON line cut short is no JSON)
            self.head_lines = (_complete_lines(buf[:min(end, HEAD_LINES_BYTES)], final, 8192)[:TRACEBACK_LINES]
                               if self.offset > 0 else [])
        if self.pending:
            self._complete_pending(buf, end, final)
        if self.hang.wants_following():
            # a stack header's frames go on in this buffer
            self._follow(buf, 1 if self.ended_cr and buf[:1] == b"\n" else 0, end, final)
        if self._job_next and self.job.wants_following():
            self._follow_job(buf, 1 if self.ended_cr and buf[:1] == b"\n" else 0, end, final, self.lines + 1)
        # Context (versions, launcher) from every line near the start of the input.
        if at < HEAD_BYTES:
            self._head(buf, end)
            self.launcher_banner = self.launcher_banner or buf.find(_BANNER, 0, min(end, HEAD_BYTES - at + len(_BANNER))) >= 0
        spans: dict[int, int] = {}   # candidate segment start -> end
        if cr is None:
            cr = b"\r" in buf
        masked = self._mask(buf, end, cr)
        seen = buf if masked is None else masked.buf     # what the prefilter searches
        dense = self._dense(seen, end, cr)
        if dense is None:
            _collect_spans(plan.passes, seen, end, cr, spans)
        else:
            _collect_spans(dense.rest, seen, end, cr, spans)
            self._dense_lines(dense, seen, end, spans)
        lines_before = self.lines
        if masked is not None:
            self._masked_lines(masked, spans)
        counted = None if masked is None else masked.last_error
        tally_at = -1        # the start of the last line read that changed the error tallies
        if spans:
            starts = sorted(spans)
            self.candidates += len(starts)
            read = self._live(buf, starts, spans) if plan.bulk and len(starts) >= BULK_LINES else None
            # the others matter only if a signature matches them: checked together
            checked, wanted = (self._signature_lines(buf, [s for s in starts if s not in read], spans)
                               if read is not None else ((), ()))
            # the lines read get shapes: those a reader wants, and those a signature may match
            shaped = [s for s in starts if s in read or s in wanted] if read is not None else []
            shapes, maybe = (self._repeats(buf, shaped, spans) if len(shaped) >= REPEAT_MIN else ({}, ()))
            inert, touch, saturated = self._inert, self._repeat_errors, self._saturated
            # the lines of saturated shapes that record just their shape's findings (_finds):
            # counted, but for each shape's last one here, which is read (the latest finding
            # and error line are where they are)
            others_may, self._others_may = self._others_may, set()
            finds: dict[tuple, bool] = {}      # (a line, whether the others may match) -> _finds
            counts_for = {start: saturated[shape][0] for start, shape in shapes.items() if shape in saturated
                          and self._finds_once(finds, buf[start:spans[start]], saturated[shape], start in others_may)}
            last_of = {shapes[start]: start for start in counts_for}
            job = self.job
            counted_to, line_no = 0, self.lines
            skipped = None       # (start, stop) of the last line skipped since the last one read
            handled = 0          # where the last candidate line handled ends
            for start in starts:
                if read is not None and not job.open_tb and job.block is None:
                    # (an open traceback or launcher report reads every line)
                    shape = shapes.get(start)
                    if start not in read:
                        skip = (start not in wanted if start in checked
                                else not self._matches(buf[start:spans[start]]))
                    else:
                        skip = shape in inert and start not in maybe
                        if skip and shape in touch:
                            self.error_lines += touch[shape]
                            if counted is None or start > counted[0]:     # (a blanked one may be later)
                                counted = (start, spans[start], touch[shape])
                    if not skip and start in counts_for and last_of[shape] != start:
                        skip = True
                        for n in counts_for[start]:      # (as checked: the shape may have learnt since)
                            self.counts[n] += 1
                        self.error_lines += touch.get(shape, 0)
                    if skip:
                        self._quiet += 1
                        self._since += 1
                        if self._quiet <= ORIGIN_QUIET or self._since >= self._gap:
                            self._origin(buf[start:spans[start]])
                            skipped = None
                        else:
                            skipped = (start, spans[start])
                        handled = spans[start]
                        continue
                if dense is not None:
                    skipped = dense.last_line(buf, handled, start, skipped)
                if masked is not None:
                    skipped = masked.last_line(handled, start, skipped)
                if skipped is not None:
                    self._origin(buf[skipped[0]:skipped[1]])   # the time a finding may inherit
                    skipped = None
                line_no += buf.count(b"\n", counted_to, start)
                counted_to = start
                present = plan.anchors_in(buf[start:spans[start]])
                shape = shapes.get(start)
                tallies = self._tallies()
                if shape is None:
                    self._candidate(buf, start, spans[start], line_no + 1, present)
                else:
                    self._read_shaped(shape, buf, start, spans[start], line_no + 1, present, tallies)
                if self._tallies() != tallies:
                    tally_at = start
                handled = spans[start]
            if dense is not None:
                skipped = dense.last_line(buf, handled, end, skipped)
            if masked is not None:
                skipped = masked.last_line(handled, end, skipped)
            if skipped is not None:
                self._origin(buf[skipped[0]:skipped[1]])
            self.lines = line_no + buf.count(b"\n", counted_to, end)
        else:
            handled = 0
            if masked is not None:
                skipped = masked.last_line(0, end, None)
                if skipped is not None:
                    self._origin(buf[skipped[0]:skipped[1]])
            self.lines += buf.count(b"\n", 0, end)
        if counted is not None and counted[0] > tally_at:
            # the last line counted, not read, that the error tallies would have taken is
            # read: the latest error line, exception and sample are where they are
            start, stop, increment = counted
            self.error_lines -= increment
            self._candidate(buf, start, stop, lines_before + buf.count(b"\n", 0, start) + 1,
                            plan.anchors_in(buf[start:stop]))
        for d, start, stop in self._unattached.values():
            self._attach_context(d, buf, start, stop)
        self._unattached = {}
        lo = max(0, end - 4 * WINDOW)
        region = buf[lo:end]
        if lo == 0 and self.ended_cr and region.startswith(b"\n"):
            region = region[1:]
        tail = _complete_lines(region, final)
        self.recent = ((self.recent if lo == 0 else []) + tail)[-CONTEXT_LINES:]
        self.ended_cr = buf[end - 1:end] == b"\r"

    def _dense(self, buf: bytes, end: int, cr: bool) -> "DenseChecks | None":
        """The checks for this buffer's demoted anchors, when it has some (DENSE_NOTE):
        in the CLI, a buffer of ASCII lines split by \\n alone (a signature's `$` is then the
        end of a line in a block) and no traceback or launcher report open, whose start
        is mostly candidate lines that no reader wants; the anchors on at least half of
        those lines are demoted."""
        plan = self.plan
        if plan.prefilter == "host" or not plan.bulk or cr or end < DENSE_MIN_BYTES \
                or self.job.open_tb or self.job.block is not None:
            return None
        probe_end = buf.rfind(b"\n", 0, min(end, DENSE_PROBE)) + 1
        spans: dict[int, int] = {}
        _collect_spans(plan.passes, buf, probe_end, False, spans)
        if len(spans) < DENSE_MIN_LINES or len(spans) * DENSE_SHARE < buf.count(b"\n", 0, probe_end) \
                or not buf.isascii():
            return None
        reader = plan.reader_words(self.facts)
        counts: dict[bytes, int] = {}
        sampled = 0
        for start in sorted(spans)[:DENSE_SAMPLE]:
            seg = buf[start:spans[start]]
            if any(w in seg for w in reader):
                continue
            sampled += 1
            for a in plan.anchors_in(seg):
                counts[a] = counts.get(a, 0) + 1
        dense = frozenset(a for a, c in counts.items()
                          if DENSE_OF * c >= sampled and plan.demotable(a, reader))
        return plan.dense_checks(dense, reader) if dense else None

    def _dense_lines(self, checks: "DenseChecks", buf: bytes, end: int, spans: dict[int, int]) -> None:
        """Add to spans the lines of buf[:end] that hold a demoted anchor and that a
        signature may match or a reader wants; count the others and read one in
        the origin gap of them for its origin."""
        for rx in (*checks.signatures, checks.readers):
            pos = 0
            while rx is not None and (m := rx.search(buf, pos, end)) is not None:
                # a match may start on the line before (a \s at its start): that line is
                # listed, and the search goes on from the next one
                start, stop = _segment(buf, m.start(), False)
                spans[start] = max(spans.get(start, 0), stop)
                pos = max(stop, m.start() + 1)
        if checks.reader_passes is not None:
            # (the stdlib: the lines holding a reader's word, kept when one also holds a demoted anchor)
            hits: dict[int, int] = {}
            _collect_spans(checks.reader_passes, buf, end, False, hits)
            for start, stop in hits.items():
                if any(a in buf[start:stop] for a in checks.words):
                    spans[start] = max(spans.get(start, 0), stop)
        self.candidates += sum(buf.count(a, 0, end) for a in checks.words)
        # their origins, as _scan reads a skipped line's: each line's until ORIGIN_QUIET in
        # a row name no new host or rank, then about one line in the origin gap
        # (their times come later, in order: DenseChecks.last_line)
        line = max(1, end // max(1, buf.count(b"\n", 0, end)))    # bytes per line, on average
        pos, last_ts = 0, self.last_ts
        while pos < end and (m := checks.dense.search(buf, pos, end)) is not None:
            start, stop = _segment(buf, m.start(), False)
            self._quiet += 1
            self._origin(buf[start:stop])
            pos = stop + 1 + (0 if self._quiet <= ORIGIN_QUIET else line * (self._gap - 1))
        self.last_ts = last_ts

    def _origin(self, raw: bytes) -> None:
        """What a skipped candidate line still tells: its time, host and rank (the ranks and
        hosts a job shows). Read from every skipped line until ORIGIN_QUIET in a row bring no
        new host or rank, then from one in the origin gap (ORIGIN_SAMPLE, doubling while
        they bring nothing new), and from the last one before a line that is read (whose
        finding may inherit its time)."""
        meta, _ = parse_prefix(strip_ansi(raw.decode("utf-8", "replace")).rstrip("\r\n"))
        self._since = 0
        if self._note_origin(meta):
            self._quiet = 0
            self._gap = ORIGIN_SAMPLE
        elif self._quiet > ORIGIN_QUIET:
            self._gap = min(2 * self._gap, ORIGIN_SAMPLE_MAX)

    def _note_origin(self, meta: dict) -> bool:
        """Keep a line's time, host and rank; True when the host or the rank is new."""
        ts = meta.get("ts")
        if ts is not None:
            self.last_ts = ts
        new = False
        if "host" in meta and meta["host"] not in self.hosts:
            self.hosts.add(meta["host"])
            new = True
        if "rank" in meta and meta.get("rank_from") != "group" and meta["rank"] not in self.ranks:
            self.ranks.add(meta["rank"])
            new = True
        return new

    def _live(self, buf: bytes, starts: list[int], spans: dict[int, int]) -> set[int]:
        """The candidate lines (their starts) that hold a reader's word: the candidates
        joined into one block, searched once with the readers' word passes
        (Plan.word_passes)."""
        segs = [buf[s:spans[s]] for s in starts]
        block = b"\n".join(segs)
        offsets, pos = [], 0
        for seg in segs:
            offsets.append(pos)
            pos += len(seg) + 1
        hits: dict[int, int] = {}
        words = self.plan.reader_words(self.facts)
        _collect_spans(self.plan.word_passes(words, block[:SAMPLE_BYTES]), block, len(block), False, hits)
        # a hit's line start in the block is a segment's start, or (in a segment longer
        # than the window) a point inside it: the last segment that starts at or before it
        return {starts[bisect_right(offsets, h) - 1] for h in hits}

    def _mask(self, buf: bytes, end: int, cr: bool) -> "Masked | None":
        """REPEAT_NOTE: buf[:end] with the lines of inert shapes blanked, when they are most
        of its lines (its start tells, then the whole of it), and no traceback or launcher
        report is open (they read every line)."""
        inert = self._inert | self._saturated.keys() if self._saturated else self._inert
        if not inert or cr or not self.plan.bulk or end < DENSE_MIN_BYTES \
                or self.job.open_tb or self.job.block is not None:
            return None
        probe_end = buf.rfind(b"\n", 0, min(end, DENSE_PROBE)) + 1
        probe = buf[:probe_end].translate(None, _SHAPE_DELETE).split(b"\n")
        if sum(sh in inert for sh in probe) * 2 < len(probe):
            return None
        region = buf[:end]
        lines = region.split(b"\n")
        shapes = region.translate(None, _SHAPE_DELETE).split(b"\n")
        # (C-level iteration throughout: a Python loop over 100,000 short lines a buffer
        # held a file of one inert line type under 70 MB/s)
        flags = bytes(map(inert.__contains__, shapes))
        blanked = list(compress(range(len(shapes)), flags))
        if len(blanked) * 2 < len(lines):
            return None
        starts_all = list(accumulate(map(add, map(len, lines), repeat(1)), initial=0))   # line i: [starts_all[i], starts_all[i + 1] - 1)
        pick = itemgetter(*blanked) if len(blanked) > 1 else (lambda seq: (seq[blanked[0]],))
        starts = list(pick(starts_all))
        stops = list(map(sub, pick(starts_all[1:]), repeat(1)))
        # each run of blanked lines becomes spaces, its inner newlines too (no hit can be
        # there, and the lines around it keep theirs)
        seen = bytearray(region)
        for run in _RUNS.finditer(flags):
            lo, hi = starts_all[run.start()], starts_all[run.end()] - 1
            seen[lo:hi] = _SPACES[:hi - lo] if hi - lo <= len(_SPACES) else b" " * (hi - lo)
        return Masked(bytes(seen), starts, stops, list(pick(lines)), list(pick(shapes)))

    def _masked_lines(self, masked: "Masked", spans: dict[int, int]) -> None:
        """The blanked lines (Source._mask): those a signature may match go back to spans,
        to be read; the others are counted as error lines where their shape is one, and
        their origins read as skipped lines' are. Each distinct line is checked once (a
        line repeated over and over: once a buffer)."""
        plan = self.plan
        saturated = self._saturated
        shape_of = dict(zip(masked.lines, masked.shapes))     # each distinct line's shape
        read: set[bytes] = set()        # distinct lines whose copies go back to be read
        counted: list[bytes] = []       # lines of saturated shapes that record just their findings
        for sat in (False, True):
            lines = [ln for ln, sh in shape_of.items() if (sh in saturated) == sat]
            if not lines:
                continue
            block = b"\n".join(lines)
            checked, shapes = lines, {shape_of[ln] for ln in lines}
            plain = b"\\" not in block       # (else also read unescaped: shapes tell nothing of those forms)
            if not plain:
                checked = [_checked_form(ln) for ln in lines]
                block = b"\n".join(checked)
            ids = (frozenset().union(*(saturated[sh][1] for sh in shapes)) if sat
                   else plan.block_signatures(shapes, block, plain))
            union = plan.signature_union(ids, repeated=True, shapes=shapes if plain else None) if ids else None
            hit = set(range(len(lines))) if ids and union is None else \
                _block_lines(union, block, checked) if union is not None else set()
            if not sat:
                read.update(lines[k] for k in hit)
                continue
            # a saturated shape's line that records just its findings is counted for them
            # (Source._finds); the others are read
            for k, ln in enumerate(lines):
                if self._finds(ln, saturated[shape_of[ln]], k in hit):
                    counted.append(ln)
                else:
                    read.add(ln)
        maybe = {i for i, ln in enumerate(masked.lines) if ln in read} if read else set()
        if counted:
            # every copy is counted but each shape's last, which is read: the latest finding
            # and error line are where they are
            copies = Counter(masked.lines)
            for ln in counted:
                for n in saturated[shape_of[ln]][0]:
                    self.counts[n] += copies[ln]
            last: dict[bytes, int] = {}
            left, wanted = set(counted), {shape_of[ln] for ln in counted}
            for i in range(len(masked.lines) - 1, -1, -1):
                sh = masked.shapes[i]
                if sh not in last and masked.lines[i] in left:
                    last[sh] = i
                    for n in saturated[sh][0]:
                        self.counts[n] -= 1
                    if len(last) == len(wanted):
                        break
            maybe.update(last.values())
        if maybe:
            keep = [i for i in range(len(masked.starts)) if i not in maybe]
            for i in maybe:
                spans[masked.starts[i]] = masked.ends[i]
            masked.starts = [masked.starts[i] for i in keep]
            masked.ends = [masked.ends[i] for i in keep]
            masked.lines = [masked.lines[i] for i in keep]
            masked.shapes = [masked.shapes[i] for i in keep]
        n = len(masked.starts)
        self.candidates += n
        touch = self._repeat_errors
        counts = Counter(masked.shapes)
        self.error_lines += sum(c * touch[sh] for sh, c in counts.items() if sh in touch)
        if any(sh in touch and sh not in saturated for sh in counts):
            # (a saturated shape's last line is read, after every one of its lines counted here)
            last = next(i for i in range(n - 1, -1, -1) if masked.shapes[i] in touch and masked.shapes[i] not in saturated)
            masked.last_error = (masked.starts[last], masked.ends[last], touch[masked.shapes[last]])
        # their origins, as _scan reads a skipped line's: each line's until ORIGIN_QUIET in a
        # row name no new host or rank, then one in the origin gap
        last_ts, i = self.last_ts, 0
        while i < n:
            if self._quiet >= ORIGIN_QUIET:
                step = max(1, self._gap - self._since)    # to the next line read
                if i + step > n:
                    self._quiet += n - i
                    self._since += n - i
                    break
                i += step - 1
                self._quiet += step
            else:
                self._quiet += 1
            self._origin(masked.lines[i])
            i += 1
        self.last_ts = last_ts      # (the time a finding inherits is the last line's before it: last_line)
        masked.lines = masked.shapes = None

    def _repeats(self, buf: bytes, starts: list[int], spans: dict[int, int]) -> tuple[dict[int, bytes], set[int]]:
        """REPEAT_NOTE: the shape of each of these lines that a reader wants (none for a
        line that is always read), and those of them that a signature may match."""
        segs = [buf[s:spans[s]] for s in starts]
        cut = b"\n".join(segs).translate(None, _SHAPE_DELETE).split(b"\n")
        shapes: dict[int, bytes] = {}
        check, check_segs = [], []
        for start, seg, shape in zip(starts, segs, cut):
            # (a line read in another form than its bytes, ANSI-coloured or JSON, is always
            # read, as is a non-ASCII one: the supersets run on bytes, where \w is ASCII. One
            # with escapes is checked as it is and unescaped, as _candidate reads it: vLLM
            # logs every request with its prompt's repr, `\n`s and all)
            if len(seg) > REPEAT_LINE or not seg.isascii() or b"\x1b" in seg or b"#033[" in seg or b'{"' in seg:
                continue
            shapes[start] = shape
            check.append(start)
            check_segs.append(_checked_form(seg))
        maybe: set[int] = set()
        # A saturated shape's lines are checked one by one with its own signatures (_finds),
        # and with its others where the union of those may match (in `others`, not `maybe`).
        saturated = self._saturated
        for sat in (False, True):
            group = [k for k in range(len(check)) if (shapes[check[k]] in saturated) == sat]
            if not group:
                continue
            plan = self.plan
            lines = [check_segs[k] for k in group]
            block = b"\n".join(lines)
            seen = {shapes[check[k]] for k in group}
            plain = b"\\" not in block
            if sat:
                ids = frozenset().union(*(saturated[sh][1] for sh in seen))
            else:
                ids = plan.block_signatures(seen, block, plain)
            union = plan.signature_union(ids, repeated=True, shapes=seen if plain else None) if ids else None
            hit = ({check[k] for k in group} if ids else set()) if union is None else \
                {check[group[k]] for k in _block_lines(union, block, lines)}
            if sat:
                self._others_may = hit
            else:
                maybe = hit
        return shapes, maybe

    def _learn_inert(self, shapes: Counter, reader: frozenset) -> None:
        """Shapes of candidate lines that hold no reader's word (their counts): one repeated
        REPEAT_READS times, that no line holding a reader's word can have, is inert as a
        shape read that often to no effect is (REPEAT_NOTE): its lines matter only where a
        signature matches them, which blanked lines are checked for (Source._masked_lines).
        For the standard library's passes only, whose cost grows with every line a pass
        stops on (a file of one such line type: 17-33 MB/s, 46-68 blanked); RE2's one DFA
        and its demoted anchors (DENSE_NOTE) were faster than blanking (89 -> 71 MB/s)."""
        cuts = self.plan.reader_cuts(reader)
        for shape, c in shapes.items():
            if c >= REPEAT_READS and len(shape) <= REPEAT_LINE and shape not in self._inert \
                    and shape not in self._saturated and not any(cut in shape for cut in cuts):
                self._inert.add(shape)

    def _signature_lines(self, buf: bytes, starts: list[int], spans: dict[int, int]) -> tuple[set[int], set[int]]:
        """Of these candidate lines (no reader's word), the ones checked here and those of
        them a signature may match: all of them searched at once with the union of the
        supersets of the signatures their anchors can belong to (Plan.shape_signatures),
        instead of each line's signatures in turn (Source._matches, ~15 us a line: a benign
        warning that 64 ranks print on every step held a log at 61 MB/s, 107 now). A
        non-ASCII line is left to _matches (the supersets run on bytes, where \\w is
        ASCII), as are all when the union does not compile."""
        segs, kept = [], []
        for s in starts:
            seg = buf[s:spans[s]]
            if seg.isascii():
                segs.append(seg)
                kept.append(s)
        if len(kept) < BULK_LINES:
            return set(), set()
        block = b"\n".join(segs)
        cut = block.translate(None, _SHAPE_DELETE).split(b"\n")
        plan = self.plan
        shapes = set(cut)
        ids = frozenset().union(*map(plan.shape_signatures, shapes))
        if plan.prefilter != "re2" and plan.union_chars(ids) > UNION_CHARS:
            # sre tries a union's alternatives one by one: on lines of many kinds, each
            # line's own few signatures are cheaper (a file of benign lines each holding some
            # anchor: 1.2 MB/s in bulk, 8 line by line)
            return set(), set()
        ids = plan.present_signatures(ids, block)
        wanted: set[int] = set()
        if ids:
            union = plan.signature_union(ids, shapes=shapes if b"\\" not in block else None)
            if union is None:
                return set(), set()
            wanted = set(_block_lines(union, block, segs))
        if plan.prefilter == "passes" and len(cut) >= REPEAT_MIN:
            # (the shapes of the lines no signature may match)
            self._learn_inert(Counter(cut if not wanted else (sh for k, sh in enumerate(cut) if k not in wanted)),
                              plan.reader_words(self.facts))
        return set(kept), {kept[k] for k in wanted}

    def _read_shaped(self, shape: bytes, buf: bytes, start: int, stop: int, line_no: int, anchors: list,
                     tallies: tuple) -> None:
        """Read a line that has a shape (REPEAT_NOTE), and count the reads in a row after
        which the shape had changed nothing but the error tallies and the same findings
        (tallies: before the read); after REPEAT_READS of them the shape is inert, or, when
        its lines record findings, saturated. A shape whose lines are error lines is not
        counted before the first error samples are taken: they are read lines'
        (MAX_ERROR_SAMPLES)."""
        before = self._state()
        self._just = []
        self._candidate(buf, start, stop, line_no, anchors)
        found, self._just = frozenset(self._just), None
        repeat = self._repeat
        known = self._shape_findings.get(shape)
        if self._state() != before or (found and b"\\" in buf[start:stop]) or (
                found != known if known is not None else bool(found)):
            repeat[shape] = 0
            if len(self._shape_findings) < REPEAT_SHAPES or shape in self._shape_findings:
                self._shape_findings[shape] = found
        elif shape in repeat or len(repeat) < REPEAT_SHAPES:
            repeat[shape] = repeat.get(shape, 0) + 1
            after = self._tallies()
            if after != tallies:
                self._repeat_errors[shape] = after[0] - tallies[0]
            if repeat[shape] >= REPEAT_READS and (
                    not self._repeat_errors.get(shape) or len(self.error_samples) >= MAX_ERROR_SAMPLES):
                if found and self._saturated.get(shape, (None,))[0] == found:
                    pass
                elif found:
                    # and the other signatures the shape may hold an anchor, the literal and
                    # some alternative's required text of
                    plan = self.plan
                    others = frozenset(n for n in plan.shape_signatures(shape)
                                       if n not in found and plan.may_hold(n, shape))
                    self._saturated[shape] = (found, others)
                    # (a shape whose lines record a finding or nothing, as their digits fall, is
                    # saturated, not inert: _finds sends the lines that differ back to be read)
                    self._inert.discard(shape)
                elif shape not in self._saturated:
                    self._inert.add(shape)

    def _state(self) -> tuple:
        """What reading a line may change, beyond the error tallies, the origins and the
        findings' counts."""
        return (len(self.facts), self.job.state(), self.hang.state())

    def _finds_once(self, seen: dict, seg: bytes, saturated: tuple, others_may: bool) -> bool:
        """_finds, asked once per distinct line (seen: this buffer's answers so far)."""
        ok = seen.get((seg, others_may))
        if ok is None:
            ok = seen[(seg, others_may)] = self._finds(seg, saturated, others_may)
        return ok

    def _finds(self, seg: bytes, saturated: tuple, others_may: bool) -> bool:
        """Whether a line of a saturated shape (ASCII, no escape) records exactly its
        signatures' findings, as _candidate would (`^`: on the message after the prefix): each
        of them matches, and (where their union may match: others_may) none of the others
        its shape may hold."""
        if b"\\" in seg:
            return False
        plan = self.plan
        text = seg.decode("ascii").rstrip("\r\n")
        rest = None
        found, others = saturated
        for n in ((*found, *others) if others_may else found):
            rx = plan.signature_checks[n][0]
            hit = rx.search(text) is not None
            if not hit and n in plan.anchored:
                if rest is None:
                    rest = parse_prefix(text)[1]
                hit = rest is not text and rx.search(rest) is not None
            if hit != (n in found):
                return False
        return True

    def _tallies(self) -> tuple:
        """The error tallies a line read may change (Source._error_like, TRACE_MARKERS)."""
        return (self.error_lines, self.last_error_line, id(self.last_exception))

    def _matches(self, raw: bytes) -> bool:
        """Whether a signature may match this line, which holds no reader's word (so no
        ANSI code, escape or JSON: its text is its decoded bytes). A signature
        anchored at the start of the message (`^`) needs the prefix parsed: it counts as a
        match, and _candidate decides."""
        plan = self.plan
        text = raw.decode("utf-8", "replace").rstrip("\r\n")
        # the signatures of the anchors its shape can hold (memoized per shape), not of the
        # anchors it holds: finding those took ~17 us a line with the stdlib's trie
        for n in plan.shape_signatures(raw.translate(None, _SHAPE_DELETE)):
            rx, literal = plan.signature_checks[n]
            if literal and literal not in text:
                continue
            if n in plan.anchored or rx.search(text):
                return True
        return False

    def _complete_pending(self, buf: bytes, end: int, final: bool) -> None:
        hi = min(end, 2 * WINDOW)
        region = buf[:hi]
        if self.ended_cr and region.startswith(b"\n"):
            region = region[1:]
        got = _complete_lines(region, final and hi == end)
        still = []
        for d in self.pending:
            d["after"] += got[:CONTEXT_LINES - len(d["after"])]
            if len(d["after"]) < CONTEXT_LINES and hi == end and not final:
                still.append(d)
        self.pending = still

    def _attach_context(self, d: dict, buf: bytes, start: int, stop: int) -> dict:
        lo = max(0, start - 2 * WINDOW)
        region = buf[lo:start]
        if lo == 0 and self.ended_cr and region.startswith(b"\n"):
            region = region[1:]
        before = _complete_lines(region)
        d["before"] = ((self.recent if lo == 0 else []) + before)[-CONTEXT_LINES:]
        hi = min(self._end, stop + 2 * WINDOW)
        after = _complete_lines(buf[stop:hi], self._final and hi == self._end)[1:]
        d["after"] = after[:CONTEXT_LINES]
        if len(d["after"]) < CONTEXT_LINES and hi == self._end and not self._final:
            self.pending.append(d)
        return d

    def _head_words(self) -> frozenset:
        """The words the head still looks for: context keys and context signatures' literals
        read from fewer than HEAD_KEY_LINES lines."""
        plan, key_lines = self.plan, self.head_key_lines
        return frozenset([k for k in plan.context_keys if key_lines.get(k, 0) < HEAD_KEY_LINES]
                         + [lit for lit, sigs in plan.context_sigs_by_literal.items()
                            if any(self.counts.get(n, 0) < HEAD_KEY_LINES for n, _, _ in sigs)])

    def _head(self, buf: bytes, end: int) -> None:
        region = buf[:min(end, HEAD_BYTES)]
        plan = self.plan
        cr = b"\r" in region
        counted_to, line_no = 0, self.lines
        latest: dict[int, tuple] = {}   # signature -> its last match, once KEEP_FIRST are kept
        key_lines = self.head_key_lines
        begin = 0
        while begin < len(region):
            # A word is looked for until HEAD_KEY_LINES lines held it: the head is read in
            # slices, each with the passes of the words still wanted, so that a line
            # printed on every line of the head ("huggingface/tokenizers: The current
            # process just got forked") stops costing a Python loop once it has been read.
            words = self._head_words()
            if not words:
                break
            stop = region.find(b"\n", min(begin + HEAD_SLICE, len(region)))
            stop = len(region) if stop == -1 else stop + 1
            spans: dict[int, int] = {}
            _collect_spans(plan.word_passes(words, region[:SAMPLE_BYTES]), region, stop, cr, spans, begin)
            restart = None
            for j, start in enumerate(sorted(spans)):
                if j % 64 == 63 and self._head_words() != words:
                    # a word was read enough: the rest of this slice goes with the passes of
                    # the words left (a scan slice's head may be shorter than HEAD_SLICE)
                    restart = start
                    break
                seg = region[start:spans[start]]
                text = None
                present = plan.head_words_in(seg)
                keys = [k for k in present if k in plan.context_keys and key_lines.get(k, 0) < HEAD_KEY_LINES]
                if keys:
                    # versions and the launcher are printed once, at the start; a key that
                    # healthy jobs print on every line ("deepspeed") is read a bounded number
                    # of times
                    for k in keys:
                        key_lines[k] = key_lines.get(k, 0) + 1
                    text = strip_ansi(seg.decode("utf-8", "replace"))
                    context.extract(text, self.facts)
                for n, sig, rx in sorted(x for w in present for x in plan.context_sigs_by_literal.get(w, ())):
                    if self.counts.get(n, 0) >= HEAD_KEY_LINES:
                        continue   # like a context key, a context signature is read a bounded number of times
                    if text is None:
                        text = strip_ansi(seg.decode("utf-8", "replace"))
                    m = rx.search(text)
                    if not m:
                        continue
                    line_no += region.count(b"\n", counted_to, start)
                    counted_to = start
                    if len(self.findings.get(n, ())) <= KEEP_FIRST:
                        self._record(n, self._context_finding(line_no + 1, text, m))
                    else:
                        # counted now, placed once: the prefix is parsed for the last one only
                        self.counts[n] += 1
                        latest[n] = (line_no + 1, text, m)
            begin = stop if restart is None else restart
        for n, (line, text, m) in latest.items():
            self.findings[n][-1] = self._context_finding(line, text, m)

    def _context_finding(self, line_no: int, text: str, m: re.Match) -> dict:
        meta, _ = parse_prefix(text)
        facts = {k: v for k, v in m.groupdict().items() if v is not None}
        return dict(self._where(line_no, text, meta), facts=facts, before=[], after=[])

    def _candidate(self, buf: bytes, start: int, stop: int, line_no: int, anchors: list) -> None:
        raw = buf[start:stop]
        text = strip_ansi(raw.decode("utf-8", "replace")).rstrip("\r\n")
        meta, rest = parse_prefix(text)
        # A traceback flattened into one JSON string (a log shipper, a notebook's
        # output): its lines are read one by one, with quotes unescaped.
        pieces = _flattened(rest) if "\\n" in rest else ([rest] if meta.pop("shipper", False) else None)
        haystack = text if pieces is None else text + "\n" + "\n".join(pieces)   # for literal checks
        self._note_origin(meta)
        context.extract(text, self.facts)
        if self.hang.add(text, meta, line_no, self.name):
            # a watchdog's "Stack trace of the failed collective:": its frames are the next
            # lines, which hold no anchor
            if buf[stop:stop + 1] in (b"\n", b"\r"):
                self._follow(buf, stop + (2 if buf[stop:stop + 2] == b"\r\n" else 1), self._end, self._final)
            else:
                self.hang.stop_following()     # a header cut by the window or the input's end
        if self.job.add(text, meta, rest, line_no):
            # a traceback waits for its exception line, a launcher report for its fields
            if buf[stop:stop + 1] in (b"\n", b"\r") and line_no >= self.job.seen_to:
                self._follow_job(buf, stop + (2 if buf[stop:stop + 2] == b"\r\n" else 1), self._end,
                                 self._final, line_no + 1)
        where = None
        tried: set[int] = set()
        for a in anchors:
            for n, sig, rx, literal in self.plan.sigs_by_anchor[a]:
                if n in tried or (literal and literal not in haystack):
                    continue
                tried.add(n)
                # `^` in a signature means the start of the message, after any prefix
                m = rx.search(text)
                if m is None and rest is not text and n in self.plan.anchored:
                    m = rx.search(rest)
                if m is None and pieces:
                    m = next((m for m in map(rx.search, pieces) if m), None)
                if not m:
                    continue
                if where is None:
                    where = self._where(line_no, text, meta)
                facts = {k: v for k, v in m.groupdict().items() if v is not None}
                finding = dict(where, facts=facts)
                if sig["strength"] == "context":
                    # printed by healthy runs too: only its facts are used, never shown
                    finding["before"], finding["after"] = [], []
                    self._record(n, finding)
                else:
                    self._record(n, self._later(finding, start, stop))
        if any(m in text for m in TRACE_MARKERS):
            self.last_error_line = line_no
        if any(w in text for w in ERROR_WORDS):
            for piece in pieces or [rest]:
                self._error_like(buf, start, stop, line_no, text, meta, piece)
        if self.collect_shapes:
            sh = fold(rest)
            if sh and sh not in self.shapes and len(self.shapes) < MAX_SHAPES:
                self.shapes[sh] = {"source": self.name, "line": line_no, "text": text[:500]}

    def _follow(self, buf: bytes, pos: int, end: int, final: bool) -> None:
        """Give the stack that waits for frames the lines of buf[pos:end] (pos at a line
        start), one by one, until it ends; it keeps waiting when the buffer ends first, and
        the next buffer goes on (_scan), so frames do not depend on where chunks are cut."""
        hang = self.hang
        while hang.wants_following():
            if pos >= end:
                if final:
                    hang.stop_following()
                return
            limit = min(end, pos + FRAME_BYTES)
            stop = _line_end(buf, pos, limit)
            if stop == limit and not (final and stop == end):
                # no line end within FRAME_BYTES (too long for a frame) or at a window's
                # cut inside a very long line
                hang.stop_following()
                return
            hang.add_frame(buf[pos:stop].decode("utf-8", "replace"))
            pos = stop + (2 if buf[stop:stop + 2] == b"\r\n" else 1)

    def _follow_job(self, buf: bytes, pos: int, end: int, final: bool, line_no: int) -> None:
        """Give the job model the lines of buf[pos:end] (pos at the start of line line_no)
        while it wants them; when the buffer ends first, the next buffer goes on (_scan)."""
        job = self.job
        self._job_next = 0
        while job.wants_following():
            if pos >= end:
                if final:
                    job.stop_following()
                else:
                    self._job_next = line_no
                return
            stop = _line_end(buf, pos, min(end, pos + WINDOW))
            job.follow(buf[pos:stop].decode("utf-8", "replace"), line_no)
            if stop >= end:
                if final:
                    job.stop_following()
                else:
                    self._job_next = line_no + 1
                return
            line_no += 1
            nxt = stop + (2 if buf[stop:stop + 2] == b"\r\n" else 1)
            if buf[stop:stop + 1] not in (b"\n", b"\r"):
                # a line longer than the window: skip to its end
                e = _line_end(buf, stop, end)
                nxt = e + (2 if buf[e:e + 2] == b"\r\n" else 1)
            pos = nxt

    def _where(self, line_no, text, meta) -> dict:
        w = {"source": self.name, "order": self.order, "line": line_no, "text": text[:1000]}
        for k in ("ts", "rank", "local_rank", "host", "pid", "task"):
            if k in meta:
                w[k] = meta[k]
        if "ts" not in w and self.last_ts is not None:
            w["ts_inherited"] = self.last_ts
        return w

    def _later(self, d: dict, start: int, stop: int) -> dict:
        """Attach d's context lines at the end of this buffer, if d is still kept then."""
        self._unattached[id(d)] = (d, start, stop)
        return d

    def _record(self, n: int, finding: dict) -> None:
        if self._just is not None:
            self._just.append(n)
        c = self.counts.get(n, 0) + 1
        self.counts[n] = c
        kept = self.findings.setdefault(n, [])
        if len(kept) <= KEEP_FIRST:
            kept.append(finding)          # the first ones, then one slot for the latest
        else:
            self._unattached.pop(id(kept[-1]), None)   # replaced: it never needs context
            kept[-1] = finding

    def _error_like(self, buf, start, stop, line_no, text, meta, rest) -> None:
        if _ERRORISH.search(rest):
            self.error_lines += 1
            # a few error lines, for "nearest entries" when no signature decides
            if len(self.error_samples) < MAX_ERROR_SAMPLES:
                self.error_samples.append(rest[:300])
            else:
                self.error_samples[-1] = rest[:300]
            self.last_error_line = line_no
            if self.first_error is None:
                self.first_error = self._later(self._where(line_no, text, meta), start, stop)
        m = _EXCEPTION.match(rest)
        if m and m.group("name") not in ("ChildFailedError",):
            if self.last_exception is not None:
                self._unattached.pop(id(self.last_exception), None)
            self.last_exception = self._later(self._where(line_no, text, meta), start, stop)


_BANNER = JOB_BANNER.encode()

# U+FF01..FF3F and U+FF40..FF5E in UTF-8; a regex with one first byte runs at memchr
# speed, where `in` costs ~1 ns/B for each of the two prefixes
_FULLWIDTH_RX = re.compile(b"\xef[\xbc\xbd]")
_ASCII = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)}
_ASCII[0x3000] = 0x20   # ideographic space


def _ascii_punctuation(data: bytes) -> bytes:
    return data.decode("utf-8", "surrogateescape").translate(_ASCII).encode("utf-8", "surrogateescape")


# A JSON string may spell a character as \uXXXX: Docker's json-file driver writes <, > and &
# so (moby jsonlog/jsonlogbytes.go, ffjsonWriteJSONBytesAsString), Python's json.dumps every
# non-ASCII character (a localized "已杀死"), .NET also ' and +. The bytes the anchors and
# signatures look for are the characters, so such escapes are read as what they stand for,
# except where that would end the string or the line (", \, control characters). An escaped
# backslash before "u" is a backslash, not an escape (the alternation takes it first).
_JSON_U = re.compile(rb"\\\\|\\u([0-9a-fA-F]{4})(?:\\u([dD][c-fC-F][0-9a-fA-F]{2}))?")


def _json_char(m: re.Match) -> bytes:
    if m.group(1) is None:
        return m.group(0)
    cp = int(m.group(1), 16)
    if 0xD800 <= cp < 0xDC00 and m.group(2):
        cp = 0x10000 + ((cp - 0xD800) << 10) + int(m.group(2), 16) - 0xDC00
    elif m.group(2):
        return m.group(0)
    if cp < 0x20 or cp in (0x22, 0x5C, 0x7F) or 0xD800 <= cp < 0xE000:
        return m.group(0)
    return chr(cp).encode("utf-8")


def _readable(data: bytes) -> bytes | None:
    """data with full-width punctuation as ASCII (an IDE or a CJK locale: signatures and
    anchors are written with ":" and "(", not "：" and "（") and JSON \\u escapes read; None
    when it holds neither (the usual case, found at memchr speed)."""
    out = None
    if b"\\u" in data:
        out = _JSON_U.sub(_json_char, data)
    if _FULLWIDTH_RX.search(out or data):
        out = _ascii_punctuation(out or data)
    return out


_ESCAPES = re.compile(r'\\([nrt"\\/])')
_UNESCAPE = {"n": "\n", "r": "\n", "t": "\t"}     # the other escaped characters stand for themselves
_ESCAPES_BYTES = re.compile(_ESCAPES.pattern.encode())
_UNESCAPE_BYTES = {k.encode(): v.encode() for k, v in _UNESCAPE.items()}


def _checked_form(seg: bytes) -> bytes:
    """A candidate line as a union of supersets checks it (Source._repeats, _masked_lines): as
    it is and, where it holds escapes, also unescaped on the lines after it, as _candidate
    reads it (_flattened)."""
    if b"\\" not in seg:
        return seg
    return seg + b"\n" + _ESCAPES_BYTES.sub(lambda m: _UNESCAPE_BYTES.get(m.group(1), m.group(1)), seg)


def _flattened(text: str) -> list[str]:
    """The lines of a JSON-escaped multi-line string held in one log line."""
    unescaped = _ESCAPES.sub(lambda m: _UNESCAPE.get(m.group(1), m.group(1)), text)
    return [p for p in unescaped.split("\n") if p.strip()][:200]


# RE2_NOTE. Where Google's RE2 is installed (`pip install 'faildex[fast]'`, the
# google-re2 wheel), the CLI's prefilter is one RE2 search for an alternation of every
# anchor: RE2 compiles it to a DFA that reads each byte once (~2 ns/B here, whatever the
# anchors' bytes), where the stdlib passes read the buffer once per key byte (~0.5-1.5
# ns/B each, 26 of them). The lines it finds are the same (tests/test_engine.py), so
# the report is too. FAILDEX_PREFILTER=passes keeps the stdlib passes (the benchmarks
# measure both); Pyodide has no RE2 and uses the host's finder (set_hit_finder).
RE2_MAX_MEM = 64 << 20    # the DFA's state cache; ~425 literals need a few MB


def _re2_module():
    if os.environ.get("FAILDEX_PREFILTER") == "passes":
        return None
    try:
        import re2
    except ImportError:
        return None
    return re2


def prefilter_name() -> str:
    """What finds the anchors in this process: "re2" or the stdlib "passes"."""
    if _hit_finder is not None:
        return "host"
    return "re2" if _re2_module() is not None else "passes (pip install 'faildex[fast]' for RE2, 3-5x faster)"


def _re2_set(words: list[bytes]):
    """An RE2 set of the literals (re2.Set), when RE2 is installed and the installed prefilter
    is RE2's; None otherwise (the stdlib passes and the browser keep _Which's trie)."""
    re2 = _re2_module()
    if re2 is None or _hit_finder is not None or not hasattr(re2, "Set") or not words:
        return None
    found = re2.Set.SearchSet(re2.Options())
    for w in words:
        if found.Add(re.escape(w)) < 0:
            return None
    found.Compile()
    return found


def _re2_alternation(re2, anchors: list[bytes]):
    """RE2 for "any of anchors", bytes read as Latin-1 (one byte, one character)."""
    return _re2_compile(re2, _re2_pattern(anchors))


_hit_finder = None
_plans: dict[tuple, tuple[dict, Plan]] = {}
PLANS_KEPT = 4


def plan_for(index: dict, baseline_mode: bool = False) -> Plan:
    """The Plan of an index, compiled once: compiling ~460 signatures and the passes
    takes ~0.1 s, which every small input paid again (what a Plan holds does not
    depend on an input; its one memo is of compiled head passes). Keyed by the index
    object (kept alive here, so its id is not reused), the mode and the host's hit
    finder."""
    key = (id(index), baseline_mode, _hit_finder, os.environ.get("FAILDEX_PREFILTER"))
    hit = _plans.get(key)
    if hit is None:
        if len(_plans) >= PLANS_KEPT:
            _plans.pop(next(iter(_plans)))
        hit = _plans[key] = (index, Plan(index, baseline_mode=baseline_mode))
    return hit[1]


def set_hit_finder(factory) -> None:
    """Let the host find the anchors: factory(anchors: list[bytes]) returns a function
    (buf: bytes, end: int, begin: int) -> ascending offsets in buf[begin:end] at which
    some anchor occurs, at least one on every line that holds one (begin is always a
    line start). Plans made afterwards use it in place of their regex passes, for the
    scan and for the head; None restores the passes."""
    global _hit_finder
    _hit_finder = factory


def _trie(words: list[bytes]) -> bytes:
    """One regex for many literals, nested by shared prefix (A(?:ssert|ttempt)|C...):
    one _keyed_trie per first byte.

    re tries the alternatives of a flat alternation one after another at every
    position whose byte starts any of them; nesting by prefix makes that one test
    per byte of input, which more than doubles the scan speed with ~100 anchors."""
    groups: dict[bytes, list[bytes]] = {}
    for w in words:
        groups.setdefault(w[:1], []).append(w)
    return b"|".join(_keyed_trie(first, group) for first, group in sorted(groups.items()))


# A pass stops calling bytes.find once its key has come up more than once per this
# many bytes of the buffer so far: from there sre's own scan (~0.75 ns/B) is cheaper
# than a Python round trip (~300 ns) at every occurrence.
FIND_SPACING = 400


def _collect_spans(passes, buf: bytes, end: int, cr: bool, spans: dict[int, int], begin: int = 0) -> None:
    """Each line of buf[begin:end] holding a hit of one of the passes: start -> end in spans.
    A pass hops from key to key with bytes.find and tries its regex there, until the
    key proves frequent in this buffer; then re's own search scans the rest. After a
    hit, a pass goes on from the end of its line."""
    find = buf.find
    for key, rx in passes:
        if key is None:
            # the host's finder (set_hit_finder): offsets of hits, ascending
            stop = begin
            for pos in rx(buf, end, begin):
                if pos < stop:
                    continue        # a further anchor on a line already taken
                start, stop = _segment(buf, pos, cr)
                spans[start] = max(spans.get(start, 0), stop)
            continue
        if not key:
            # one RE2 DFA over every anchor: each search finds the next candidate line
            pos = begin
            while (m := rx.search(buf, pos, end)) is not None:
                pos = m.start()
                start, stop = _segment(buf, pos, cr)
                spans[start] = max(spans.get(start, 0), stop)
                pos = max(stop, pos + 1)
            continue
        tries, frequent = 0, False
        pos = find(key, begin, end)
        while pos != -1:
            if not frequent:
                tries += 1
                frequent = not tries & 63 and pos - begin < tries * FIND_SPACING
            if frequent:
                m = rx.search(buf, pos, end)
                if m is None:
                    break
                pos = m.start()
            elif not rx.match(buf, pos, end):
                pos = find(key, pos + 1, end)
                continue
            start, stop = _segment(buf, pos, cr)
            spans[start] = max(spans.get(start, 0), stop)
            pos = max(stop, pos + 1)
            if not frequent:
                pos = find(key, pos, end)


def _keyed_passes(words, sample: bytes = b"") -> list[tuple[bytes, list[bytes]]]:
    """Group words under key bytes, each word under one byte it holds: a pass hops from one
    occurrence of its key to the next (bytes.find) and tries the group's trie there, so its
    cost is how often the key occurs. Each word goes under its byte that is rarest in
    sample (text like the text to be searched), ties to the byte later in KEY_ORDER."""
    groups: dict[int, list[bytes]] = {}
    seen: dict[int, int] = {}
    for w in sorted(set(words)):
        for c in set(w):
            if c not in seen:
                seen[c] = sample.count(bytes([c]))
        key = min(set(w), key=lambda c: (seen[c], -_RARITY.get(c, 255)))
        groups.setdefault(key, []).append(w)
    return [(bytes([c]), ws) for c, ws in sorted(groups.items())]


# printable bytes from most to least common in entries/healthy/*.log (counted 2026-12-05):
# when the sample says nothing (a key byte absent from it), the rarer byte wins the tie
KEY_ORDER = b' 0e:1na2tio3rs4-C5lc/6[]78Npm9d."_I,LPOuhfvFb>AgxTykREMD=SGB|()wU\'{}HWzq<V*+%j;`!X&K?Y\\@$Z#QJ^~'
_RARITY = {c: i for i, c in enumerate(KEY_ORDER)}


def _keyed_trie(key: bytes, anchors: list[bytes]) -> bytes:
    """One regex that matches at an occurrence of key when one of the anchors (which
    all hold key) is there: key, then a trie of what follows key in each anchor, then
    a lookbehind for the whole anchor where some text precedes key in it
    ("U(?:DA error(?<=CUDA error)|...)"). An anchor that starts with key needs no
    lookbehind, and ends its branch of the trie: any hit only marks a candidate line."""
    tree: dict = {}
    for a in anchors:
        i = a.index(key)
        node = tree
        for ch in a[i + len(key):]:      # a key of several bytes (a non-ASCII character)
            node = node.setdefault(ch, {})
        node.setdefault(None, set()).add(a if i else b"")

    def emit(node: dict) -> bytes:
        ends = node.get(None, set())
        if b"" in ends:
            return b""
        alts = [re.escape(bytes([ch])) + emit(node[ch]) for ch in sorted(k for k in node if k is not None)]
        alts += [b"(?<=" + re.escape(a) + b")" for a in sorted(ends)]
        return alts[0] if len(alts) == 1 else b"(?:" + b"|".join(alts) + b")"

    return re.escape(key) + emit(tree)


def _segment(buf: bytes, pos: int, cr: bool = True) -> tuple[int, int]:
    """The line (between \\n or \\r) around pos, at most WINDOW bytes on either side.

    Every search is bounded by the window, and a buffer with no \\r at all (cr
    False, known from one memchr per chunk) is not searched for one: that search
    would run the whole window each time."""
    lo = max(0, pos - WINDOW)
    if cr:
        start = max(buf.rfind(b"\n", lo, pos), buf.rfind(b"\r", lo, pos)) + 1
    else:
        start = buf.rfind(b"\n", lo, pos) + 1
    if start == 0:
        start = lo
    limit = min(len(buf), pos + WINDOW)
    if not cr:
        stop = buf.find(b"\n", pos, limit)
        return start, (limit if stop == -1 else stop)
    return start, _line_end(buf, pos, limit)


def _line_end(buf: bytes, pos: int, limit: int) -> int:
    a = buf.find(b"\n", pos, limit)
    b = buf.find(b"\r", pos, limit)
    if a == -1:
        return limit if b == -1 else b
    return a if b == -1 else min(a, b)


_SPLIT = re.compile(rb"\r\n|\n|\r")


def _complete_lines(region: bytes, final: bool = False, width: int = 300) -> list[str]:
    """The lines of region, each cut at width characters; the last piece counts only when
    final (it may be cut)."""
    if not region:
        return []
    parts = _SPLIT.split(region)
    if final:
        while parts and not parts[-1]:
            parts.pop()
    else:
        parts = parts[:-1]
    return [strip_ansi(x.decode("utf-8", "replace"))[:width] for x in parts]


def merge_ranges(parts: list[Source]) -> Source:
    """Join the scans of consecutive ranges of one input into one Source."""
    head = parts[0]
    for part in parts[1:]:
        for d in head.pending:
            d["after"] += (part.first_lines or [])[:CONTEXT_LINES - len(d["after"])]
        head.pending = part.pending
        head.launcher_banner = head.launcher_banner or part.launcher_banner
        shift = head.lines
        head.hang.merge(part.hang, shift)
        head.job.merge(part.job, shift, head.job.carry_over(part.head_lines or [], shift))
        for kept in part.findings.values():
            for f in kept:
                f["line"] += shift
        for n, kept in part.findings.items():
            mine = head.findings.setdefault(n, [])
            merged = mine + kept
            head.findings[n] = merged[:KEEP_FIRST] + merged[-1:] if len(merged) > KEEP_FIRST + 1 else merged
            head.counts[n] = head.counts.get(n, 0) + part.counts[n]
        for k, v in part.facts.items():
            head.facts.setdefault(k, v)
        head.hosts |= part.hosts
        head.ranks |= part.ranks
        if part.first_error and head.first_error is None:
            head.first_error = dict(part.first_error, line=part.first_error["line"] + shift)
        if part.last_exception:
            head.last_exception = dict(part.last_exception, line=part.last_exception["line"] + shift)
        head.error_lines += part.error_lines
        samples = head.error_samples + part.error_samples   # the first ones and the latest
        head.error_samples = samples[:MAX_ERROR_SAMPLES - 1] + samples[-1:] if len(samples) > MAX_ERROR_SAMPLES \
            else samples
        if part.last_error_line:
            head.last_error_line = part.last_error_line + shift
        head.candidates += part.candidates
        for sh, where in part.shapes.items():
            if sh not in head.shapes and len(head.shapes) < MAX_SHAPES:
                head.shapes[sh] = dict(where, line=where["line"] + shift)
        head.lines += part.lines
        head.bytes += part.bytes
        head.messages += [m for m in part.messages if m not in head.messages]
        if part.last_ts is not None:
            head.last_ts = part.last_ts
    return head


# ------------------------------------------------------------ dense anchors
# DENSE_NOTE. A benign line type that holds an anchor (each rank's deprecation warning,
# Slurm's "queued and waiting") can make most lines of a log candidates, and each costs
# Python calls: the prefilter's hit, the which-anchor search, the signatures. In the CLI
# (RE2 or the stdlib passes; the browser's host finder scans as before), a buffer whose
# first DENSE_PROBE bytes are mostly such lines has those anchors *demoted* for the
# buffer (Source._dense): the prefilter runs without them, and the lines that hold them
# are found by searches over the whole buffer instead of calls per line: lines that any
# of their signatures may match (each signature rewritten to a superset RE2 can run,
# _re2_superset), and lines that also hold a reader's word (DenseChecks). Every line
# found is then read exactly as before; the lines left out are those the scan would have
# skipped. Such lines' origins (time, host, rank) are read as skipped lines' are: each
# until ORIGIN_QUIET in a row name nothing new, then about one in ORIGIN_SAMPLE.
UNION_CHARS = 6000     # characters of supersets in one RE2 union (Plan.signature_groups)
# sets of signatures whose unions are kept compiled (signature_union): RE2 unions of their own
# hold memory (64 kept: bench/engine.py's anchor-mix, 105 MB, 416 MB on three processes; 16:
# 360 MB, 0.2 s slower; the session before own unions: 281 MB)
UNIONS_KEPT = 16
# a block of at most this many line shapes gets the standard library's union of only the
# alternatives its shapes can hold (Plan._stdlib_union)
SHAPES_FILTERED = 256
GROUP_MAX_MEM = 8 << 20   # RE2's default DFA budget for a group's union (2 MB ran out on the anchor-mix)
DENSE_MIN_BYTES = 256 << 10   # a smaller buffer is scanned as it is
DENSE_PROBE = 64 << 10   # bytes of a buffer's start looked at to decide
DENSE_MIN_LINES = 64     # candidate lines there, at least, and at least 1 line in DENSE_SHARE
DENSE_SHARE = 4
DENSE_SAMPLE = 128       # candidate lines whose anchors are counted
DENSE_OF = 2             # an anchor on at least 1 in DENSE_OF of them is demoted
RE2_MAX_REPEAT = 1000    # RE2 refuses a counted repetition above this


def _re2_superset(pattern: str, loose: bool = False) -> str:
    """pattern rewritten for RE2 so that it matches, on a line, wherever pattern does
    (and possibly elsewhere): lookarounds are dropped (they only ever refuse a match),
    a backreference becomes `.*`, atomic groups and possessive quantifiers become plain,
    named groups uncaptured (an alternation of signatures repeats names), a count
    above RE2_MAX_REPEAT unbounded, `\\Z` is `$` and `\\A` and `^` are dropped (a
    signature's `^` is the start of its message, after any prefix). With `(?m)` the
    result runs over many lines at once: without lookarounds, a match within a line
    is a match in the block. loose: every count unbounded (RE2 also refuses nested
    counts whose product passes its limit, "(?:, \\d{1,6}){0,200}")."""
    out: list[str] = []
    i, n = 0, len(pattern)

    while i < n:
        ch = pattern[i]
        if ch == "\\":
            esc = pattern[i:i + 2]
            out.append({"\\Z": "$", "\\A": ""}.get(esc, esc))
            i += 2
        elif ch == "[":
            j = _class_end(pattern, i)
            out.append(pattern[i:j])
            i = j
        elif pattern.startswith(("(?=", "(?!", "(?<=", "(?<!"), i):
            i = _group_end(pattern, i)
            if i > n:
                raise ValueError("unbalanced parenthesis")
        elif pattern.startswith("(?P=", i):
            out.append(".*")
            i = pattern.index(")", i) + 1
        elif pattern.startswith("(?P<", i):
            out.append("(?:")
            i = pattern.index(">", i) + 1
        elif pattern.startswith("(?>", i):
            out.append("(?:")
            i += 3
        elif ch == "^":
            i += 1
        elif ch == "+" and out and (out[-1] in ("*", "+", "?") or out[-1].endswith("}")):
            i += 1                     # possessive: the quantifier before it, plain
        elif ch == "{" and (m := re.match(r"\{(\d*)(,?)(\d*)\}", pattern[i:])):
            low, comma, high = m.groups()
            if loose or int(low or 0) > RE2_MAX_REPEAT or int(high or 0) > RE2_MAX_REPEAT:
                out.append("{%d,}" % min(int(low or 0), RE2_MAX_REPEAT))
            else:
                out.append(m.group(0))
            i += m.end()
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _class_end(pattern: str, j: int) -> int:
    """The index just past the `]` closing the class that opens at pattern[j]."""
    j += 1
    if pattern[j:j + 1] == "^":
        j += 1
    if pattern[j:j + 1] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j + 1


def _group_end(pattern: str, j: int) -> int:
    """The index just past the `)` closing the group that opens at pattern[j] (escapes and
    classes skipped), or past the end when it does not close."""
    depth, n = 0, len(pattern)
    while j < n:
        ch = pattern[j]
        if ch == "\\":
            j += 2
            continue
        if ch == "[":
            j = _class_end(pattern, j)
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return n + 1


def _split_top(pattern: str) -> list[str]:
    """pattern cut at each `|` outside any group, class or escape."""
    parts, start, j, n = [], 0, 0, len(pattern)
    while j < n:
        ch = pattern[j]
        if ch == "\\":
            j += 2
        elif ch == "[":
            j = _class_end(pattern, j)
        elif ch == "(":
            j = _group_end(pattern, j)
        else:
            if ch == "|":
                parts.append(pattern[start:j])
                start = j + 1
            j += 1
    parts.append(pattern[start:])
    return parts


def _alternatives(pattern: str, depth: int = 2) -> list[str]:
    """Regexes that together match wherever pattern does, each starting, where pattern
    allows, with plain text (_leading_literal): its top-level alternatives, and a
    non-capturing group of alternatives that starts it or follows its leading text
    multiplied out ("(?:a|b)c" -> "ac", "bc"; "Error: (?:x|y)" -> "Error: x", "Error: y"),
    twice at most."""
    out = []
    for alt in _split_top(pattern):
        lead = _leading_literal(alt) if depth else ""
        if depth and alt.startswith("(?:", len(lead)):
            end = _group_end(alt, len(lead))
            rest = alt[end:]
            if end <= len(alt) and rest[:1] not in ("*", "+", "?", "{"):
                out += [lead + a + rest for a in _alternatives(alt[len(lead) + 3:end - 1], depth - 1)]
                continue
        out.append(alt)
    return out


class _Led:
    """A regex every match of which starts with lead: bytes.find hops to each occurrence
    of it (memchr speed) and the regex is tried from there; compiled when lead is first
    found (a union's many alternatives are mostly absent from a block)."""

    __slots__ = ("lead", "pattern", "_rx")

    def __init__(self, lead: bytes, pattern: str):
        self.lead, self.pattern, self._rx = lead, pattern, None

    def search(self, buf: bytes, pos: int = 0, end: int | None = None):
        if end is None:
            end = len(buf)
        if self.lead:
            pos = buf.find(self.lead, pos, end)
            if pos < 0:
                return None
        if self._rx is None:
            self._rx = re.compile(self.pattern.encode())
        return self._rx.search(buf, pos, end)


class _Never:
    """The union of no alternative: it matches nowhere."""

    @staticmethod
    def search(buf: bytes, pos: int = 0, end: int | None = None):
        return None


_NEVER = _Never()


def _required_text(pattern: str) -> str:
    """The longest plain text outside any group, class or quantifier of pattern (which has
    no top-level alternation): text every match holds ("" where there is none)."""
    best, run = "", []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\" and i + 1 < n and not pattern[i + 1].isalnum():
            piece, j = pattern[i + 1], i + 2
        elif ch.isalnum() or ch in " _:,;=<>'\"`/@#%&~!-":
            piece, j = ch, i + 1
        else:
            piece = None
        if piece is not None:
            if pattern[j:j + 1] in ("*", "?", "{"):
                pass                      # optional: it ends the run, and is not part of it
            else:
                run.append(piece)
                if pattern[j:j + 1] != "+":
                    i = j
                    continue
            best = max(best, "".join(run), key=len)
            run = []
            i = j + 1 if pattern[j:j + 1] in ("*", "?", "+") else j
            continue
        best = max(best, "".join(run), key=len)
        run = []
        if ch == "(":
            i = _group_end(pattern, i)
        elif ch == "[":
            i = _class_end(pattern, i)
        elif ch == "{" and (m := re.match(r"\{\d*,?\d*\}", pattern[i:])):
            i += m.end()                  # a count, whose digits are no text
        else:
            i += 2 if ch == "\\" else 1
    return max(best, "".join(run), key=len)


def _leading_literal(pattern: str) -> str:
    """The plain text a regex starts with, which every match starts with: letters, digits,
    spaces and a few marks up to the first other character, or "" where the pattern has an
    alternation outside any group (its first branch's text is no prefix of the others)."""
    if len(_split_top(pattern)) > 1:     # its first branch's text is no prefix of the others
        return ""
    m = re.match(r"[A-Za-z0-9 _:,=<>'\"-]*", pattern)
    lead = m.group(0)
    # a quantifier after the run applies to its last character, which is then no prefix
    if lead and pattern[len(lead):len(lead) + 1] in ("*", "+", "?", "{"):
        lead = lead[:-1]
    return lead


def _re2_signature(re2, pattern: str) -> str | None:
    """The superset of a signature that RE2 (or, without it, the standard library)
    compiles, or None. Its loose form: RE2 refuses nested counts whose product passes its
    limit, and logs each refusal to stderr, where a user would see it."""
    try:
        sup = _re2_superset(pattern, loose=True)
        if re2 is None:
            re.compile(("(?m)" + sup).encode())
        else:
            _re2_compile(re2, ("(?m)" + sup).encode())
        return sup
    except Exception:    # re2.error, or a group the rewrite could not close
        return None


def _block_lines(union: list, block: bytes, lines: list[bytes]) -> set[int]:
    """The lines (their indexes) of block, lines joined by \\n, that a regex of union
    matches in: a superset's match may span lines (a \\s matches the \\n between two), and
    each line it touches may hold a signature's match. Mostly repeated lines are searched
    once each (a line that holds a match is found whatever its neighbours; one a match
    only touches may be found or not, and neither can hold a signature's match alone)."""
    if len(lines) >= 64 and len(set(lines)) * 2 <= len(lines):
        # (told in C first: most blocks of varied lines pay no Python loop for it)
        first: dict[bytes, int] = {}
        for ln in lines:
            first.setdefault(ln, len(first))
        uniq = list(first)
        hit = _block_lines(union, b"\n".join(uniq), uniq)
        return {k for k, ln in enumerate(lines) if first[ln] in hit}
    found: set[int] = set()
    offsets = None
    for rx in union:
        pos = 0
        while (m := rx.search(block, pos, len(block))) is not None:
            if offsets is None:     # where each line starts, once there is a match
                offsets = [0] + [e + k + 1 for k, e in enumerate(accumulate(map(len, lines)))]
            first = bisect_right(offsets, m.start()) - 1
            last = bisect_right(offsets, max(m.start(), m.end() - 1)) - 1
            found.update(range(first, min(last, len(lines) - 1) + 1))
            pos = m.end() if m.end() > m.start() else m.start() + 1
    return found


class Masked:
    """A buffer's lines of inert shapes (REPEAT_NOTE, Source._mask): the buffer the
    prefilter searches, with them blanked; their starts, bytes and shapes."""

    def __init__(self, buf: bytes, starts: list[int], ends: list[int], lines: list[bytes], shapes: list[bytes]):
        self.buf, self.starts, self.ends, self.lines, self.shapes = buf, starts, ends, lines, shapes
        # (start, stop, error lines counted) of the last one whose shape changes the error tallies
        self.last_error: tuple[int, int, int] | None = None

    def last_line(self, lo: int, hi: int, skipped: tuple | None) -> tuple | None:
        """The last line skipped before hi, whose time a finding there may inherit: skipped,
        or a blanked line starting in [lo, hi), whichever is later."""
        k = bisect_right(self.starts, hi - 1) - 1
        if k < 0 or self.starts[k] < lo or (skipped is not None and self.starts[k] < skipped[1]):
            return skipped
        return self.starts[k], self.ends[k]


class DenseChecks:
    """What a buffer with demoted anchors runs (see DENSE_NOTE): the prefilter without
    them, one search for lines their signatures may match, one for lines that hold
    one of them and a reader's word. With RE2 each is one DFA; with the standard library
    the signatures are one regex, and a reader's words are found by their passes, each
    hit's line kept when it holds a demoted anchor."""

    def __init__(self, plan: "Plan", dense: frozenset, reader: frozenset):
        re2 = plan._re2
        self.words = sorted(dense)
        patterns = sorted({plan.superset[n] for a in dense for n, *_ in plan.sigs_by_anchor[a]})
        signatures = ("(?m)" + "|".join(f"(?:{p})" for p in patterns)).encode() if patterns else None
        self.reader_passes = None
        if re2 is None:
            # a pass none of whose anchors is demoted is the plan's own, compiled once
            same = plan.passes if plan.prefilter == "passes" else [None] * len(plan.pass_groups)
            self.rest = [compiled if len(kept) == len(group) and compiled is not None
                         else (key, re.compile(_keyed_trie(key, kept)))
                         for (key, group), compiled in zip(plan.pass_groups, same)
                         if (kept := [a for a in group if a not in dense])]
            self.dense = re.compile(b"|".join(map(re.escape, self.words)))
            ids = frozenset(n for a in dense for n, *_ in plan.sigs_by_anchor[a])
            self.signatures = (plan.signature_union(ids) or [re.compile(signatures)]) if signatures else []
            self.readers = None
            self.reader_passes = plan.word_passes(reader)
            return
        rest = sorted(a for a in plan.anchors_in.words if a not in dense)
        self.rest = [(b"", _re2_alternation(re2, rest))] if rest else []
        self.dense = _re2_alternation(re2, self.words)
        self.signatures = [_re2_compile(re2, signatures)] if signatures else []
        # a line that holds a demoted anchor and a reader's word, in either order, or
        # overlapping (then the two written as one: "...WARN" + "WARNING" = "...WARNING")
        both = set()
        for a in dense:
            for r in reader:
                if a in r:
                    both.add(r)
                for k in range(1, min(len(a), len(r))):
                    if a.endswith(r[:k]):
                        both.add(a + r[k:])
                    if r.endswith(a[:k]):
                        both.add(r + a[k:])
        d, r = (_re2_pattern(sorted(dense)), _re2_pattern(sorted(reader)))
        alternatives = [b"(?:" + d + b")[^\\n]*(?:" + r + b")", b"(?:" + r + b")[^\\n]*(?:" + d + b")"]
        if both:
            alternatives.append(_re2_pattern(sorted(both)))
        self.readers = _re2_compile(re2, b"|".join(alternatives))

    def last_line(self, buf: bytes, lo: int, hi: int, skipped: tuple | None) -> tuple | None:
        """The last line skipped before buf[hi], whose time a finding there may inherit:
        skipped, or a line of buf[lo:hi] that holds a demoted anchor, whichever is later."""
        at = max(buf.rfind(a, lo, hi) for a in self.words)
        if at < 0 or (skipped is not None and at < skipped[1]):
            return skipped
        return _segment(buf, at, False)


def _re2_pattern(words: list[bytes]) -> bytes:
    """An alternation of literals for RE2 read as Latin-1: each byte outside [A-Za-z0-9]
    as \\xHH, so that no literal needs RE2's escaping rules."""
    return b"|".join(b"".join(bytes([c]) if chr(c).isalnum() and c < 128 else b"\\x%02x" % c for c in w)
                     for w in words)


def _re2_compile(re2, pattern: bytes, max_mem: int = RE2_MAX_MEM) -> "_Re2":
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.never_capture = True
    options.max_mem = max_mem
    return _Re2(re2, re2.compile(pattern, options))


class _Re2:
    """A compiled RE2 regex whose search(buf, pos, end) calls the binding's Match directly:
    google-re2's Python search builds a generator and a match object on every call
    (4.3 us a hit here against 1.3 us), and the scan searches once per candidate line.
    Where the binding is not as expected (another google-re2), its own search runs."""
    __slots__ = ("rx", "_match", "_anchor")

    def __init__(self, re2, rx):
        self.rx = rx
        regexp, anchor = getattr(rx, "_regexp", None), getattr(getattr(re2, "_Anchor", None), "UNANCHORED", None)
        self._match = regexp.Match if regexp is not None and anchor is not None else None
        self._anchor = anchor

    def search(self, buf: bytes, pos: int = 0, end: int | None = None):
        if self._match is None:
            return self.rx.search(buf, pos, len(buf) if end is None else end)
        end = len(buf) if end is None else min(end, len(buf))
        if pos > end:
            return None
        start, stop = self._match(self._anchor, buf, max(0, pos), end)[0]
        return None if start < 0 else _Hit(start, stop)


class _Hit:
    """Where a _Re2 search matched."""
    __slots__ = ("_start", "_end")

    def __init__(self, start: int, end: int):
        self._start, self._end = start, end

    def start(self) -> int:
        return self._start

    def end(self) -> int:
        return self._end
