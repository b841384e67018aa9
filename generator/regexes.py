"""Static analysis of signature regexes (build time only; the engine never parses).

Two questions are answered here:

* Which literal text must every match contain? The engine's prefilter scans raw
  bytes for a few such anchors and runs full regexes only on the lines that hold
  one, which is what makes scanning gigabytes fast.
* Could the pattern backtrack catastrophically? Contributors' regexes run on
  hostile input, so nested or overlapping unbounded repeats are refused.
"""
from __future__ import annotations

import functools
import re

from re import _constants as C  # type: ignore[attr-defined]  # Python 3.11+
from re import _parser as P  # type: ignore[attr-defined]

MIN_ANCHOR = 4       # shortest literal worth scanning for (UTF-8 bytes, anchor_size)


def anchor_size(lit: str) -> int:
    """How long a literal is for the prefilter: its UTF-8 bytes, which is what the
    scanner searches ("已杀死", bash's "Killed" under zh_CN, is three characters but
    nine bytes, rarer than any four ASCII letters)."""
    return len(lit.encode("utf-8"))


UNBOUNDED = C.MAXREPEAT


@functools.lru_cache(maxsize=2048)   # validation and the site walk each signature several times
def parse(pattern: str) -> list:
    """The parse tree every walker here reads: sre's, with an atomic group "(?>...)" read
    as a non-capturing group (its content inlined) and a possessive repeat "x*+" as a
    greedy one (they match the same text; only backtracking differs, and treating them as
    backtracking errs on the safe side), and every sequence a list. One normaliser, so no
    walker can treat them differently from another. The tree is shared (cached): no
    walker may change it."""
    parsed = P.parse(pattern)
    tree = _norm(parsed)
    tree.groupnames = {i: n for n, i in parsed.state.groupdict.items()}  # type: ignore[attr-defined]
    return tree


class _Tree(list):
    """A normalised sequence (a list that can carry the group names)."""


def _norm(items) -> "_Tree":
    out = _Tree()
    for op, av in items:
        if op is C.ATOMIC_GROUP:
            out.extend(_norm(av))     # as sre inlines a non-capturing group's content
            continue
        if op is C.POSSESSIVE_REPEAT:
            op = C.MAX_REPEAT
        if op is C.SUBPATTERN:
            av = (*av[:-1], _norm(av[-1]))
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
            av = (av[0], av[1], _norm(av[2]))
        elif op is C.BRANCH:
            av = (av[0], [_norm(b) for b in av[1]])
        elif op in (C.ASSERT, C.ASSERT_NOT):
            av = (av[0], _norm(av[1]))
        out.append((op, av))
    return out


def children(op, av) -> list:
    """The sequences inside one item (a group's content, a repeat's body, each branch)."""
    if op is C.SUBPATTERN:
        return [av[-1]]
    if op in (C.MAX_REPEAT, C.MIN_REPEAT):
        return [av[2]]
    if op is C.BRANCH:
        return list(av[1])
    return []


def _common_substrings(groups: list[list[str]], min_len: int = 3) -> list[str]:
    """Substrings of length >= min_len present in some literal of every group, maximal first."""
    if not groups or any(not g for g in groups):
        return []
    found: set[str] = set()
    for lit in groups[0]:
        for length in range(len(lit), min_len - 1, -1):
            for i in range(len(lit) - length + 1):
                sub = lit[i:i + length]
                if any(sub in f for f in found):
                    continue
                if all(any(sub in other for other in g) for g in groups[1:]):
                    found.add(sub)
    return sorted(found, key=lambda s: (-len(s), s))


