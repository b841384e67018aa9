"""Every example, varied the ways real logs vary, keeps its diagnosis.

Launchers and shippers wrap lines in prefixes, tools flatten tracebacks into JSON
strings, Windows and IDEs change line ends and punctuation, numbers differ from run
to run, and logs get cut. A signature written from one example's incidental text
breaks under one of these; a signature written from the software's format string
does not (CONTRIBUTING: "How a signature is written").
"""
from __future__ import annotations

import json
import re

import pytest

from faildex import Diagnosis
from generator.validate import example_text

_FULL = str.maketrans({":": "：", "(": "（", ")": "）", ",": "，", "!": "！", ";": "；"})
# 4+ digits: ports, PIDs, sizes, timeouts. Shorter numbers are often the message itself
# (errno 98, Xid 79, signal 9, exit code 137) and stay.
_NUM = re.compile(r"(?<![\w.])\d{4,}(?![\w.])")


def _prefix(fmt):
    return lambda lines: [fmt.format(i=i) + ln for i, ln in enumerate(lines)]


def _numbers(lines):
    """Every free-standing number of 4+ digits gets other digits of the same length."""
    return [_NUM.sub(lambda m: str(int(m.group()) % 9 + 1) * len(m.group()), ln) for ln in lines]


def _json_flat(lines, ascii_only=False):
    """One JSON record holding the lines. Go's encoding/json (Docker's json-file driver)
    keeps non-ASCII text as UTF-8; Python's json.dumps escapes it as \\uXXXX by default."""
    return [json.dumps({"log": "\n".join(lines) + "\n", "stream": "stderr", "time": "2026-11-30T10:11:12Z"},
                       ensure_ascii=ascii_only)]


def _moby_string(text: str) -> str:
    """A string as Docker's json-file driver writes it (moby daemon/logger/jsonfilelog/jsonlog/
    jsonlogbytes.go, ffjsonWriteJSONBytesAsString): backslash and quote escaped, \\n and \\r
    as such, every other control byte and <, > and & as \\u00XX, other text as UTF-8."""
    out = []
    for ch in text:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch < " " or ch in "<>&":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _docker_json_file(lines):
    """One json-file record per line, as `docker logs` reads them from disk."""
    return ['{"log":' + _moby_string(ln + "\n") + f',"stream":"stderr","time":"2026-11-30T10:11:{i % 60:02d}.123456789Z"}}'
            for i, ln in enumerate(lines)]


def _cut_last(lines):
    """The last non-empty line loses its last third (a truncated log)."""
    out = list(lines)
    for i in range(len(out) - 1, -1, -1):
        if out[i].strip():
            keep = max(40, len(out[i]) * 2 // 3)
            out[i] = out[i][:keep]
            break
    return out


VARIANTS = {
    "rank-prefix": _prefix("[rank3]:"),
    "local-rank-prefix": _prefix("[default1]:"),
    "srun-l": _prefix("  7: "),
    "kubectl-prefix-timestamps": _prefix("2026-11-30T10:11:{i:02d}.123456789Z [pod/train-worker-2/pytorch] "),
    "docker-compose": _prefix("trainer-1  | "),
    "syslog": _prefix("Nov 30 10:11:12 gpu-node-07 python[4242]: "),
    "json-flattened": _json_flat,
    "json-flattened-ascii": lambda lines: _json_flat(lines, ascii_only=True),
    "docker-json-file": _docker_json_file,
    "crlf": None,
    "full-width-punctuation": lambda lines: [ln.translate(_FULL) for ln in lines],
    "numbers-changed": _numbers,
    "last-line-cut": _cut_last,
}


def _diagnose(index, data: bytes):
    d = Diagnosis(index)
    d.feed("x.log", data)
    d.close("x.log")
    r = d.report()
    return r["primary"]["id"] if r["primary"] else None


# Variants not yet survived by every example: the share that must keep its diagnosis
# (below today's figure; only ever moves up). A cut last line still breaks signatures
# that require trailing words: issue 9 lists the entries.
PARTIAL = {"last-line-cut": 0.89}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_examples_keep_their_diagnosis(entries, index, variant):
    broken, total = [], 0
    for e in entries:
        for i, ex in enumerate(e.data["examples"]):
            if ex.get("expect", e.id) != e.id:
                continue
            lines = example_text(e, ex).splitlines()
            if VARIANTS[variant] is None:
                data = "\r\n".join(lines).encode() + b"\r\n"
            else:
                data = "\n".join(VARIANTS[variant](lines)).encode() + b"\n"
            total += 1
            got = _diagnose(index, data)
            if got != e.id:
                broken.append(f"{e.rel} example {i}: {got}")
    print(f"\n{variant}: {total - len(broken)} of {total} examples keep their diagnosis")
    message = f"{variant}: {len(broken)} of {total} examples change:\n" + "\n".join(broken)
    if variant in PARTIAL:
        print(message)
        assert (total - len(broken)) / total >= PARTIAL[variant], message
    else:
        assert not broken, message


def test_json_unicode_escapes_are_read_as_their_characters_and_nothing_else():
    from faildex.scan import _readable
    # Docker's json-file escapes <, > and &; Python's json.dumps non-ASCII text (a pair for
    # characters beyond the BMP). A quote, a backslash and control characters stay escaped (the
    # JSON string must stay one string on one line), and an escaped backslash before "u" is a
    # backslash
    line = rb'{"log":"\u003cmodule\u003e \u0026 \u5df2\u6740\u6b7b \ud83d\ude00 \u0022 \u0009 \\u0041 \ud83d"}'
    got = _readable(line)
    assert got.decode() == '{"log":"<module> & 已杀死 😀 \\u0022 \\u0009 \\\\u0041 \\ud83d"}'
    assert json.loads(got) == json.loads(line)
    assert _readable(b"no escapes here\n") is None
