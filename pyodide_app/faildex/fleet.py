"""`faildex fleet report`: the fleet page from the JSON lines of `faildex triage`.

    faildex fleet report triage.jsonl more/*.jsonl -o fleet/    ->  fleet/index.html
    faildex fleet metrics triage.jsonl -o /var/lib/node_exporter/faildex.prom

One static page with the site's look (the site's Jinja2 template and CSS, the
mkdocs-material theme's stylesheet): failures by class and by week, and the hosts
that keep appearing in hardware failures, ranked as drain candidates with the
lines that say so, each linked to its entry. No server; one script file sorts the tables.

Aggregation reads the lines twice and keeps only counters: the first pass finds
each job's last line (a job triaged again counts once, as last written), the
second counts those. Rendering needs faildex[fleet] (Jinja2 and the theme).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import heapq
import re
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path

from .render import SITE

# The failures that point at a machine rather than the job: a host that keeps
# showing up in them is a candidate to drain. Decided here, by entry id, in one place.
HARDWARE_ENTRIES = {
    "gpu-ecc-error": "GPU memory ECC (Xid 48/63/64/94/95)",
    "gpu-fell-off-bus": "GPU fell off the bus (Xid 79)",
    "nvlink-error": "NVLink errors (Xid 74)",
    "nccl-ib-retry-exceeded": "InfiniBand / RoCE link (retry exceeded)",
}
MIN_JOBS_TO_DRAIN = 2      # one hardware failure is an event; two on one host is a pattern
MIN_CULPRIT_JOBS = 3       # a host that held the first suspect of this many failed jobs, any class
MAX_EVIDENCE = 3
MAX_DRAIN_SHOWN = 25       # the page lists the top ones; fleet.json (--json) has all
MAX_WEEKS = 12
MAX_JOBS_LISTED = 1000     # per failure class (and clean, unmatched, unreadable): the most recent
PAGE_SIZE = 100            # jobs per list page
WEEK_COLUMNS = 8
PACKAGE_DIR = Path(__file__).resolve().parent


class FleetError(Exception):
    pass


def _lines(paths: list[str], warn):
    """(file number, line number, parsed dict) for every readable JSON line."""
    for n, path in enumerate(paths):
        try:
            fh = open(path, encoding="utf-8", errors="replace")
        except OSError as err:
            raise FleetError(f"{path}: {err.strerror or err}") from None
        with fh:
            for lineno, raw in enumerate(fh, 1):
                if not raw.strip():
                    continue
                try:
                    item = json.loads(raw)
                except ValueError:
                    warn(f"{path}:{lineno}: not a JSON line (a line cut short?), skipped")
                    continue
                if not isinstance(item, dict) or "job" not in item:
                    warn(f"{path}:{lineno}: not a faildex triage line (no job), skipped")
                    continue
                yield n, lineno, item


def week_of(ended: str | None) -> str:
    try:
        d = datetime.strptime(ended[:10], "%Y-%m-%d")
    except (TypeError, ValueError):
        return "unknown"
    year, week, _ = d.isocalendar()
    return f"{year}-W{week:02d}"


def aggregate(paths: list[str], warn=lambda msg: None) -> dict:
    """Counters over the last line of each job."""
    last: dict[str, int] = {}
    for n, lineno, item in _lines(paths, lambda msg: None):
        last[str(item["job"])] = (n << 32) | lineno
    classes: Counter = Counter()
    meta: dict[str, dict] = {}
    weeks: dict[str, Counter] = defaultdict(Counter)
    days: dict[str, Counter] = defaultdict(Counter)
    host_classes: dict[str, Counter] = defaultdict(Counter)
    culprit_hosts: dict[str, Counter] = defaultdict(Counter)
    week_jobs: Counter = Counter()
    outcomes: Counter = Counter()
    host_jobs: Counter = Counter()
    hw: dict[str, dict] = {}
    digests: Counter = Counter()
    lists: dict[str, list] = defaultdict(list)    # class or outcome -> heap of the most recent jobs
    for n, lineno, item in _lines(paths, warn):
        if last.get(str(item["job"])) != (n << 32) | lineno:
            continue
        outcome = item.get("outcome", "known" if item.get("primary") else "clean")
        outcomes[outcome] += 1
        key = item["primary"]["id"] if item.get("primary") else outcome
        heap = lists[key]
        entry = (item.get("ended") or "", str(item["job"]), n, lineno)
        if len(heap) < MAX_JOBS_LISTED:
            heapq.heappush(heap, (entry, _job_row(item)))
        elif entry > heap[0][0]:
            heapq.heapreplace(heap, (entry, _job_row(item)))
        digests[item.get("index", "")] += 1
        week = week_of(item.get("ended"))
        week_jobs[week] += 1
        hosts = [h for h in item.get("hosts") or [] if isinstance(h, str)]
        host_jobs.update(set(hosts))
        p = item.get("primary")
        if not p:
            continue
        eid = p["id"]
        classes[eid] += 1
        weeks[week][eid] += 1
        days[(item.get("ended") or "unknown")[:10]][eid] += 1
        # the host of the rank the job model found started it (any class)
        first = next((s for s in item.get("suspects") or [] if isinstance(s, dict)), None)
        if first and isinstance(first.get("host"), str) and first["host"]:
            culprit_hosts[first["host"]][eid] += 1
        for h in set(hosts):
            host_classes[h][eid] += 1
        meta.setdefault(eid, {k: p.get(k, "") for k in ("title", "category", "severity", "url")})
        if eid not in HARDWARE_ENTRIES:
            continue
        evidence = [e for e in item.get("evidence") or [] if e.get("entry") == eid]
        named = sorted({e["host"] for e in evidence if e.get("host")})
        # blame the host the line names; else share it among the job's hosts
        blamed = [(h, 1.0, True) for h in named] or [(h, 1.0 / len(hosts), False) for h in hosts]
        for host, weight, direct in blamed:
            h = hw.setdefault(host, {"host": host, "score": 0.0, "jobs": 0, "named": 0,
                                     "entries": Counter(), "evidence": []})
            h["score"] += weight
            h["jobs"] += 1
            h["named"] += direct
            h["entries"][eid] += 1
            if len(h["evidence"]) < MAX_EVIDENCE:
                e = next((e for e in evidence if e.get("host") in (None, host)), None)
                h["evidence"].append({"job": str(item["job"]), "entry": eid, "ended": item.get("ended", ""),
                                      "where": f"{e['source']}:{e['line']}" if e else "",
                                      "text": e["text"] if e else "", "direct": direct})
    drain = sorted((h for h in hw.values() if h["jobs"] >= MIN_JOBS_TO_DRAIN),
                   key=lambda h: (-h["score"], -h["jobs"], h["host"]))
    for h in drain:
        h["ran"] = host_jobs[h["host"]]
        h["score"] = round(h["score"], 2)
        h["entries"] = h["entries"].most_common()
    return {"jobs": len(last), "outcomes": dict(outcomes), "classes": classes.most_common(),
            "meta": meta, "weeks": {w: dict(c) for w, c in weeks.items()},
            "week_jobs": dict(week_jobs), "drain": drain, "hosts_seen": len(host_jobs),
            "days": {d: dict(c) for d, c in days.items()},
            # per class and outcome, the most recent jobs first (at most MAX_JOBS_LISTED)
            "jobs_listed": {k: [row for _, row in sorted(h, key=lambda x: x[0], reverse=True)] for k, h in lists.items()},
            "host_classes": {h: dict(c) for h, c in host_classes.items()},
            # hosts that held the first suspect in MIN_CULPRIT_JOBS or more failed jobs, most first
            "culprit_hosts": sorted(({"host": h, "jobs": sum(c.values()), "ran": host_jobs[h],
                                      "entries": c.most_common()} for h, c in culprit_hosts.items()
                                     if sum(c.values()) >= MIN_CULPRIT_JOBS),
                                    key=lambda x: (-x["jobs"], x["host"])),
            "hardware_failures": sum(classes[e] for e in HARDWARE_ENTRIES),
            "digests": digests.most_common()}


def _job_row(item: dict) -> dict:
    """What a job list shows of one job: when, who started it (the job model's first
    suspect), the first line, where its logs are."""
    s = next((s for s in item.get("suspects") or [] if isinstance(s, dict)), None)
    ev = next((e for e in item.get("evidence") or [] if isinstance(e, dict)), None)
    rank = s.get("rank") if s else None
    host = (s or {}).get("host") or (ev or {}).get("host") or ""
    suspect = " on ".join(x for x in (f"rank {rank}" if rank is not None else "", host) if x)
    return {"job": str(item["job"]), "ended": item.get("ended") or "", "suspect": suspect,
            "where": f"{ev['source']}:{ev['line']}" if ev and "source" in ev else "",
            "text": (ev or {}).get("text", "")[:240], "path": item.get("path") or "",
            "error": item.get("error") or "",
            "report": item.get("report") if isinstance(item.get("report"), str) else ""}


def list_pages(key: str, n_jobs: int) -> list[str]:
    """The file names of a job list's pages (jobs/<key>-<page>.html)."""
    pages = max(1, -(-min(n_jobs, MAX_JOBS_LISTED) // PAGE_SIZE))
    return [f"jobs/{key}-{i}.html" for i in range(1, pages + 1)]


CHART_DAYS = 30


def day_chart(agg: dict) -> dict | None:
    """Failed jobs per day over the last CHART_DAYS days with any job, as SVG geometry (the
    page draws it with presentation attributes: its CSP allows no inline style or script)."""
    days = sorted(d for d in agg["days"] if d != "unknown")[-CHART_DAYS:]
    if not days:
        return None
    totals = [sum(agg["days"][d].values()) for d in days]
    top = max(totals) or 1
    width, height, gap = 600, 120, 2
    bar = width / len(days)
    bars = []
    for i, (d, n) in enumerate(zip(days, totals)):
        h = round(height * n / top, 1)
        worst = max(agg["days"][d].items(), key=lambda kv: (kv[1], kv[0]))[0] if n else ""
        bars.append({"x": round(i * bar, 1), "y": round(height - h, 1), "w": round(max(bar - gap, 1), 1),
                     "h": h, "day": d, "n": n, "worst": worst})
    return {"width": width, "height": height, "bars": bars, "first": days[0], "last": days[-1], "top": top}


def changes(agg: dict) -> dict:
    """What changed in the latest ISO week with jobs against the one before it: classes seen
    for the first time, and classes that at least doubled (to 3 jobs or more)."""
    weeks = sorted(w for w in agg["week_jobs"] if w != "unknown")
    if not weeks:
        return {"week": None, "new": [], "rising": []}
    now = agg["weeks"].get(weeks[-1], {})
    before = agg["weeks"].get(weeks[-2], {}) if len(weeks) > 1 else {}
    earlier = set().union(*(agg["weeks"].get(w, {}).keys() for w in weeks[:-1])) if len(weeks) > 1 else set()
    new = sorted((e for e in now if e not in earlier), key=lambda e: (-now[e], e)) if len(weeks) > 1 else []
    rising = sorted((e for e in now if e in before and now[e] >= 3 and now[e] >= 2 * before[e]),
                    key=lambda e: (-now[e], e))
    return {"week": weeks[-1], "previous": weeks[-2] if len(weeks) > 1 else None,
            "new": [(e, now[e]) for e in new], "rising": [(e, before[e], now[e]) for e in rising]}


MAX_LATEST = 50


def latest_failures(agg: dict) -> list[dict]:
    """The failed jobs of the 24 hours before the newest job's end, newest first (the on-call
    engineer's first question), at most MAX_LATEST; each row with its class."""
    rows = [dict(r, entry=k) for k, listed in agg["jobs_listed"].items() if k in agg["meta"] for r in listed]
    ended = [r["ended"] for k, listed in agg["jobs_listed"].items() for r in listed if r["ended"]]
    if not rows or not ended:
        return []
    try:
        newest = datetime.strptime(max(ended)[:19], "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return []
    cutoff = (newest - timedelta(hours=24)).strftime("%Y-%m-%dT%H:%M:%S")
    recent = [r for r in rows if r["ended"][:19] >= cutoff]
    return sorted(recent, key=lambda r: (r["ended"], r["job"]), reverse=True)[:MAX_LATEST]


def _template_dir() -> Path:
    for d in (PACKAGE_DIR / "fleet", PACKAGE_DIR.parent.parent / "site_template" / "fleet"):
        if (d / "fleet.html.j2").is_file():
            return d
    raise FleetError("the fleet page's template is missing from this installation")


def _site_css(template_dir: Path) -> list[Path]:
    """The site's stylesheets: the theme's (mkdocs-material) and faildex.css."""
    try:
        import material
    except ImportError:
        raise FleetError("the fleet page uses the site's theme: pip install 'faildex[fleet]'") from None
    sheets = Path(material.__file__).parent / "templates" / "assets" / "stylesheets"
    css = sorted(sheets.glob("main.*.min.css")) + sorted(sheets.glob("palette.*.min.css"))
    own = template_dir / "faildex.css"
    if not own.is_file():
        own = PACKAGE_DIR.parent.parent / "site_template" / "static" / "assets" / "faildex" / "faildex.css"
    return css + [own]


DARK_CSS = "fleet-dark.css"
SORT_JS = "fleet-sort.js"      # the tables' sorting (the one script the pages load)


def _top_rules(css: str) -> list[str]:
    """The top-level rules of a stylesheet, each with its braces."""
    rules, depth, start = [], 0, 0
    for i, ch in enumerate(css):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                rules.append(css[start:i + 1].strip())
                start = i + 1
    return rules


def _slate_rules(css: str) -> list[str]:
    """The rules for the slate scheme (with the indigo primary, or none), rewritten for the
    page's scheme; inside an @media block, kept in it."""
    out = []
    for rule in _top_rules(css):
        head, body = rule.split("{", 1)
        head = head.strip()
        if head.startswith("@media"):
            inner = _slate_rules(body[:-1])
            if inner:
                out.append(head + "{" + "".join(inner) + "}")
            continue
        if head.startswith("@") or not all(s.strip().startswith("[data-md-color-scheme=slate]") for s in head.split(",")):
            continue
        if "data-md-color-primary=" in head and "data-md-color-primary=indigo]" not in head:
            continue
        out.append(rule.replace("[data-md-color-scheme=slate]", "[data-md-color-scheme=default]"))
    return out


def dark_css(sheets: list[Path]) -> str:
    """The site's dark scheme for a page that runs no script (the theme switches schemes with
    one): the stylesheets' rules for the slate scheme, made to apply to the page's scheme when
    the reader's system prefers dark."""
    rules = [r for sheet in sheets for r in _slate_rules(sheet.read_text(encoding="utf-8"))]
    return "@media (prefers-color-scheme: dark) {\n" + "\n".join(rules) + "\n}\n"


def render(agg: dict, out_dir: Path, site: str = SITE, sources: list[str] = ()) -> Path:
    try:
        import jinja2
    except ImportError:
        raise FleetError("the fleet page is rendered with the site's templates: "
                         "pip install 'faildex[fleet]'") from None
    template_dir = _template_dir()
    css = _site_css(template_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "assets").mkdir(exist_ok=True)
    for p in css:
        shutil.copyfile(p, out_dir / "assets" / p.name)
    (out_dir / "assets" / DARK_CSS).write_text(dark_css(css), encoding="utf-8")
    shutil.copyfile(template_dir / SORT_JS, out_dir / "assets" / SORT_JS)
    css = css + [out_dir / "assets" / DARK_CSS]
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(template_dir)),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    week_classes = [eid for eid, _ in agg["classes"]][:WEEK_COLUMNS]
    weeks = []
    for w in sorted(agg["week_jobs"], reverse=True)[:MAX_WEEKS]:
        row = agg["weeks"].get(w, {})
        cells = [row.get(eid, 0) for eid in week_classes]
        weeks.append({"week": w, "jobs": agg["week_jobs"][w], "failed": sum(row.values()),
                      "cells": cells, "other": sum(row.values()) - sum(cells)})
    # first each listed job's own page (the index and the lists link to it), then the index,
    # then one list per failure class and per outcome, paged, most recent first
    (out_dir / "jobs").mkdir(exist_ok=True)
    titles = {"clean": "Jobs with no failure", "unmatched": "Jobs with errors but no known failure",
              "error": "Jobs that could not be read"}
    template = env.get_template("jobs.html.j2")
    job_template = env.get_template("job.html.j2")
    from .render import view
    for rows in agg["jobs_listed"].values():
        for r in rows:
            # a listed job whose whole report was kept (triage --reports): a page of its own,
            # from the same view as the CLI's text report and the support ticket
            r["page"] = ""
            if not r.get("report"):
                continue
            try:
                report = json.loads(Path(r["report"]).read_text(encoding="utf-8"))
                v = view(report, site)
            except (OSError, ValueError, KeyError, TypeError):
                continue
            r["page"] = "job-" + re.sub(r"[^\w.-]", "_", r["job"])[:200] + ".html"
            (out_dir / "jobs" / r["page"]).write_text(job_template.render(
                css=[f"../assets/{p.name}" for p in css], assets="../assets", site=site, row=r, v=v), encoding="utf-8")
    html = env.get_template("fleet.html.j2").render(
        agg=agg, site=site, css=[f"assets/{p.name}" for p in css], assets="assets", weeks=weeks,
        chart=day_chart(agg), changes=changes(agg), min_culprit=MIN_CULPRIT_JOBS, max_hosts=MAX_DRAIN_SHOWN,
        latest=latest_failures(agg),
        drain=agg["drain"][:MAX_DRAIN_SHOWN], drain_more=max(0, len(agg["drain"]) - MAX_DRAIN_SHOWN),
        week_classes=week_classes, hardware=HARDWARE_ENTRIES, min_jobs=MIN_JOBS_TO_DRAIN,
        sources=[os.path.basename(s) for s in sources],
        failed=sum(c for _, c in agg["classes"]))
    page = out_dir / "index.html"
    page.write_text(html, encoding="utf-8")
    for key, rows in agg["jobs_listed"].items():
        total = dict(agg["classes"]).get(key) if key in agg["meta"] else agg["outcomes"].get(key, len(rows))
        names = list_pages(key, len(rows))
        for i, name in enumerate(names):
            (out_dir / name).write_text(template.render(
                css=[f"../assets/{p.name}" for p in css], assets="../assets", site=site, key=key,
                title=agg["meta"][key]["title"] if key in agg["meta"] else titles.get(key, key),
                meta=agg["meta"].get(key), total=total, listed=len(rows),
                rows=rows[i * PAGE_SIZE:(i + 1) * PAGE_SIZE], first=i * PAGE_SIZE + 1,
                prev=names[i - 1].split("/")[1] if i else None,
                next=names[i + 1].split("/")[1] if i + 1 < len(names) else None,
                page=i + 1, pages=len(names)), encoding="utf-8")
    return page


METRICS_DAYS = 30          # days of per-day counts in the metrics (a label value each)


def _label(value) -> str:
    """A label value in Prometheus' text format: backslash, quote and newline escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def metrics(agg: dict) -> str:
    """The counters as Prometheus text (what node_exporter's textfile collector reads): jobs
    by outcome, failures by class, by host and class, by day and class (the last
    METRICS_DAYS days seen), and the drain candidates' scores."""
    out = []

    def family(name: str, help_: str, samples) -> None:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} gauge")
        for labels, value in samples:
            body = ",".join(f'{k}="{_label(v)}"' for k, v in labels)
            out.append(f"{name}{{{body}}} {value}" if body else f"{name} {value}")

    family("faildex_jobs", "Jobs in the triage lines read, by outcome (a job triaged again counts once).",
           [((("outcome", o),), n) for o, n in sorted(agg["outcomes"].items())])
    meta = agg["meta"]
    family("faildex_failures", "Failed jobs by the failure faildex named (its entry).",
           [((("entry", e), ("category", meta[e].get("category", "")), ("severity", meta[e].get("severity", ""))), n)
            for e, n in sorted(agg["classes"])])
    family("faildex_host_failures", "Failed jobs that ran on a host, by entry.",
           [((("host", h), ("entry", e)), n) for h in sorted(agg["host_classes"])
            for e, n in sorted(agg["host_classes"][h].items())])
    recent = sorted(d for d in agg["days"] if d != "unknown")[-METRICS_DAYS:]
    family("faildex_failures_by_day", f"Failed jobs by the day they ended (UTC; the last {METRICS_DAYS} days seen), by entry.",
           [((("day", d), ("entry", e)), n) for d in recent for e, n in sorted(agg["days"][d].items())])
    family("faildex_drain_candidate_score", "Hosts in repeated hardware failures: the jobs that blame them "
                                            "(a line naming the host counts 1, else shared among the job's hosts).",
           [((("host", h["host"]),), h["score"]) for h in agg["drain"]])
    family("faildex_hosts_seen", "Hosts named by the triage lines read (0: the logs named none).",
           [((), agg["hosts_seen"])])
    return "\n".join(out) + "\n"


def write_atomically(path: Path, text: str) -> None:
    """Write beside the file and rename over it: a reader (the textfile collector) never sees half."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="faildex fleet", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("report", help="write the fleet page")
    p.add_argument("lines", nargs="+", metavar="LINES.jsonl")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="folder for index.html")
    p.add_argument("--site-url", "--site", dest="site", default=SITE,
                   help=f"where entry links point: an air-gapped cluster's own copy of the site (default {SITE})")
    p.add_argument("--json", action="store_true", help="also write fleet.json (the counters)")
    m = sub.add_parser("metrics", help="write the counters as Prometheus text (node_exporter's textfile collector)")
    m.add_argument("lines", nargs="+", metavar="LINES.jsonl")
    m.add_argument("-o", "--output", metavar="FILE.prom", help="write here, atomically (default: stdout)")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    warnings = []

    def warn(msg: str) -> None:
        warnings.append(msg)
        if len(warnings) <= 5:
            print(f"faildex fleet: {msg}", file=sys.stderr)

    try:
        agg = aggregate(args.lines, warn)
        if args.cmd == "metrics":
            text = metrics(agg)
            if args.output:
                write_atomically(Path(args.output), text)
            else:
                sys.stdout.write(text)
            return 0
        site = args.site if args.site.endswith("/") else args.site + "/"
        page = render(agg, Path(args.output), site, args.lines)
    except FleetError as err:
        print(f"faildex fleet: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"faildex fleet: {args.output}: {err.strerror or err}", file=sys.stderr)
        return 2
    if args.json:
        (Path(args.output) / "fleet.json").write_text(
            json.dumps(agg, sort_keys=True, indent=1, default=list) + "\n", encoding="utf-8")
    if len(warnings) > 5:
        print(f"faildex fleet: {len(warnings)} lines skipped in all", file=sys.stderr)
    top = ", ".join(h["host"] for h in agg["drain"][:3]) or "none"
    print(f"wrote {page}: {agg['jobs']} jobs, {sum(c for _, c in agg['classes'])} known failures, "
          f"drain candidates: {top}")
    return 0