def _literals(items) -> list[str]:
    """Literal runs that every match of this parsed sequence contains."""
    runs: list[str] = []
    cur: list[str] = []

    def flush():
        if cur:
            runs.append("".join(cur))
            cur.clear()

    for op, av in items:
        if op is C.LITERAL:
            cur.append(chr(av))
        elif op is C.IN and len(av) == 1 and av[0][0] is C.LITERAL:
            cur.append(chr(av[0][1]))
        elif op is C.AT:
            continue  # zero-width: does not break a run
        elif op is C.SUBPATTERN:
            sub = av[-1]
            inner = list(sub)
            # A group made only of literals continues the current run; so do the
            # literals a group starts with ("(?P<kv>-[0-9.]+)" continues with "-").
            lead = 0
            while lead < len(inner) and inner[lead][0] is C.LITERAL:
                lead += 1
            cur.extend(chr(a) for _, a in inner[:lead])
            if lead < len(inner):
                flush()
                runs.extend(_literals(inner[lead:]))
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
            lo, hi, body = av
            body = list(body)
            if lo >= 1 and body and all(o is C.LITERAL for o, _ in body):
                # " {6}" is six spaces: the run goes on through the fixed part
                cur.extend(chr(a) for _ in range(min(lo, 64)) for _, a in body)
                if hi != lo:
                    flush()
                continue
            flush()
            if lo >= 1:
                runs.extend(_literals(body))
        elif op is C.BRANCH:
            flush()
            branches = [_literals(list(b)) for b in av[1]]
            runs.extend(_common_substrings(branches))
        else:
            flush()
    flush()
    return runs


def required_literals(pattern: str) -> list[str]:
    """Literal strings that appear in every match of pattern, longest first."""
    lits = [s for s in _literals(parse(pattern)) if s]
    return sorted(set(lits), key=lambda s: (-len(s), s))


def branch_options(pattern: str, max_branches: int = 16) -> list[list[list[str]]]:
    """Ways to split a pattern by one of its alternations: for each top-level
    alternation (bare, or in a group), the required literals of each branch's
    matches, with the text around the alternation joined on. `'loss': (?:nan|inf)`
    gives [[["'loss': nan"], ["'loss': inf"]]]: every match contains one of the two,
    though only "'loss': " is common to all. The prefilter can then look for the
    rare branch literals instead of the common shared one."""
    def inline(items):
        """Groups that are not repeated are just their content, in sequence."""
        out = []
        for op, av in items:
            if op is C.SUBPATTERN:
                out.extend(inline(list(av[-1])))
            else:
                out.append((op, av))
        return out

    def alternatives_at(op, av):
        """The ways one item can match, as sequences; None when it is not a choice."""
        if op is C.BRANCH:
            return [inline(list(b)) for b in av[1]]
        if op is C.IN and av and all(o is C.LITERAL for o, _ in av):
            return [[(C.LITERAL, a)] for _, a in av]     # [1-9] is 1|2|...|9
        if op is C.IN and len(av) == 1 and av[0][0] is C.RANGE and av[0][1][1] - av[0][1][0] < 10:
            return [[(C.LITERAL, a)] for a in range(av[0][1][0], av[0][1][1] + 1)]
        if op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[0] == 0 and av[1] == 1:
            return [inline(list(av[2])), []]              # x? is x|(nothing)
        return None

    def expand(seq, depth):
        """Every sequence the choices of seq can make, choices resolved up to depth."""
        for i, (op, av) in enumerate(seq):
            alts = alternatives_at(op, av)
            if alts and 2 <= len(alts) <= max_branches:
                out = []
                for b in alts:
                    rest = seq[:i] + b + seq[i + 1:]
                    out.extend(expand(rest, depth - 1) if depth > 1 else [rest])
                return out
        return [seq]

    def lits_of(seq):
        return sorted({x for x in _literals(seq) if x}, key=lambda x: (-len(x), x))

    parsed = inline(parse(pattern))
    out = []
    for i, (op, av) in enumerate(parsed):
        alts = alternatives_at(op, av)
        if alts and 2 <= len(alts) <= max_branches:
            out.append([lits_of(parsed[:i] + b + parsed[i + 1:]) for b in alts])
    # choices within choices ("NCCL WARN (?:A|.{1,600}?(?:X|Y))", or two alternations in
    # a row): every way they resolve, so that a gap is written once, not once per branch
    deep = expand(parsed, 3)
    if 2 <= len(deep) <= 3 * max_branches and (len(out) > 1 or (out and len(deep) > len(out[0]))):
        out.append([lits_of(seq) for seq in deep])
    return out


