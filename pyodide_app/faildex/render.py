"""Renderings of a report: text (terminal), JSON (stable), Markdown (a support ticket).

`redact()` replaces host names, IP addresses, user names in paths, e-mail
addresses and tokens with stable placeholders (the same value always gets the
same placeholder), so a ticket can go into a public issue.
"""
from __future__ import annotations

import json
import re

SITE = "https://faildex.dev/"   # mkdocs.yml site_url: where entry links in reports point


def to_json(report: dict) -> str:
    return json.dumps(report, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------- text

def to_text(report: dict, color: bool = False, site: str = SITE) -> str:
    def c(code: str, s: str) -> str:
        return f"\x1b[{code}m{s}\x1b[0m" if color else s

    out: list[str] = []
    p = report["primary"]
    for inp in report["inputs"]:
        if inp["status"] != "ok" or inp["messages"]:
            out.append(c("33", f"note: {inp['name']}: {'; '.join(inp['messages'])}"))
    if report.get("verdict"):
        out.append(c("1;35", report["verdict"]))
        out.append("")
    rows = (report.get("job") or {}).get("timeline") or []
    if len(rows) > 1:
        out.append(c("1", "Ranks (first error, exit)"))
        for r in rows:
            out.append("  " + timeline_line(r))
        out.append("")
    if report.get("suspects"):
        out.append(c("1;35", "Suspects (the rank that stopped the others)"))
        for sus in report["suspects"]:
            out.append(f"  rank {sus['rank']}" + _scope(sus) + (f" on {sus['host']}" if sus.get("host") else "")
                       + f": {sus['kind']} · {sus['why']}")
            for e in sus["evidence"][:3]:
                at = f"{e['source']} record {e['record']}" if "record" in e else f"{e['source']}:{e['line']}"
                out.append(c("36", f"      {at}: ") + e["text"][:200])
        out.append("")
    if p:
        out.append(c("1;31", f"{p['title']}") + f"  [{p['id']}]")
        out.append(f"confidence {p['confidence']:.2f} · {p['why']}")
        out.append(f"entry: {site}{p['url']}")
    elif report.get("unmatched"):
        u = report["unmatched"]
        out.append(c("1;33", "No known failure matched, but the log holds errors."))
        if u.get("first_error"):
            f = u["first_error"]
            out.append(f"first error      {f['source']}:{f['line']}: {f['text'][:200]}")
        if u.get("last_exception"):
            f = u["last_exception"]
            out.append(f"last exception   {f['source']}:{f['line']}: {f['text'][:200]}")
        for n in u.get("nearest", []):
            out.append(f"nearest entry    {n['id']} ({n['title']})")
    else:
        out.append(c("1;32", "No failure found."))
    if report["next_action"]:
        na = report["next_action"]
        out += ["", c("1", "Next: ") + na["do"]]
        if na.get("command"):
            out += ["  " + line for line in na["command"].splitlines()]
    ev = report["evidence"]
    if ev:
        out += ["", c("1", "Evidence")]
        for e in ev:
            where = f"{e['source']}:{e['line']}"
            extra = "".join(f" {k} {e[k]}" for k in ("rank", "host") if k in e)
            out.append(c("36", f"  {e['role']:<11} {where}{extra}  ({e['entry']})"))
            for b in e.get("before", []):
                out.append("      " + b[:160])
            out.append(c("1", "    > " + e["text"][:300]))
            for a in e.get("after", []):
                out.append("      " + a[:160])
    if report["alternatives"]:
        out += ["", c("1", "Alternatives")]
        for a in report["alternatives"][:5]:
            out.append(f"  {a['confidence']:.2f} {a['id']}: {a['why']}")
    if report["collateral"]:
        out += ["", c("1", "Collateral (consequences, not causes)")]
        for a in report["collateral"]:
            ranks = f" ranks {_ranges(a['ranks'])}" if a.get("ranks") else ""
            out.append(f"  {a['id']} ×{a['count']}{ranks}")
    facts = {k: v for k, v in report["facts"].items() if v and k not in ("hosts", "ranks")}
    if facts or report["facts"].get("hosts"):
        out += ["", c("1", "Facts")]
        for k, v in facts.items():
            out.append(f"  {k}: {v}")
        if report["facts"].get("hosts"):
            out.append(f"  hosts: {', '.join(report['facts']['hosts'][:8])}")
        if report["facts"].get("ranks"):
            out.append(f"  ranks seen: {_ranges(report['facts']['ranks'])}")
    if report["missing"]:
        out += ["", c("1", "Missing facts")]
        for m in report["missing"]:
            out.append(f"  {m['fact']}: {m['why']}" + (f"\n    run: {m['how']}" if m["how"] else ""))
    if report.get("baseline"):
        b = report["baseline"]
        out += ["", c("1", f"New compared with the good run ({b['new_event_count']} event shapes)")]
        for e in b["new_events"][:15]:
            out.append(f"  {e['source']}:{e['line']}: {e['text'][:200]}")
    return "\n".join(out) + "\n"


def timeline_line(r: dict) -> str:
    """One row of the per-rank timeline (job.timeline), as every rendering shows it."""
    who = (f"rank {r['ranks']}" if r["count"] == 1 else f"ranks {r['ranks']}") if r["ranks"] else ""
    parts = [who + (f" on {r['host']}" if r.get("host") else ""), r["state"]]
    if r.get("error"):
        parts.append(r["error"][:140])
    if r.get("exit") is not None:
        parts.append(f"exit {r['exit']}" + (f" ({r['signal']})" if r.get("signal") else ""))
    return " · ".join(p for p in parts if p)


def _ranges(nums: list[int]) -> str:
    if not nums:
        return ""
    nums = sorted(set(nums))
    parts, start, prev = [], nums[0], nums[0]
    for n in nums[1:] + [None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ",".join(parts)


# ---------------------------------------------------------------- markdown

def _fence(text: str) -> str:
    """A code fence that the text cannot close."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


# Fact keys as a reader says them (the report keeps the keys; pages and tickets show these).
FACT_LABELS = {
    "cuda_version": "CUDA version", "cudnn_version": "cuDNN version", "nccl_version": "NCCL version",
    "driver_version": "NVIDIA driver version", "pytorch_version": "PyTorch version",
    "python_version": "Python version", "deepspeed_version": "DeepSpeed version",
    "vllm_version": "vLLM version", "transformers_version": "Transformers version",
    "nproc_per_node": "processes per node", "nnodes": "nodes", "world_size": "world size",
    "rdzv_backend": "rendezvous backend", "rdzv_endpoint": "rendezvous endpoint",
    "max_restarts": "max restarts", "timeout_ms": "timeout (ms)", "timeout_s": "timeout (s)",
    "exitcode": "exit code", "exit_code": "exit code", "launch_command": "launch command",
    "initiating_log": "the log of the rank that failed first", "hosts": "hosts", "ranks": "ranks seen",
}
VERSION_FACTS = ("pytorch_version", "cuda_version", "cudnn_version", "nccl_version", "driver_version",
                 "python_version", "deepspeed_version", "vllm_version", "transformers_version")
LAUNCH_FACTS = ("launcher", "nnodes", "nproc_per_node", "world_size", "rdzv_backend", "rdzv_endpoint",
                "max_restarts")


def fact_label(key: str) -> str:
    return FACT_LABELS.get(key) or key.replace("_", " ")


def to_markdown(report: dict, redact_it: bool = False, site: str = SITE) -> str:
    """A support ticket: the error, then only what the log says that bears on it (versions
    and launch facts it holds, the failing rank), and the facts the entry needs to decide."""
    p = report["primary"]
    facts = report["facts"]
    lines: list[str] = []
    title = p["title"] if p else "Training job failure (no known failure matched)"
    lines += [f"## {_md_inline(title)}", ""]
    if p:
        lines.append(f"faildex diagnosis: **{p['id']}** (confidence {p['confidence']:.2f}); "
                     f"entry: {site}{p['url']}")
        lines.append("")
    if report.get("verdict"):
        lines += [f"**{_md_inline(report['verdict'])}**", ""]
    rows = (report.get("job") or {}).get("timeline") or []
    if len(rows) > 1:
        lines += ["| ranks | host | state | first error | exit |", "|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {_md_cell(r['ranks'])} | {_md_cell(r.get('host', ''))} | {_md_cell(r['state'])} | "
                         f"{_md_cell(r.get('error', ''))} | {_md_cell(r.get('exit', ''))} |")
        lines.append("")
    if report.get("suspects"):
        lines += ["### Suspect ranks", "", "| rank | host | kind | why |", "|---|---|---|---|"]
        for sus in report["suspects"]:
            lines.append(f"| {sus['rank']}{_md_cell(_scope(sus))} | {_md_cell(sus.get('host', ''))} | {sus['kind']} | "
                         f"{_md_cell(sus['why'])} |")
        lines.append("")
    first = (report["evidence"][0] if report["evidence"] else
             (report.get("unmatched") or {}).get("last_exception") or
             (report.get("unmatched") or {}).get("first_error"))
    lines += ["### Error", ""]
    if first:
        block = first["text"]
        f = _fence(block)
        lines += [f, block, f, ""]
    else:
        lines += ["(no error line found)", ""]
    known = [(fact_label(k), facts[k]) for k in VERSION_FACTS if facts.get(k)]
    launch = [f"{k}={facts[k]}" for k in LAUNCH_FACTS if facts.get(k)]
    if launch:
        known.append(("launcher", " ".join(launch)))
    if known:
        lines += ["### Environment", "", "| | |", "|---|---|"]
        lines += [f"| {name} | {_md_cell(value)} |" for name, value in known]
        lines.append("")
    if facts.get("launch_command"):
        f = _fence(facts["launch_command"])
        lines += ["### Launch command", "", f + "sh", facts["launch_command"], f, ""]
    if p and p.get("first_seen"):
        fs = p["first_seen"]
        lines += ["### Failing rank", "",
                  f"- first failure at `{fs['source']}:{fs['line']}`"
                  + (f", rank {fs['rank']}" if "rank" in fs else "")
                  + (f", host {_md_inline(str(fs['host']))}" if "host" in fs else ""), ""]
    if report["evidence"]:
        lines += ["### Evidence", ""]
        for e in report["evidence"]:
            block = "\n".join(e.get("before", []) + [e["text"]] + e.get("after", []))
            f = _fence(block)
            lines += [f"{e['role']} — `{e['source']}:{e['line']}` ({e['entry']})", "", f + "text",
                      block, f, ""]
    if report["collateral"]:
        lines += ["### Collateral reports", ""]
        for c in report["collateral"]:
            lines.append(f"- {c['id']} ×{c['count']}" + (f" (ranks {_ranges(c['ranks'])})"
                                                        if c.get("ranks") else ""))
        lines.append("")
    if report["missing"]:
        lines += ["### Needed to decide, not in the log", ""]
        for m in report["missing"]:
            how = f" (`{m['how']}`)" if m.get("how") and "`" not in m["how"] else ""
            lines.append(f"- {_md_inline(fact_label(m['fact']))}: {_md_inline(m['why'])}{how}")
        lines.append("")
    lines += ["### Reproducibility and what was tried", "",
              "- Reproducible on the same nodes: _yes / no / not tried_",
              "- Reproducible on other nodes: _yes / no / not tried_",
              "- Tried so far: _..._", ""]
    if report["next_action"]:
        lines += [f"Suggested next step: {_md_inline(report['next_action']['do'])}", ""]
    text = "\n".join(lines)
    return redact(text, known_hosts(report)) if redact_it else text


def known_hosts(report: dict) -> list[str]:
    """Every host name the report learned: the facts', the job model's, the suspects'."""
    hosts = set(report.get("facts", {}).get("hosts", []))
    for r in (report.get("job") or {}).get("ranks", []):
        if r.get("host"):
            hosts.add(r["host"])
    for s in report.get("suspects") or []:
        if s.get("host"):
            hosts.add(s["host"])
    return sorted(hosts)


def _md_inline(s: str) -> str:
    return re.sub(r"([<>*_`\[\]|])", r"\\\1", str(s))


def _md_cell(s) -> str:
    return _md_inline(str(s)).replace("\n", " ")


# ---------------------------------------------------------------- redaction

_REDACTIONS = [
    ("token", re.compile(r"\bhf_[A-Za-z0-9]{20,}\b")),
    ("token", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("token", re.compile(r"(?i)\bbearer ([A-Za-z0-9._~+/=-]{12,})")),
    ("token", re.compile(r"(?i)\b(?:WANDB_API_KEY|HF_TOKEN|HUGGING_FACE_HUB_TOKEN|AWS_SECRET_ACCESS_KEY|"
                         r"AWS_SESSION_TOKEN|GITHUB_TOKEN|OPENAI_API_KEY)[=:] ?['\"]?([^\s'\"]{6,})")),
    ("token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b")),
    ("email", re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")),
    ("ip", re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b")),
    # IPv6: a "::" or all eight groups, so that clock times (10:11:12) stay
    ("ip", re.compile(r"(?<![\w:.])(?=[0-9a-fA-F:]{0,40}::|(?:[0-9a-fA-F]{1,4}:){7})"
                      r"(?:[0-9a-fA-F]{0,4}:){2,7}[0-9a-fA-F]{1,4}(?![\w:])")),
    # the user folder of a home, scratch or project path (HPC sites put users under /scratch,
    # /lustre/scratch, /gpfs/home, /work ...)
    ("user", re.compile(r"(?:/home|/Users|/users|/scratch\d?|/scratch/users|/lustre/scratch|/lustre/home|/gpfs/home"
                        r"|/gpfs/scratch|/fsx/users|/fs/users|/work|/data/users|/mnt/home)/(?!users/)"
                        r"([A-Za-z][\w.-]{1,31})(?=/)")),
    # host names: NCCL prefixes, Slurm/Kubernetes node names, FQDNs
    ("host", re.compile(r"(?m)^(?:[ \t>]*)([\w.-]+)(?=:\d+:\d+ \[\d+\] NCCL)")),
    ("host", re.compile(r"(?<=\bON )[\w.-]+(?= CANCELLED)")),
    ("host", re.compile(r"\bhost\s{0,8}: ([\w.-]+)")),
    ("host", re.compile(r"(?<=\bhostname[=: ])[\w.-]+")),
    ("host", re.compile(r"\b[a-z][\w-]*(?:\.[a-z][\w-]*){1,}\.(?:com|net|org|internal|local|lan|io|ai|edu|cluster)\b")),
]


def redact(text: str, extra_hosts: list[str] = ()) -> str:
    """Replace personal and secret values with stable placeholders."""
    table: dict[tuple[str, str], str] = {}

    def placeholder(kind: str, value: str) -> str:
        if kind == "token":
            return "<token>"
        key = (kind, value)
        if key not in table:
            n = sum(1 for k in table if k[0] == kind) + 1
            table[key] = f"<{kind}-{n}>"
        return table[key]

    for h in sorted(set(extra_hosts), key=len, reverse=True):
        if h and len(h) > 2:
            text = re.sub(rf"(?<![\w.-]){re.escape(h)}(?![\w-])", lambda m: placeholder("host", m.group(0)), text)
    for kind, rx in _REDACTIONS:
        def sub(m, kind=kind):
            if m.re.groups:
                g = m.group(1)
                s, e = m.span(1)
                return m.group(0)[:s - m.start()] + placeholder(kind, g) + m.group(0)[e - m.start():]
            return placeholder(kind, m.group(0))
        text = rx.sub(sub, text)
    # a host or user seen once (NCCL prefix, Slurm ON x, a home folder) is replaced everywhere
    # else too; a host's short name (gpu-node-17 of gpu-node-17.cluster.internal) with it
    for (kind, value), ph in list(table.items()):
        if kind not in ("host", "user"):
            continue
        names = [value]
        short = value.split(".", 1)[0]
        if kind == "host" and short != value and len(short) >= 3 and re.search(r"[\d-]", short):
            names.append(short)
        for name in names:
            if len(name) >= 3:
                text = re.sub(rf"(?<![\w.<-]){re.escape(name)}(?![\w-])", ph, text)
    return text


def _scope(sus: dict) -> str:
    """ " within PG x" for a rank numbered within its process group (old watchdog lines)."""
    if sus.get("rank_scope") != "group":
        return ""
    return " within " + (f"PG {sus['pg']}" if sus.get("pg") else "its process group")
