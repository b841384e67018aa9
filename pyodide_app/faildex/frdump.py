"""PyTorch flight-recorder dumps: read them safely, find the rank that stopped the others.

A dump is what `torch._C._distributed_c10d._dump_fr_trace` (pickle) or
`_dump_fr_trace_json` writes, one file per rank; the watchdog writes the pickle
form on a timeout to `<prefix><rank>` (default prefix /tmp/nccl_trace_rank_). It
holds a ring buffer of recent collectives per rank: process group, sequence
number, operation, input/output sizes and dtypes, creation time and state.

The pickle is never given to `pickle`: `read_pickle` interprets the opcodes
itself, builds only dicts, lists, tuples, strings, bytes, numbers, booleans and
None, and refuses every opcode that could import or call anything (GLOBAL,
STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, EXT*, PERSID). A dump is read
whole, so MAX_DUMP_BYTES caps it.
"""
from __future__ import annotations

import json
import re
import struct

MAX_DUMP_BYTES = 256 << 20
_RANK_IN_NAME = re.compile(r"(\d+)(?:\.[A-Za-z]\w{0,9})?$")


class DumpError(ValueError):
    """A dump that cannot be read safely; str() is one line naming the file."""


def rank_from_name(name: str) -> int | None:
    """PyTorch names dumps <prefix><rank>: the trailing number, with or without an extension."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    m = _RANK_IN_NAME.search(base)
    return int(m.group(1)) if m else None


def looks_like_dump(head: bytes) -> bool:
    """Is this the start of a flight-recorder dump (pickle or JSON), not a log?"""
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return True
    text = head.lstrip()[:4096]
    return text.startswith(b"{") and b'"pg_config"' in text or (
        text.startswith(b"{") and b'"entries"' in text and b'"version"' in text)


def check_size(name: str, data: bytes) -> None:
    """A dump is read whole: refuse one over MAX_DUMP_BYTES, in one line naming the file."""
    if len(data) > MAX_DUMP_BYTES:
        raise DumpError(f"{name}: {len(data)} bytes is over the {MAX_DUMP_BYTES >> 20} MiB limit for a dump")


def load(name: str, data: bytes) -> dict:
    """Parse one dump (pickle or JSON) into {name, rank, version, pg_config, pg_status, entries}."""
    check_size(name, data)
    if data[:1] == b"\x80":
        obj = read_pickle(data, name)
        form = "pickle"
    else:
        try:
            obj = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as err:
            raise DumpError(f"{name}: not a flight-recorder dump (neither pickle nor JSON: {err})") from None
        form = "json"
    if not isinstance(obj, dict) or not isinstance(obj.get("entries"), list):
        raise DumpError(f"{name}: not a flight-recorder dump (no 'entries' list)")
    rank = rank_from_name(name)
    if rank is None:
        raise DumpError(f"{name}: the file name must end in the rank number, as PyTorch names "
                        f"dumps (<prefix><rank>, e.g. nccl_trace_rank_3)")
    entries = [_entry(e) for e in obj["entries"] if isinstance(e, dict)]
    return {"name": name, "rank": rank, "form": form, "version": str(obj.get("version", "")),
            "pg_config": obj.get("pg_config") if isinstance(obj.get("pg_config"), dict) else {},
            "pg_status": obj.get("pg_status") if isinstance(obj.get("pg_status"), dict) else {},
            "entries": entries}


def _int(v, default=None):
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def _entry(e: dict) -> dict:
    """The fields the analysis uses, in one shape for the pickle and JSON forms."""
    pg = e.get("process_group")
    pg_name = str(pg[0]) if isinstance(pg, (list, tuple)) and pg else str(e.get("pg_id", ""))
    pg_desc = str(pg[1]) if isinstance(pg, (list, tuple)) and len(pg) > 1 else ""
    return {"pg": pg_name, "pg_desc": pg_desc, "pg_id": e.get("pg_id"),
            "seq": _int(e.get("collective_seq_id"), -1), "p2p": bool(e.get("is_p2p")),
            "op": str(e.get("profiling_name", "")), "state": str(e.get("state", "")),
            "in_sizes": e.get("input_sizes"), "out_sizes": e.get("output_sizes"),
            "in_dtypes": e.get("input_dtypes"), "out_dtypes": e.get("output_dtypes"),
            "created_ns": _int(e.get("time_created_ns")), "timeout_ms": _int(e.get("timeout_ms")),
            "record": _int(e.get("record_id")), "caller": _caller(e.get("frames"))}


def _caller(frames) -> str:
    """The innermost frame outside torch.distributed: the line that called the collective."""
    if not isinstance(frames, list):
        return ""
    for f in frames:
        if isinstance(f, dict) and "/torch/distributed/" not in str(f.get("filename", "")).replace("\\", "/"):
            base = str(f.get("filename", "")).replace("\\", "/").rsplit("/", 1)[-1]
            return f"{f.get('name', '?')} ({base}:{f.get('line', '?')})"
    return ""


# ---------------------------------------------------------------- safe pickle reader

_MARK = object()
_REFUSED = {b"c": "GLOBAL", b"\x93": "STACK_GLOBAL", b"R": "REDUCE", b"b": "BUILD", b"i": "INST",
            b"o": "OBJ", b"\x81": "NEWOBJ", b"\x92": "NEWOBJ_EX", b"\x82": "EXT1", b"\x83": "EXT2",
            b"\x84": "EXT4", b"P": "PERSID", b"Q": "BINPERSID", b"\x97": "NEXT_BUFFER",
            b"\x98": "READONLY_BUFFER"}


def read_pickle(data: bytes, name: str = "<dump>"):
    """Interpret a pickle that holds only plain data; raise DumpError on anything else."""
    stack: list = []
    marks: list[int] = []
    memo: dict = {}
    pos, end = 0, len(data)

    def need(n: int) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > end:
            raise DumpError(f"{name}: truncated pickle (byte {pos} wants {n} more bytes, file has {end})")
        chunk = data[pos:pos + n]
        pos += n
        return chunk

    def line() -> bytes:
        nonlocal pos
        nl = data.find(b"\n", pos)
        if nl == -1:
            raise DumpError(f"{name}: truncated pickle (byte {pos}: unterminated line argument)")
        chunk = data[pos:nl]
        pos = nl + 1
        return chunk

    def pop_mark() -> list:
        if not marks:
            raise DumpError(f"{name}: malformed pickle (byte {pos}: no MARK on the stack)")
        at = marks.pop()
        items = stack[at:]
        del stack[at:]
        return items

    def top(kind, what):
        if not stack or not isinstance(stack[-1], kind):
            raise DumpError(f"{name}: malformed pickle (byte {pos}: {what} without its container)")
        return stack[-1]

    try:
        while True:
            if pos >= end:
                raise DumpError(f"{name}: truncated pickle (no STOP opcode)")
            op = data[pos:pos + 1]
            pos += 1
            if op in _REFUSED:
                raise DumpError(f"{name}: refused: the pickle asks to import or call code "
                                f"({_REFUSED[op]} opcode at byte {pos - 1}); a flight-recorder dump "
                                f"holds plain data only")
            if op == b".":                                   # STOP
                if len(stack) != 1:
                    raise DumpError(f"{name}: malformed pickle (STOP with {len(stack)} values on the stack)")
                return stack[0]
            elif op == b"\x80":                              # PROTO
                need(1)
            elif op == b"\x95":                              # FRAME
                need(8)
            elif op == b"(":
                marks.append(len(stack))
            elif op == b"0":
                if not stack:
                    raise DumpError(f"{name}: malformed pickle (POP on an empty stack at byte {pos})")
                stack.pop()
            elif op == b"1":
                pop_mark()
            elif op == b"2":
                stack.append(top(object, "DUP"))
            elif op == b"N":
                stack.append(None)
            elif op == b"\x88":
                stack.append(True)
            elif op == b"\x89":
                stack.append(False)
            elif op == b"I":                                 # INT (also 00/01 for bools)
                s = line()
                stack.append(True if s == b"01" else False if s == b"00" else int(s))
            elif op == b"J":
                stack.append(struct.unpack("<i", need(4))[0])
            elif op == b"K":
                stack.append(need(1)[0])
            elif op == b"M":
                stack.append(struct.unpack("<H", need(2))[0])
            elif op == b"L":
                stack.append(int(line().rstrip(b"L")))
            elif op == b"\x8a":
                stack.append(int.from_bytes(need(need(1)[0]), "little", signed=True))
            elif op == b"\x8b":
                n = struct.unpack("<i", need(4))[0]
                if n > 4096:
                    raise DumpError(f"{name}: refused: a {n}-byte integer in the pickle")
                stack.append(int.from_bytes(need(n), "little", signed=True))
            elif op == b"F":
                stack.append(float(line()))
            elif op == b"G":
                stack.append(struct.unpack(">d", need(8))[0])
            elif op == b"X":
                stack.append(need(struct.unpack("<I", need(4))[0]).decode("utf-8", "surrogatepass"))
            elif op == b"\x8c":
                stack.append(need(need(1)[0]).decode("utf-8", "surrogatepass"))
            elif op == b"\x8d":
                stack.append(need(struct.unpack("<Q", need(8))[0]).decode("utf-8", "surrogatepass"))
            elif op == b"V":
                stack.append(line().decode("raw_unicode_escape"))
            elif op == b"T":
                stack.append(need(struct.unpack("<i", need(4))[0]).decode("latin-1"))
            elif op == b"U":
                stack.append(need(need(1)[0]).decode("latin-1"))
            elif op == b"S":
                stack.append(line().strip(b"'\"").decode("latin-1"))
            elif op == b"B":
                stack.append(need(struct.unpack("<I", need(4))[0]))
            elif op == b"C":
                stack.append(need(need(1)[0]))
            elif op in (b"\x8e", b"\x96"):                    # BINBYTES8, BYTEARRAY8
                stack.append(need(struct.unpack("<Q", need(8))[0]))
            elif op == b"]":
                stack.append([])
            elif op == b"l":
                stack.append(pop_mark())
            elif op == b"a":
                item = stack.pop()
                top(list, "APPEND").append(item)
            elif op == b"e":
                items = pop_mark()
                top(list, "APPENDS").extend(items)
            elif op == b")":
                stack.append(())
            elif op == b"t":
                stack.append(tuple(pop_mark()))
            elif op in (b"\x85", b"\x86", b"\x87"):
                n = op[0] - 0x84
                if len(stack) < n:
                    raise DumpError(f"{name}: malformed pickle (TUPLE{n} at byte {pos - 1})")
                items = stack[-n:]
                del stack[-n:]
                stack.append(tuple(items))
            elif op == b"}":
                stack.append({})
            elif op == b"d":
                items = pop_mark()
                stack.append(_pairs({}, items, name))
            elif op == b"s":
                value, key = stack.pop(), stack.pop()
                _pairs(top(dict, "SETITEM"), [key, value], name)
            elif op == b"u":
                items = pop_mark()
                _pairs(top(dict, "SETITEMS"), items, name)
            elif op == b"p":
                memo[int(line())] = top(object, "PUT")
            elif op == b"q":
                memo[need(1)[0]] = top(object, "BINPUT")
            elif op == b"r":
                memo[struct.unpack("<I", need(4))[0]] = top(object, "LONG_BINPUT")
            elif op == b"\x94":
                memo[len(memo)] = top(object, "MEMOIZE")
            elif op in (b"g", b"h", b"j"):
                key = int(line()) if op == b"g" else need(1)[0] if op == b"h" else struct.unpack("<I", need(4))[0]
                if key not in memo:
                    raise DumpError(f"{name}: malformed pickle (memo key {key} unset at byte {pos})")
                stack.append(memo[key])
            else:
                raise DumpError(f"{name}: refused: pickle opcode {op!r} at byte {pos - 1} is not "
                                f"plain data")
    except DumpError:
        raise
    except (IndexError, ValueError, struct.error, UnicodeDecodeError, OverflowError) as err:
        raise DumpError(f"{name}: malformed pickle near byte {pos} ({type(err).__name__})") from None


def _pairs(d: dict, items: list, name: str) -> dict:
    if len(items) % 2:
        raise DumpError(f"{name}: malformed pickle (odd number of dict items)")
    for k, v in zip(items[::2], items[1::2]):
        if isinstance(k, (list, dict)):
            raise DumpError(f"{name}: malformed pickle (unhashable dict key)")
        d[k] = v
    return d


# ---------------------------------------------------------------- analysis

def _pg_ranks(dump: dict, pg: str, desc: str) -> list[int] | None:
    """The global ranks of a process group, from pg_config. Gloo dumps (2.13) key pg_config
    by an empty name and list only the default group's ranks, so for the default group the
    longest rank list is taken."""
    def ranks(cfg):
        nums = re.findall(r"\d+", str(cfg.get("ranks", ""))) if isinstance(cfg, dict) else []
        return [int(n) for n in nums]
    got = ranks(dump["pg_config"].get(pg))
    if not got and desc == "default_pg":
        got = max((ranks(c) for c in dump["pg_config"].values()), key=len, default=[])
    return got or None


def _clock(ns: int | None) -> str:
    if not ns:
        return "?"
    s = ns / 1e9
    return "%02d:%02d:%06.3f" % ((s // 3600) % 24, (s // 60) % 60, s % 60)


def _describe(e: dict) -> str:
    sizes = e["in_sizes"] if e["in_sizes"] is not None else "?"
    dtypes = ",".join(map(str, e["in_dtypes"] or [])) or "?"
    return f"#{e['seq']} {e['op']} {sizes} {dtypes}"


def _evidence(dump: dict, e: dict) -> dict:
    # `line` keeps the report's shape (record id + 1); `record` says what it really is
    return {"source": dump["name"], "line": (e["record"] + 1) if e["record"] is not None else 0,
            **({"record": e["record"]} if e["record"] is not None else {}),
            "text": f"pg {e['pg']}{' (' + e['pg_desc'] + ')' if e['pg_desc'] else ''} "
                    f"{_describe(e)}, state {e['state'] or '?'}, created {_clock(e['created_ns'])} UTC"
                    + (f", called from {e['caller']}" if e["caller"] else "")}


def _majority(values: dict) -> tuple:
    """(the value most ranks have, ranks that differ); a tie keeps the lowest rank's value."""
    groups: dict = {}
    for r, v in sorted(values.items()):
        groups.setdefault(v, []).append(r)
    best = max(groups.values(), key=lambda rs: (len(rs), -rs[0]))
    common = values[best[0]]
    return common, sorted(r for r, v in values.items() if v != common), len(groups[common]) == len(values) / 2