def _is_wide(op, av) -> bool:
    """A single-character matcher that matches most characters (., [^x], \\S, \\W, \\D)."""
    if op is C.ANY:
        return True
    if op is C.IN:
        if av and av[0][0] is C.NEGATE:
            return True
        wide = {C.CATEGORY_NOT_SPACE, C.CATEGORY_NOT_DIGIT, C.CATEGORY_NOT_WORD}
        return any(o is C.CATEGORY and a in wide for o, a in av)
    return False


def _first_chars(items) -> set | None:
    """Characters a sequence can start with; None when it can start with almost anything."""
    for op, av in items:
        if op is C.LITERAL:
            return {av}
        if op is C.AT:
            continue
        if op is C.IN and all(o is C.LITERAL for o, _ in av):
            return {a for _, a in av}
        if op is C.SUBPATTERN:
            return _first_chars(list(av[-1]))
        return None
    return set()


def _ambiguous_branch(items) -> bool:
    """True when an alternation inside items has an empty branch or two branches
    that can start with the same character (the parser factors a|ab into a(?:|b))."""
    for op, av in items:
        if op is C.BRANCH:
            seen: set = set()
            for b in av[1]:
                fc = _first_chars(list(b))
                if fc is None or not fc or fc & seen:
                    return True
                seen |= fc
        if any(_ambiguous_branch(c) for c in children(op, av)):
            return True
    return False


def backtracking_risks(pattern: str) -> list[str]:
    """Reasons the pattern may backtrack catastrophically (empty list: none found)."""
    reasons: list[str] = []
    wide_unbounded = 0

    def contains_unbounded(items) -> bool:
        return any((op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[1] == UNBOUNDED)
                   or any(contains_unbounded(c) for c in children(op, av)) for op, av in items)

    def walk(items):
        nonlocal wide_unbounded
        for op, av in items:
            if op in (C.MAX_REPEAT, C.MIN_REPEAT):
                lo, hi, body = av
                body = list(body)
                if hi == UNBOUNDED and len(body) == 1 and _is_wide(*body[0]):
                    wide_unbounded += 1
                if hi > 1 and contains_unbounded(body):
                    reasons.append("a repeated group contains an unbounded repeat (nested "
                                   "quantifiers such as (a+)+): make the inner part bounded")
                if hi == UNBOUNDED and _ambiguous_branch(body):
                    reasons.append("an unbounded repeat of alternatives that can "
                                   "start with the same character, e.g. (a|ab)*")
                walk(body)
            else:
                for c in children(op, av):
                    walk(c)

    parsed = parse(pattern)
    walk(parsed)
    first = parsed[0] if parsed else None
    while first is not None and first[0] is C.SUBPATTERN:
        inner = list(first[1][-1])
        first = inner[0] if inner else None
    if first is not None and first[0] in (C.MAX_REPEAT, C.MIN_REPEAT) and first[1][1] > 50:
        reasons.append("it starts with a long repeat, which the search retries at every "
                       "position of the line: start with a literal, or anchor it with ^")
    if wide_unbounded > 1:
        reasons.append(f"{wide_unbounded} unbounded wildcards (.* / .+ / \\S+ / [^x]*): keep at "
                       f"most one, bound the others, e.g. .{{0,200}}")
    return sorted(set(reasons))


