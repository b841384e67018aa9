"""What a log line says about where it came from: time, rank, host, PID.

Launchers and libraries wrap lines in prefixes, often several deep
(`kubectl logs --timestamps --prefix` around torchrun's `[rank3]:` around a
glog line). parse_prefix() peels them off in order and returns the facts with
the remaining text.
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone

# ANSI colour and title codes; rsyslog (EscapeControlCharactersOnReceive, on by default)
# writes the ESC byte as "#033", so a coloured line shipped through syslog carries "#033[0m"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|#033\[[0-9;?]*[A-Za-z]")

_MONTHS = {m: i for i, m in enumerate(
    "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}

# Each prefix: (compiled regex anchored at the start, handler name). Order matters:
# outer wrappers first.
_K8S_TS = re.compile(r"(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)(?P<tz>Z|[+-]\d\d:?\d\d) ")
_K8S_PREFIX = re.compile(r"\[pod/(?P<pod>[^/\]\s]+)/(?P<container>[^\]\s]+)\] ")
_SRUN = re.compile(r"\s{0,4}(?P<rank>\d{1,5}): ")
# `mpirun --tag-output` (Open MPI): "[jobid,rank]<stdout>:" before each line; the MPI rank is
# a task like srun's (the rank when mpirun starts the ranks, a node when it starts torchrun)
_MPIRUN = re.compile(r"\[(?P<job>\d{1,9}),(?P<rank>\d{1,6})\]<(?:stdout|stderr|stddiag)>: ?")
# pdsh (DeepSpeed's multi-node runner) puts "host: " before each remote line; a host word is
# taken only when it is lowercase (as host names are written) and a launcher's or a logger's
# own prefix follows it, so that a message's "RuntimeError: " is never read as a host
# what follows a host word when it is one: a launcher's rank prefix or a glog line
_OWN_PREFIX_AHEAD = r"\[(?:rank\d{1,5}|[A-Za-z_]\w{0,30}?\d{1,5})\]:|[IWEF]\d{4} \d\d:\d\d:\d\d\."
_HOST_COLON = re.compile(r"(?P<host>[a-z0-9][a-z0-9-]{0,62}(?:\.[a-z0-9-]{1,62}){0,6}): "
                         r"(?=" + _OWN_PREFIX_AHEAD + r"|\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)")
# torchrun --tee: "[rank3]:" is the global rank; "[default0]:" is role "default", local rank 0
_TORCHRUN = re.compile(r"\[(?:rank(?P<rank>\d{1,5})|(?P<role>[A-Za-z_]\w{0,30}?)(?P<local_rank>\d{1,5}))\]:")
# A tqdm bar whose carriage return a paste dropped runs into the next line: "Train: 20%|█▉ |
# 375/1881 [3:40:16<14:52:25, 35.55s/it][rank3]:[E918 ...". The bar ends in its rate (and
# postfix) in brackets; the line proper starts at the torchrun prefix after it.
_BAR_THEN_PREFIX = re.compile(r"(?:it/s|s/it)(?:, [^\]\n]{0,200})?\](?=\[(?:rank\d{1,5}|[A-Za-z_]\w{0,30}?\d{1,5})\]:)")
# a shipper's "TIMESTAMP HOST message" line: the host word is taken only when a launcher's
# or a logger's own prefix follows it, so that a message's first word is never read as a host
# journald's `-o short-iso` (and rsyslog's ISO form) put the program and its pid between host
# and message: "2026-12-06T02:50:04+0000 node0 torchrun[22055]: [rank2]: ..."; the "prog[pid]: "
# tag is itself the evidence that the word before it is a host
_HOST_AFTER_TS = re.compile(r"(?P<host>[A-Za-z][\w-]{0,62}(?:\.[\w-]{1,62}){0,6}) "
                            r"(?:[\w./-]{1,64}\[\d{1,10}\]: |(?=" + _OWN_PREFIX_AHEAD + "))")
_ISO = re.compile(r"\[?(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)(?P<tz>Z|[+-]\d\d:?\d\d)?\]?[ |,:-]*")
_SYSLOG = re.compile(r"(?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +(?P<day>\d{1,2}) "
                     r"(?P<time>\d\d:\d\d:\d\d) (?P<host>[\w.-]+) (?:[\w./-]{1,64}(?:\[\d+\])?: )?")
# glog / c10d: "E1202 10:11:12.345678 4242 file.cpp:123] ", bracketed "[W1202 10:11:12.309 ...]",
# and PyTorch 2.x's c10 form without a PID: "[rank0]:[E1202 10:11:12.345678000 ProcessGroupNCCL.cpp:616] "
_GLOG = re.compile(r"\[?(?P<level>[IWEF])(?P<mm>\d\d)(?P<dd>\d\d) (?P<time>\d\d:\d\d:\d\d\.\d+) +"
                   r"(?:(?P<pid>\d+) +)?(?P<file>[^\s:\]]+):(?P<line>\d+)\] ?")
# vLLM's logger: "INFO 09-03 00:35:49 [__init__.py:241] " (0.6 on), "ERROR 06-13 02:36:52
# async_llm_engine.py:532] " (before), often behind its process tag "(EngineCore_0 pid=1358) "
# or "(RayWorkerWrapper pid=1234, ip=10.0.0.5) " (entries/healthy/vllm-*.log)
_VLLM_PROC = re.compile(r"\((?P<proc>[A-Za-z_][\w-]{0,40}) pid=(?P<pid>\d+)(?:, ip=(?P<ip>[\w.:-]{1,64}))?\) ")
_VLLM = re.compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<mm>\d\d)-(?P<dd>\d\d) "
                   r"(?P<time>\d\d:\d\d:\d\d)(?:\.\d+)? \[?(?P<file>[\w.-]{1,80}):(?P<line>\d+)\] ")
# Python logging with the rank and world size after the call site, the format of k2/icefall's
# setup_logger (icefall/utils.py) and the recipes built on it (lhotse, VALL-E, ...):
# "2023-04-13 16:00:05,621 INFO [trainer.py:650] (5/8) Reaches end of dataloader."
_PYLOG_RANK = re.compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) \[[^\]\s]{1,120}:\d{1,7}\] "
                         r"\((?P<rank>\d{1,5})/(?P<world>\d{1,5})\) ")
# docker compose: "trainer-1  | text" (service name, replica number, padding, a bar)
_COMPOSE = re.compile(r"(?P<service>[a-z][\w.-]{0,62}?)[-_](?P<replica>\d{1,3}) {1,40}\| ")
_NCCL = re.compile(r"(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] NCCL ")
_RANK_WORD = re.compile(r"\b(?:rank|Rank|RANK)[ =:\[]{0,2}(?P<rank>\d{1,5})\b")
# ProcessGroupNCCL's own log prefix (ProcessGroupNCCL::createLogPrefix: "[Rank R] ",
# "[PG N Rank R] ", "[PG ID N PG GUID G(desc) Rank R] ") names the rank within that
# process group, not the job's rank (DeepSpeed's "[Rank R] " is the job's)
_PG_RANK = re.compile(r"\[(?:PG [^\[\]]{1,200} )?Rank (?P<rank>\d{1,5})\] ")


# The prefixes parse_prefix() peels off, in its order: the site's matcher (find.js, through
# search.json) strips the same ones, so a pasted line reads there as it reads here
PREFIXES = (_K8S_TS, _K8S_PREFIX, _COMPOSE, _TORCHRUN, _MPIRUN, _HOST_COLON, _SRUN, _VLLM_PROC, _VLLM, _GLOG,
            _SYSLOG, _ISO)


def _clock(base: str) -> datetime:
    """"YYYY-MM-DD HH:MM:SS" as a datetime: sliced when it has that exact shape (a prefix is
    parsed on every candidate line, and strptime was a fifth of their cost), else strptime."""
    if len(base) == 19 and base[4] == base[7] == "-" and base[10] == " " and base[13] == base[16] == ":" \
            and (base[:4] + base[5:7] + base[8:10] + base[11:13] + base[14:16] + base[17:]).isdigit():
        return datetime(int(base[:4]), int(base[5:7]), int(base[8:10]),
                        int(base[11:13]), int(base[14:16]), int(base[17:19]))
    return datetime.strptime(base, "%Y-%m-%d %H:%M:%S")


def _iso_epoch(ts: str, tz: str | None) -> float | None:
    ts = ts.replace(",", ".").replace("T", " ")
    try:
        if "." in ts:
            base, frac = ts.split(".", 1)
            dt = _clock(base)
            extra = float("0." + frac[:6])
        else:
            dt = _clock(ts)
            extra = 0.0
    except ValueError:
        return None
    dt = dt.replace(tzinfo=timezone.utc)
    epoch = dt.timestamp() + extra
    if tz and tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        digits = tz[1:].replace(":", "")
        epoch -= sign * (int(digits[:2]) * 3600 + int(digits[2:4]) * 60)
    return epoch


def _day_epoch(month: int, day: int, clock: str, year: int = 2000) -> float | None:
    try:
        h, m, s = clock.split(":")
        dt = datetime(year, month, day, int(h), int(m), tzinfo=timezone.utc)
        return dt.timestamp() + float(s)
    except ValueError:
        return None


# A log shipper's JSON line (Fluent Bit, Vector, Docker's json-file, Loki exports): the
# line itself is one of these keys, the origin is in the others.
_JSON_TEXT = ("log", "message", "msg", "line", "MESSAGE")
_JSON_HOST = ("host", "hostname", "node", "pod", "pod_name", "_HOSTNAME", "kubernetes_pod_name")
_JSON_TIME = ("time", "timestamp", "@timestamp", "ts")


def _unwrap_json(text: str, meta: dict) -> str | None:
    """The message of a shipper's JSON line, with its host and time put in meta; None when
    the line is no such object."""
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    body = next((obj[k] for k in _JSON_TEXT if isinstance(obj.get(k), str)), None)
    inner = obj.get("message")
    if body is None and isinstance(inner, dict) and isinstance(inner.get("message"), str):
        # torchelastic's error file (--log-dir .../error.json, the @record decorator):
        # {"message": {"message": "KeyError: 'x'", "extraInfo": {"py_callstack", "timestamp"}}}
        body = inner["message"]
        extra = inner.get("extraInfo")
        if isinstance(extra, dict) and str(extra.get("timestamp", "")).isdigit():
            meta["ts"] = float(extra["timestamp"])
    if body is None or "\n" in body.rstrip("\r\n"):
        return None     # a whole traceback in one string: scan._flattened reads it line by line
    k8s = obj.get("kubernetes")
    host = next((obj[k] for k in _JSON_HOST if isinstance(obj.get(k), str)), None)
    if host is None and isinstance(k8s, dict) and isinstance(k8s.get("pod_name"), str):
        host = k8s["pod_name"]
    if host:
        meta["host"] = host
    meta["shipper"] = True
    ts = next((obj[k] for k in _JSON_TIME if isinstance(obj.get(k), str)), None)
    if ts:
        m = _K8S_TS.match(ts + " ") or _ISO.match(ts)
        if m and m.group("ts"):
            epoch = _iso_epoch(m.group("ts"), m.group("tz"))
            if epoch is not None:
                meta["ts"] = epoch
    return body.rstrip("\r\n")


def _host_after_ts(rest: str, meta: dict) -> str:
    h = _HOST_AFTER_TS.match(rest)
    if not h:
        return rest
    meta.setdefault("host", h.group("host"))
    return rest[h.end():]


def parse_prefix(text: str) -> tuple[dict, str]:
    """Return ({ts, rank, local_rank, host, pid, device, level}, rest of the line).
    A rank read from the message rather than a launcher's prefix has rank_from "word",
    or "group" when it is the rank within a process group that ProcessGroupNCCL prints;
    an `srun -l` task number is `task` (and the rank, rank_from "task", unless a
    torchrun prefix inside names the rank). A shipper's JSON line is read as its message."""
    meta: dict = {}
    rest = text
    if text[:2] == '{"' and text.rstrip().endswith("}"):
        body = _unwrap_json(text, meta)
        if body is not None:
            rest = body
    if rest.find("/it", 0, 400) >= 0 or rest.find("it/s", 0, 400) >= 0:
        m = _BAR_THEN_PREFIX.search(rest, 0, 400)
        if m:
            rest = rest[m.end():]
    for _ in range(6):  # prefixes nest a few levels at most
        m = _K8S_TS.match(rest)
        if m and "ts" not in meta:
            meta["ts"] = _iso_epoch(m.group("ts"), m.group("tz"))
            rest = _host_after_ts(rest[m.end():], meta)
            continue
        m = _K8S_PREFIX.match(rest)
        if m:
            meta["host"] = m.group("pod")
            rest = rest[m.end():]
            continue
        m = _COMPOSE.match(rest)
        if m:
            meta.setdefault("host", f"{m.group('service')}-{m.group('replica')}")
            rest = rest[m.end():]
            continue
        m = _TORCHRUN.match(rest)
        if m:
            # inside `srun -l`, torchrun's prefix names the rank; the task number is then
            # the node's agent, not a rank
            by_task = meta.get("rank_from") == "task"
            if by_task:
                del meta["rank"], meta["rank_from"]
            if m.group("rank") is not None:
                meta.setdefault("rank", int(m.group("rank")))
            else:
                meta.setdefault("local_rank", int(m.group("local_rank")))
            rest = rest[m.end():]
            continue
        m = _MPIRUN.match(rest) if rest[:1] == "[" else None
        if m and "task" not in meta:
            meta["task"] = int(m.group("rank"))
            if "rank" not in meta:
                meta["rank"], meta["rank_from"] = meta["task"], "task"
            rest = rest[m.end():]
            continue
        m = _HOST_COLON.match(rest) if "host" not in meta else None
        if m:
            meta["host"] = m.group("host")
            rest = rest[m.end():]
            continue
        m = _SRUN.match(rest)
        if m and not rest[m.end():m.end() + 1].isdigit() and "task" not in meta:
            # `srun -l`: the task number, which is the rank when srun starts the ranks itself
            meta["task"] = int(m.group("rank"))
            if "rank" not in meta:
                meta["rank"], meta["rank_from"] = meta["task"], "task"
            rest = rest[m.end():]
            continue
        m = _VLLM_PROC.match(rest) if rest[:1] == "(" else None
        if m:
            meta.setdefault("pid", int(m.group("pid")))
            if m.group("ip"):
                meta.setdefault("host", m.group("ip"))
            rest = rest[m.end():]
            continue
        m = _VLLM.match(rest) if rest[:1] in "DIWEC" else None
        if m:
            if "ts" not in meta:
                meta["ts"] = _day_epoch(int(m.group("mm")), int(m.group("dd")), m.group("time"))
            meta["level"] = m.group("level")[0]
            rest = rest[m.end():]
            continue
        m = _PYLOG_RANK.match(rest) if rest[:1] in "DIWEC" else None
        if m and int(m.group("rank")) < int(m.group("world")):
            meta.setdefault("rank", int(m.group("rank")))
            meta["level"] = m.group("level")[0]
            rest = rest[m.end():]
            continue
        m = _GLOG.match(rest)
        if m:
            if "ts" not in meta:
                meta["ts"] = _day_epoch(int(m.group("mm")), int(m.group("dd")), m.group("time"))
            if m.group("pid"):
                meta["pid"] = int(m.group("pid"))
            meta["level"] = m.group("level")
            rest = rest[m.end():]
            continue
        m = _SYSLOG.match(rest)
        if m:
            if "ts" not in meta:
                meta["ts"] = _day_epoch(_MONTHS[m.group("mon")], int(m.group("day")), m.group("time"))
            meta.setdefault("host", m.group("host"))
            rest = rest[m.end():]
            continue
        m = _ISO.match(rest)
        if m and m.end() > 0:
            if "ts" not in meta:
                meta["ts"] = _iso_epoch(m.group("ts"), m.group("tz"))
            rest = _host_after_ts(rest[m.end():], meta)
            continue
        break
    m = _NCCL.match(rest)
    if m:
        meta.setdefault("host", m.group("host"))
        meta.setdefault("pid", int(m.group("pid")))
        meta["device"] = int(m.group("dev"))
    if meta.get("rank_from") == "task" and "local_rank" in meta:
        del meta["rank"], meta["rank_from"]
    if "rank" not in meta:
        m = _RANK_WORD.search(rest, 0, 200)
        if m:
            meta["rank"] = int(m.group("rank"))
            # where the rank came from: a word of the message, or a process group's prefix
            meta["rank_from"] = "word"
            if "ProcessGroupNCCL" in text:
                g = _PG_RANK.search(rest, max(0, m.start() - 220), m.end() + 2)
                if g and g.start("rank") == m.start("rank"):
                    meta["rank_from"] = "group"
    if meta.get("ts") is None:
        meta.pop("ts", None)
    return meta, rest


def strip_ansi(text: str) -> str:
    return ANSI.sub("", text) if "\x1b" in text or "#033[" in text else text


_SHAPE = [
    (re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"), "<ts>"),
    (re.compile(r"0x[0-9a-fA-F]+"), "<hex>"),
    (re.compile(r"\b[0-9a-f]{12,}\b"), "<hex>"),
    (re.compile(r"(?:/[\w.@+-]+)+/?"), "<path>"),
    (re.compile(r"\b\d+(?:\.\d+)*\b"), "<n>"),
    (re.compile(r"\s+"), " "),
]


def shape(text: str) -> str:
    """A line with its variable parts folded: the same event in two runs has one shape."""
    return fold(parse_prefix(strip_ansi(text))[1])


def fold(rest: str) -> str:
    """shape() of a line whose prefixes were already parsed off."""
    for rx, repl in _SHAPE:
        rest = rx.sub(repl, rest)
    return rest.strip()[:300]
