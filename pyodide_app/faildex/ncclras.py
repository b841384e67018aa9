"""NCCL RAS status in its JSON form (`ncclras -f json`, NCCL 2.28.7 and later).

The text form is read from logs (job.py). The JSON form is one document for every
communicator the RAS network knows (src/ras/client_support.cc, jsonWrite*): per
communicator, the ranks RAS has data from (host, pid, status, and how many collectives
of each kind each has launched) and the ranks it has none from (`missing_ranks`,
unresponsive or considered dead). Two things name a rank: RAS has no data from it, or it
has launched fewer collectives of a kind than the others, which then wait in one it
never entered.
"""
from __future__ import annotations

import json
import re

from .frdump import DumpError, _int, check_size


def looks_like_ras(head: bytes) -> bool:
    text = head.lstrip()[:4096]
    return text.startswith(b"{") and b'"nccl_version"' in text and b'"communicators' in text


# NCCL 2.28.7 and 2.28.9 print a missing rank's "nvml_dev" without the comma before its
# "status" (jsonWriteMissingRank; fixed in 2.29.2), so exactly the documents that name a
# missing rank are not JSON: the comma is put back
_MISSING_COMMA = re.compile(rb'("nvml_dev": -?\d+)(\s*\n\s*"status")')


def load(name: str, data: bytes) -> dict:
    """{name, nccl_version, timestamp, comms: [{hash, size, ranks, missing}]}; raises
    DumpError (one line, naming the file)."""
    check_size(name, data)
    try:
        obj = json.loads(data)
    except ValueError:
        try:
            obj = json.loads(_MISSING_COMMA.sub(rb"\1,\2", data))
        except ValueError as err:
            raise DumpError(f"{name}: not an NCCL RAS JSON status ({err})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("communicators"), list):
        raise DumpError(f"{name}: not an NCCL RAS JSON status (no 'communicators' list)")
    comms = []
    at = _lines_of(data)
    for c in obj["communicators"]:
        if not isinstance(c, dict):
            continue
        h = str(c.get("hash", "?"))
        comms.append({"hash": h, "size": _int(c.get("size")),
                      "ranks": [dict(_rank(r), line=at.get((h, "ranks", _int(r["rank"])), 0))
                                for r in _dicts(c.get("ranks"))],
                      "missing": [dict(_rank(r), line=at.get((h, "missing_ranks", _int(r["rank"])), 0))
                                  for r in _dicts(c.get("missing_ranks"))]})
    return {"name": name, "nccl_version": str(obj.get("nccl_version", "")),
            "timestamp": str(obj.get("timestamp", "")), "comms": comms}


_KEY = re.compile(rb'^\s*"(hash|ranks|missing_ranks|rank)": "?([^",]*)')


def _lines_of(data: bytes) -> dict:
    """(communicator hash, "ranks" or "missing_ranks", rank) -> the line of that rank's
    "rank" key, in the document as NCCL prints it (one key a line), for the evidence."""
    out, comm, section = {}, None, None
    for n, line in enumerate(data.split(b"\n"), 1):
        m = _KEY.match(line)
        if m is None:
            continue
        key, value = m.group(1).decode(), m.group(2).decode()
        if key == "hash":
            comm, section = value, None
        elif key in ("ranks", "missing_ranks"):
            section = key
        elif section is not None and _int(value) is not None:
            out.setdefault((comm, section, _int(value)), n)
    return out


def _dicts(items) -> list[dict]:
    return [r for r in items or [] if isinstance(r, dict) and _int(r.get("rank")) is not None]


def _rank(r: dict) -> dict:
    status = r.get("status") if isinstance(r.get("status"), dict) else {}
    counts = r.get("collective_counts") if isinstance(r.get("collective_counts"), dict) else {}
    host = str(r.get("host") or "unknown")
    return {"rank": _int(r["rank"]), "host": None if host == "unknown" else host, "pid": _int(r.get("pid")),
            "unresponsive": status.get("unresponsive") is True, "dead": status.get("considered_dead") is True,
            "counts": {str(op): n for op, n in ((op, _int(n)) for op, n in counts.items()) if n is not None}}


def _ranks_text(ranks: list[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"{len(ranks)} ranks"


def analyze(docs: list[dict]) -> list[dict]:
    """Suspects: the ranks RAS has no data from (missing), and the ranks that launched
    fewer collectives of a kind than the most any rank launched (behind)."""
    suspects: list[dict] = []
    for d in docs:
        version = f"NCCL {d['nccl_version']} " if d["nccl_version"] else ""

        def evidence(line: int, text: str) -> dict:
            return {"source": d["name"], "line": line, "text": text}

        for c in d["comms"]:
            label = f"communicator {c['hash']}" + (f" ({c['size']} ranks)" if c["size"] else "")
            for m in c["missing"]:
                state = ("considered dead" if m["dead"] else "not answering" if m["unresponsive"]
                         else "not reporting this communicator")
                on = f" ({m['host']}" + (f", process {m['pid']})" if m["pid"] and m["pid"] > 0 else ")") \
                    if m["host"] else ""
                suspects.append({
                    "rank": m["rank"], "kind": "missing", **({"host": m["host"]} if m["host"] else {}),
                    "why": f"{version}RAS has no data from rank {m['rank']}{on} in {label}: {state}",
                    "evidence": [evidence(m["line"], f"{label}: missing rank {m['rank']}{on}, unresponsive "
                                          f"{str(m['unresponsive']).lower()}, considered dead {str(m['dead']).lower()}")]})
            for op in sorted({op for r in c["ranks"] for op in r["counts"]}):
                counts = {r["rank"]: r["counts"].get(op, 0) for r in c["ranks"]}
                top = max(counts.values())
                ahead = sorted(r for r, n in counts.items() if n == top)
                behind = sorted(r for r, n in counts.items() if n < top)
                if not behind:
                    continue
                host = {r["rank"]: r["host"] for r in c["ranks"]}
                line = {r["rank"]: r["line"] for r in c["ranks"]}
                for r in behind:
                    suspects.append({
                        "rank": r, "kind": "behind", **({"host": host[r]} if host[r] else {}),
                        "why": f"{version}RAS: in {label} rank {r} has launched {counts[r]} {op} operations, "
                               f"{_ranks_text(ahead)} {top}: they wait in one rank {r} never entered",
                        "evidence": [evidence(line[r], f"{label}: rank {r} launched {counts[r]} {op}, "
                                              f"rank {ahead[0]} {top}")]})
    return suspects