# The prefilter's cost model (CPython 3.11 on this 2-core VM; ns per byte of input).
# The engine (faildex.scan) runs one pass per key byte: every anchor holds its pass's
# key, and a pass finds each occurrence of the key with bytes.find (memchr, ~0.1 ns/B)
# and tries the pass's anchors there with one regex match (~300 ns a try, a Python
# round trip). Where the key is frequent the pass hands the rest of the buffer to
# sre's own search, whose literal-prefix loop runs ~0.75 ns/B plus ~25 ns at each
# occurrence. So a pass costs about PASS_NS + min(the two), and a rare key byte (an
# uppercase letter, punctuation) makes a pass nearly free; the fixed PASS_NS is its
# share of the worst case, a log where every key is frequent.
PASS_NS = 0.15           # fixed, per pass
MEMCHR_NS = 0.1          # bytes.find of one byte
FIND_TRY_NS = 300.0      # per occurrence of the key, trying the anchors from Python
SRE_NS = 0.75            # sre's scan loop for a literal prefix
SRE_TRY_NS = 25.0        # per occurrence of the key, inside sre
JOIN_NS = 0.02           # one more anchor in a pass that already runs
CANDIDATE_NS = 0.02      # a candidate line (~20 us in Python) per healthy hit per MB
MIN_BYTE_FREQ = 0.0001   # a byte absent from the healthy sample is still not free
# A key other than the anchor's first byte is checked with a lookbehind, which sre
# tries one by one at each occurrence of the key: only a byte rarer than this in
# healthy output may key an anchor from inside it.
INNER_KEY_FREQ = 0.0025


def pass_cost(freq: float) -> float:
    """What one pass costs, in ns/B, when its key byte is freq of the input's bytes."""
    return PASS_NS + min(MEMCHR_NS + FIND_TRY_NS * freq, SRE_NS + SRE_TRY_NS * freq)


