"""`faildex fleet report`: the fleet page from the JSON lines of `faildex triage`.

    faildex fleet report triage.jsonl more/*.jsonl -o fleet/    ->  fleet/index.html

One static page with the site's look (the site's Jinja2 template and CSS, the
mkdocs-material theme's stylesheet): failures by class and by week, and the hosts
that keep appearing in hardware failures, ranked as drain candidates with the
lines that say so, each linked to its entry. No server and no script.

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
from collections import Counter, defaultdict
from datetime import datetime
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
MAX_EVIDENCE = 3
MAX_DRAIN_SHOWN = 25       # the page lists the top ones; fleet.json (--json) has all
MAX_WEEKS = 12
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
    week_jobs: Counter = Counter()
    outcomes: Counter = Counter()
    host_jobs: Counter = Counter()
    hw: dict[str, dict] = {}
    digests: Counter = Counter()
    for n, lineno, item in _lines(paths, warn):
        if last.get(str(item["job"])) != (n << 32) | lineno:
            continue
        outcomes[item.get("outcome", "known" if item.get("primary") else "clean")] += 1
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
            "hardware_failures": sum(classes[e] for e in HARDWARE_ENTRIES),
            "digests": digests.most_common()}


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
    html = env.get_template("fleet.html.j2").render(
        agg=agg, site=site, css=[f"assets/{p.name}" for p in css], weeks=weeks,
        drain=agg["drain"][:MAX_DRAIN_SHOWN], drain_more=max(0, len(agg["drain"]) - MAX_DRAIN_SHOWN),
        week_classes=week_classes, hardware=HARDWARE_ENTRIES, min_jobs=MIN_JOBS_TO_DRAIN,
        sources=[os.path.basename(s) for s in sources],
        failed=sum(c for _, c in agg["classes"]))
    page = out_dir / "index.html"
    page.write_text(html, encoding="utf-8")
    return page


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="faildex fleet", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("report", help="write the fleet page")
    p.add_argument("lines", nargs="+", metavar="LINES.jsonl")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="folder for index.html")
    p.add_argument("--site", default=SITE, help=f"where entry links point (default {SITE})")
    p.add_argument("--json", action="store_true", help="also write fleet.json (the counters)")
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