# collectives whose per-rank sizes differ by design: all-to-all (expert parallelism), uneven
# all-gathers, gather/scatter roots (NVIDIA's fault-injection dumps of a mixture-of-experts
# model show them; comparing their sizes named healthy ranks first)
_SIZES_VARY = re.compile(r"(?i)all_?to_?all|gather|scatter")


# bytes per element of the dtypes a dump names (c10's ScalarType names)
_DTYPE_BYTES = {"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Int": 4, "Long": 8, "Short": 2,
                "Char": 1, "Byte": 1, "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16, "ComplexHalf": 4}


def _nbytes(e: dict) -> int | None:
    """The bytes of a collective's inputs, or None when a size or dtype is unknown."""
    sizes, dtypes = e.get("in_sizes"), e.get("in_dtypes")
    if not isinstance(sizes, list) or not isinstance(dtypes, list) or len(sizes) != len(dtypes) or not sizes:
        return None
    total = 0
    for shape, dt in zip(sizes, dtypes):
        if dt not in _DTYPE_BYTES or not isinstance(shape, list):
            return None
        n = 1
        for d in shape:
            n *= int(d)
        total += n * _DTYPE_BYTES[dt]
    return total


def analyze(dumps: list[dict], received_more=()) -> list[dict]:
    """Suspects from one dump per rank: per process group, align collectives by sequence number.
    `received_more`: ranks whose logs say they received more bytes than they expected (Gloo's
    preamble check), which settles a disagreement between two dumps of other ranks."""
    by_rank: dict[int, dict] = {}
    for d in dumps:
        by_rank.setdefault(d["rank"], d)       # the first dump given for a rank wins
    suspects: list[dict] = []
    pgs: dict[str, dict[int, dict[int, dict]]] = {}   # pg -> rank -> seq -> entry
    for r, d in by_rank.items():
        for e in d["entries"]:
            if e["p2p"] or e["seq"] < 0:
                continue
            pgs.setdefault(e["pg"], {}).setdefault(r, {})[e["seq"]] = e
    for pg in sorted(pgs):
        ranks = pgs[pg]
        some = by_rank[min(ranks)]
        desc = next(iter(next(iter(ranks.values())).values()))["pg_desc"]
        members = _pg_ranks(some, pg, desc) or sorted(set(ranks) | (set(by_rank) if desc == "default_pg" or
                                                                   pg == min(pgs) else set()))
        before = len(suspects)
        label = f"process group {pg}" + (f" ({desc})" if desc else "")
        last = {r: max(seqs) for r, seqs in ranks.items()}
        top = max(last.values())
        stuck = [r for r in sorted(ranks) if last[r] == top]
        ref = ranks[stuck[0]][top]
        # ranks of the group that never entered the collective the others are in
        for r in members:
            if r in ranks and last[r] < top:
                lag = top - last[r]
                suspects.append({
                    "rank": r, "kind": "missing",
                    "why": f"in {label} rank {r}'s last collective is #{last[r]}; "
                           f"{_ranks(stuck)} entered #{top} ({ref['op']} {ref['in_sizes']}), "
                           f"which rank {r} never did" + (f" ({lag} behind)" if lag > 1 else ""),
                    "evidence": [_evidence(by_rank[r], ranks[r][last[r]]), _evidence(by_rank[stuck[0]], ref)]})
            elif r in by_rank and r not in ranks:
                # a dump with no collective of this group: its thread never recorded one (blocked
                # before it, or stuck outside any collective), while the others went on
                n = len(by_rank[r]["entries"])
                suspects.append({
                    "rank": r, "kind": "missing",
                    "why": f"{label}: rank {r}'s dump holds {'no entries at all' if n == 0 else 'no collective of this group'}"
                           f" while {_ranks(stuck)} reached #{top} ({ref['op']})",
                    "evidence": [{"source": by_rank[r]["name"], "line": 0, "text": f"{n} entries"},
                                 _evidence(by_rank[stuck[0]], ref)]})
            elif r not in by_rank:
                suspects.append({
                    "rank": r, "kind": "missing",
                    "why": f"{label} has ranks {_list(members)} but no dump came from rank {r}: it "
                           f"may have died before dumping, or its dump was not given",
                    "evidence": [_evidence(by_rank[stuck[0]], ref)]})
        # the first sequence number where the ranks disagree on what the collective is
        common = sorted(set.intersection(*(set(s) for s in ranks.values())))
        for seq in common:
            found = False
            for kind, key in (("op-mismatch", "op"), ("size-mismatch", "in_sizes"),
                              ("size-mismatch", "out_sizes"), ("dtype-mismatch", "in_dtypes")):
                if key != "op" and key != "in_dtypes" and _SIZES_VARY.search(ranks[min(ranks)][seq]["op"]):
                    continue    # all-to-all, gathers and scatters take other sizes on each rank
                values = {r: json.dumps(ranks[r][seq][key]) for r in ranks}
                usual, odd, tie = _majority(values)
                settled = ""
                if odd and tie and len(values) == 2:
                    # two dumps that disagree: nothing says which is the odd one, unless a third
                    # rank (without a dump) received more bytes than it expected. With one odd
                    # rank, that third rank sides with the smaller, and the bigger sent it.
                    sizes = {r: _nbytes(ranks[r][seq]) for r in ranks}
                    third = sorted(set(received_more) - set(ranks))
                    if not third or None in sizes.values() or len(set(sizes.values())) < 2:
                        continue
                    odd = [max(sizes, key=sizes.get)]
                    usual = values[min(sizes, key=sizes.get)]
                    settled = (f" ({sizes[odd[0]]} bytes against {min(sizes.values())}; rank {third[0]}, "
                               f"which wrote no dump, aborted on receiving more bytes than it expected)")
                elif not odd:
                    continue
                what = {"op": "operation", "in_sizes": "input sizes", "out_sizes": "output sizes",
                        "in_dtypes": "dtypes"}[key]
                for r in odd:
                    e = ranks[r][seq]
                    suspects.append({
                        "rank": r, "kind": kind,
                        "why": f"in {label} collective #{seq}: rank {r} has {what} "
                               f"{_show(e[key])} where {'the other rank has' if settled else 'the lowest rank has' if tie else 'the others have'} "
                               f"{_show(json.loads(usual))}{settled}",
                        "evidence": [_evidence(by_rank[r], e)] + [
                            _evidence(by_rank[o], ranks[o][seq]) for o in sorted(ranks) if o not in odd][:1]})
                found = True
                break
            if found:
                break
        # a rank that entered the stuck collective long after the others
        if top in common and len(ranks) > 1:
            created = {r: ranks[r][top]["created_ns"] for r in ranks if ranks[r][top]["created_ns"]}
            if len(created) > 1:
                first = min(created.values())
                timeout_ms = ref["timeout_ms"] or 0
                limit = max(timeout_ms / 2, 1000) * 1e6
                for r, ns in sorted(created.items()):
                    if ns - first > limit:
                        suspects.append({
                            "rank": r, "kind": "late",
                            "why": f"in {label} rank {r} entered #{top} ({ref['op']}) "
                                   f"{(ns - first) / 1e9:.1f} s after the first rank"
                                   + (f" (timeout {timeout_ms / 1000:g} s)" if timeout_ms else ""),
                            "evidence": [_evidence(by_rank[r], ranks[r][top]),
                                         _evidence(by_rank[min(created, key=created.get)],
                                                   ranks[min(created, key=created.get)][top])]})
        # NCCL: every rank enqueued the same work, but one completed less (only when
        # nothing above explains the group: dumps taken at different moments differ too)
        done, queued = {}, set()
        for r in ranks:
            status = by_rank[r]["pg_status"]
            st = status.get(pg) or status.get(str(ref["pg_id"]))
            if isinstance(st, dict) and _int(st.get("last_completed_collective")) is not None:
                done[r] = _int(st.get("last_completed_collective"))
                queued.add(_int(st.get("last_enqueued_collective")))
        # (and only when some collective of the group never completed: dumps written as each rank
        # finished a healthy run differ by the last one too)
        unfinished = any(e["state"] not in ("completed", "") for per in ranks.values() for e in per.values())
        if (len(done) > 1 and len(set(done.values())) > 1 and len(queued) == 1 and len(suspects) == before
                and unfinished):
            low = min(done.values())
            for r in sorted(done):
                if done[r] == low:
                    suspects.append({
                        "rank": r, "kind": "behind",
                        "why": f"in {label} rank {r} last completed #{low}; the others completed up to "
                               f"#{max(done.values())}",
                        "evidence": [{"source": by_rank[r]["name"], "line": 0,
                                      "text": f"pg_status: last_completed_collective {low}"}]})
    return suspects


def _show(v) -> str:
    if isinstance(v, list) and len(v) == 1:
        v = v[0]
    return str(v)


def _ranks(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + _list(ranks)


def _list(ranks: list[int]) -> str:
    return ",".join(map(str, ranks))