def choose_anchors(required: dict[str, list[str]], healthy=None
                   ) -> tuple[list[str], dict[str, str], list[list]]:
    """Pick the literal anchors of the engine's prefilter and the pass each runs in.

    Every pattern (key of `required`) must contain one anchor. An anchor costs the
    pass its key byte adds (pass_cost), unless another anchor already pays for that
    byte, plus its hit rate in the healthy corpus (generator.healthy): one that makes
    a noticeable share of any one healthy log's lines candidates costs far more. An
    anchor's key may be any byte of it, so "CUDA error" can ride on a pass for "U".

    Greedy set cover (lazily re-evaluated) over the substrings of each pattern's
    required literals, then a pass that drops a key byte whose patterns all have an
    acceptable anchor under the keys that remain. Returns (anchors, pattern ->
    anchor, passes): each pass is [key byte, its anchors], the cheapest key first.
    """
    import heapq

    # substring -> the patterns it would cover: one pattern's key as a str (most
    # substrings belong to one pattern), a set once a second shares it. With a set for
    # each, the index of 3,000 synthetic entries (bench/site.py) peaked at 455 MB; 340 MB so.
    candidates: dict[str, str | set[str]] = {}

    def add(sub: str, key: str) -> None:
        have = candidates.get(sub)
        if have is None:
            candidates[sub] = key
        elif isinstance(have, str):
            if have != key:
                candidates[sub] = {have, key}
        else:
            have.add(key)

    def covers(sub: str) -> set[str] | tuple[str]:
        have = candidates[sub]
        return (have,) if isinstance(have, str) else have

    for key, lits in required.items():
        for lit in lits:
            if key.startswith("generic/"):
                # the error-line keys are exact: "ERROR:" must not become "ERROR", which
                # every rank's TORCH_NCCL_ASYNC_ERROR_HANDLING banner holds
                add(lit, key)
                continue
            if (len(lit) == 3 or 20 < len(lit) <= 48) and lit.strip() == lit:
                # a short branch literal ("br-"), or a whole long one when every part of
                # it is printed by healthy jobs ("... set by environment to 1")
                add(lit, key)
            for length in range(2, min(len(lit), 20) + 1):
                for i in range(len(lit) - length + 1):
                    sub = lit[i:i + length]
                    if anchor_size(sub) < MIN_ANCHOR and (i == 0 or sub[0].isalnum() or sub[0] == " "):
                        # shorter only from inside a literal, starting at a punctuation
                        # byte ("+1" of "e+1"): a rare byte where the literal's own
                        # bytes are common letters
                        continue
                    if sub.strip() != sub or not sub.strip():
                        continue
                    add(sub, key)
    mb = max(healthy.total_bytes / 1e6, 0.01) if healthy else 0.01
    byte_cost: dict[str, float] = {}
    used: set[str] = set()
    rare_cost = pass_cost(INNER_KEY_FREQ)

    def key_cost(c: str) -> float:
        if c not in byte_cost:
            freq = healthy.char_freq(c) if healthy else 0.0
            # a space is on every line: never a key
            byte_cost[c] = 1e9 if c.isspace() else pass_cost(max(freq, MIN_BYTE_FREQ))
        return byte_cost[c]

    # the bytes rare enough to key an anchor from inside it (a set operation per substring
    # below, not a cost lookup per byte: a 3,000-entry site has a million substrings)
    rare = {c for c in set("".join(lit for lits in required.values() for lit in lits))
            if key_cost(c) <= rare_cost}

    def keys_of(sub: str) -> set[str]:
        """The bytes that may key sub: its first, and any rare one."""
        return {sub[0]} | rare.intersection(sub)

    def best_key(sub: str) -> str:
        return min(keys_of(sub), key=lambda c: (0 if c in used else 1, key_cost(c), c))

    def static(sub: str) -> float:
        # short needles hit by chance in text the healthy corpus lacks ("(min, max) time")
        short = 0.4 * (7 - len(sub)) if len(sub) < 7 else 0.0
        # Plain lowercase words ("f the", "quire") are everywhere in real logs (warnings,
        # tracebacks) even where the healthy corpus has none of them.
        plain = 1.0 if len(sub) < 10 and all(ch.islower() or ch == " " for ch in sub) else 0.0
        return short + plain

    def base(sub: str) -> float:
        # a quote or backslash is escaped when a shipper puts the line in a JSON string
        escaped = 10.0 if '"' in sub or "\\" in sub else 0.0
        # A short piece of an identifier ("mp_rank_") is the kind of name healthy jobs
        # print in file paths and settings (DeepSpeed's checkpoint files) even where the
        # healthy corpus has none of them.
        name = 1.0 if len(sub) < 12 and "_" in sub and " " not in sub else 0.0
        hits, worst = healthy.hit_stats(sub) if healthy else (0, 0.0)
        # above 0.5% of some healthy log's lines an anchor breaks the 1% candidate budget
        return (static(sub) + escaped + name + CANDIDATE_NS * hits / mb + 400 * worst
                + (50 if worst > 0.005 else 0))

    def cost(sub: str) -> float:
        k = best_key(sub)
        return (JOIN_NS if k in used else key_cost(k)) + base(sub)

    uncovered = {k for k, lits in required.items() if any(x in candidates for x in lits)
                 or any(anchor_size(x) >= MIN_ANCHOR for x in lits)}
    anchors: list[str] = []
    assigned: dict[str, str] = {}

    # bound for the heap: the cheapest a substring could be (its key paid already, no
    # corpus lookup yet)
    heap = [(-n / (JOIN_NS + static(s)), -len(s), s)
            for s in candidates if (n := len(uncovered.intersection(covers(s))))]
    heapq.heapify(heap)
    with_byte: dict[str, list[str]] = {}
    for sub in candidates:
        for c in keys_of(sub):
            with_byte.setdefault(c, []).append(sub)
    while uncovered and heap:
        _, neg_len, sub = heapq.heappop(heap)
        cover = uncovered.intersection(covers(sub))
        if not cover:
            continue
        score = len(cover) / cost(sub)
        if heap and score < -heap[0][0]:
            heapq.heappush(heap, (-score, neg_len, sub))   # re-evaluated later if still good
            continue
        anchors.append(sub)
        for key in sorted(cover):
            assigned[key] = sub
        uncovered -= cover
        k = best_key(sub)
        if k not in used:
            # every substring holding this byte just became cheaper: re-queue them
            used.add(k)
            for other in with_byte.get(k, ()):   # a list, filled in candidates' order
                left = uncovered.intersection(covers(other))
                if left:
                    heapq.heappush(heap, (-len(left) / cost(other), -len(other), other))
    # The greedy pays for a key early, when few anchors share it; afterwards drop each
    # key whose patterns all have a cheap enough anchor under the others.
    subs_of: dict[str, list[str]] = {}
    for sub in candidates:
        for k in covers(sub):
            subs_of.setdefault(k, []).append(sub)

    def key_of(a: str, among: set[str]) -> str:
        return min(keys_of(a) & among, key=lambda c: (key_cost(c), c))

    # sorted, never set order: the anchors must not depend on PYTHONHASHSEED (the wheel is
    # built in a fresh process and must come out byte for byte the same)
    for c in sorted(used, key=lambda c: (-key_cost(c), c)):
        others = used - {c}
        stuck = {a for a in assigned.values() if not keys_of(a) & others}
        if not stuck:
            used.discard(c)   # every anchor here holds another key: they ride there
            continue
        moved_keys = sorted(k for k, a in assigned.items() if a in stuck)
        saved = key_cost(c) + sum(base(a) for a in sorted(stuck))
        moves: dict[str, str] = {}
        for k in moved_keys:
            options = [s for s in subs_of.get(k, []) if keys_of(s) & others]
            if not options:
                break
            moves[k] = min(options, key=lambda s: (base(s), -len(s), s))
        else:
            added = sum(base(s) for s in sorted(set(moves.values()))) + JOIN_NS * len(set(moves.values()))
            if added < saved:
                used.discard(c)
                for k, s in moves.items():
                    assigned[k] = s
    anchors = sorted({assigned[k] for k in assigned})
    # each anchor runs in the pass of its rarest key byte
    by_key: dict[str, list[str]] = {}
    for a in anchors:
        by_key.setdefault(key_of(a, used), []).append(a)
    return anchors, assigned, [[k, by_key[k]] for k in sorted(by_key, key=lambda k: (key_cost(k), k))]


def readable(pattern: str) -> str:
    """A regex written out as the text it matches: literals as they are, the first of
    several alternatives (and of a class of letters, [Cc]onnect), named groups as
    <name>, anything variable as "…"."""
    parsed = parse(pattern)
    names = parsed.groupnames

    def is_space(op, av) -> bool:
        return op is C.IN and all(o is C.CATEGORY and a is C.CATEGORY_SPACE for o, a in av)

    def walk(items) -> str:
        out: list[str] = []
        for op, av in items:
            if op is C.LITERAL:
                out.append(chr(av))
            elif op is C.IN and av and all(o is C.LITERAL for o, _ in av):
                out.append(chr(av[0][1]))   # [Rr]eason: the first spelling written
            elif is_space(op, av):
                out.append(" ")
            elif op in (C.AT, C.ASSERT, C.ASSERT_NOT):
                continue
            elif op is C.SUBPATTERN:
                group = av[0]
                out.append(f"<{names[group]}>" if group in names else walk(av[-1]))
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT):
                lo, _, body = av
                body = list(body)
                single = len(body) == 1 and body[0][0] not in (C.SUBPATTERN, C.BRANCH)
                if single and is_space(*body[0]):
                    out.append(" ")
                elif single and body[0][0] is not C.LITERAL:
                    out.append(" … ")       # a run of variable characters
                elif lo >= 1:
                    out.append(walk(body))  # a required part, once
            elif op is C.BRANCH:
                out.append(walk(av[1][0]))
            else:
                out.append("…")
        return re.sub(r"…(?:\s*…)+", "…", "".join(out))

    return " ".join(walk(parsed).split())


def literal_runs(pattern: str) -> list[str]:
    """Every run of literal text in the pattern, optional parts and every alternative
    included: the words a reader might have from any form of the message."""
    runs: list[str] = []

    def walk(items) -> None:
        cur: list[str] = []
        for op, av in items:
            if op is C.LITERAL:
                cur.append(chr(av))
                continue
            if cur:
                runs.append("".join(cur))
                cur = []
            for c in children(op, av):
                walk(c)
        if cur:
            runs.append("".join(cur))

    walk(parse(pattern))
    return [r for r in dict.fromkeys(r.strip() for r in runs) if r]
