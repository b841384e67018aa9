"""`faildex triage`: diagnose many jobs, one JSON line per job.

    faildex triage /logs/jobs/*/ -o triage.jsonl          a folder per job
    faildex triage '/logs/slurm-*.out' --job-id 'slurm-(\\d+)' -o triage.jsonl

A job is a folder (every file under it is one of its logs; the job id is the
folder's name) or the files whose paths give the same id under --job-id. Jobs
are diagnosed by a pool of processes with a bounded number in flight, so memory
does not grow with the number of jobs. With -o the file is append-only: each
line is written and flushed as its job finishes, a rerun skips the jobs already
there, and a line cut short by a crash is dropped first, so a crash loses at most
the jobs in flight. Quote a glob to let faildex expand it (no argument-list limit).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from datetime import datetime, timezone

from . import InputError, __version__, diagnose, load_index
from .render import to_json

TRIAGE_FORMAT = 1
LOG_SUFFIXES = (".gz", ".log", ".out", ".err", ".txt")
TEXT_MAX = 300          # an evidence line in the JSON line
MAX_SUSPECTS = 8

_INDEX: dict | None = None


def _glob_chars(s: str) -> bool:
    return any(c in s for c in "*?[")


def _expand(paths: list[str]):
    for p in paths:
        if not os.path.exists(p) and _glob_chars(p):
            yield from sorted(glob.iglob(p))
        else:
            yield p


def _files_under(folder: str) -> list[str]:
    out = []
    for base, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        out += [os.path.join(base, f) for f in sorted(files) if not f.startswith(".")]
    return out


def _default_id(path: str) -> str:
    name = os.path.basename(os.path.normpath(path))
    while True:
        stem, ext = os.path.splitext(name)
        if ext.lower() not in LOG_SUFFIXES or not stem:
            return name
        name = stem


def iter_jobs(paths: list[str], job_id: re.Pattern | None, skipped: list[str]):
    """(job id, folder or None, [files]) for each job; folders lazily, loose files grouped."""
    loose: dict[str, list[str]] = {}
    for p in _expand(paths):
        if job_id is not None:
            m = job_id.search(p)
            if not m:
                skipped.append(p)
                continue
            jid = m.group("job") if "job" in job_id.groupindex else m.group(1) if job_id.groups else m.group(0)
        else:
            jid = _default_id(p)
        if os.path.isdir(p):
            yield jid, p, _files_under(p)
        elif os.path.isfile(p):
            loose.setdefault(jid, []).append(p)
        else:
            skipped.append(p)
    for jid, files in loose.items():
        yield jid, None, files


_REPORTS: str | None = None      # --reports: a folder for each job's whole report


def _init(index_path: str, reports: str | None = None) -> None:
    global _INDEX, _REPORTS
    _INDEX = load_index(index_path)
    _REPORTS = reports


def report_file(folder: str, jid: str) -> str:
    """Where --reports keeps a job's report: its id made a file name."""
    return os.path.join(folder, re.sub(r"[^\w.-]", "_", jid)[:200] + ".json")


def triage_job(jid: str, folder: str | None, files: list[str], nodes: list[str]) -> dict:
    """The JSON line of one job (runs in a worker process)."""
    index = _INDEX
    line: dict = {"faildex_triage": TRIAGE_FORMAT, "job": jid, "release": __version__,
                  "index": index.get("digest", "")}
    if folder:
        line["path"] = folder
    mtimes = []
    for f in files:
        try:
            mtimes.append(os.stat(f).st_mtime)
        except OSError:
            pass
    if mtimes:   # the logs were last written when the job ended
        line["ended"] = datetime.fromtimestamp(max(mtimes), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    if not files:
        return dict(line, error="no log files", primary=None, outcome="error",
                    suspects=[], hosts=sorted(nodes), versions={})
    try:
        report = diagnose(files, index, workers=1)
        line.update(summary(report, index, folder, nodes))
        if _REPORTS:
            # the whole report, for the fleet page's page of this job (rendered like the CLI's)
            path = report_file(_REPORTS, jid)
            with open(path + ".tmp", "w", encoding="utf-8") as fh:
                fh.write(to_json(report))
            os.replace(path + ".tmp", path)
            line["report"] = os.path.abspath(path)
        return line
    except InputError as err:
        message = str(err)
    except Exception as err:    # one job's surprise must not stop the other thousands
        message = f"internal error: {type(err).__name__}: {err}"
    return dict(line, error=message, primary=None, outcome="error",
                suspects=[], hosts=sorted(nodes), versions={})


def summary(report: dict, index: dict, folder: str | None, nodes: list[str]) -> dict:
    """What a fleet needs of a report: the failure, where it was seen, on which hosts."""
    def rel(source: str) -> str:
        return os.path.relpath(source, folder) if folder else source

    p = report["primary"]
    primary = None
    if p:
        primary = {"id": p["id"], "title": p["title"], "confidence": p["confidence"],
                   "category": index["entries"][p["id"]]["category"], "severity": p["severity"],
                   "url": p["url"]}
    evidence = []
    for e in report["evidence"]:
        if e["role"] != "initiating":
            continue
        item = {"entry": e["entry"], "source": rel(e["source"]), "line": e["line"],
                "text": e["text"][:TEXT_MAX]}
        if "host" in e:
            item["host"] = e["host"]
        evidence.append(item)
    facts = report["facts"]
    versions = {k[:-len("_version")]: v for k, v in sorted(facts.items()) if k.endswith("_version")}
    suspects = report.get("suspects") or []
    return {
        "primary": primary,
        "outcome": "known" if p else ("unmatched" if report.get("unmatched") else "clean"),
        "alternatives": [a["id"] for a in report["alternatives"][:3]],
        "suspects": suspects[:MAX_SUSPECTS] if isinstance(suspects, list) else [],
        "hosts": sorted(set(facts.get("hosts", [])) | set(nodes)),
        "versions": versions,
        "evidence": evidence,
        "files": len(report["inputs"]),
        "bytes": sum(i["bytes"] for i in report["inputs"]),
    }


def done_jobs(path: str) -> set[str]:
    """Job ids already in an output file; a last line without its newline (a crash
    while writing it) is cut off so that the file stays one JSON object per line."""
    done: set[str] = set()
    if not os.path.exists(path):
        return done
    with open(path, "r+b") as fh:
        good = 0
        for raw in fh:
            if not raw.endswith(b"\n"):
                break
            try:
                item = json.loads(raw)
            except ValueError:
                break
            good += len(raw)
            if isinstance(item, dict) and "job" in item and "error" not in item:
                done.add(str(item["job"]))
        fh.seek(0, os.SEEK_END)
        if fh.tell() != good:
            fh.truncate(good)
    return done


def main(argv: list[str], index_path: str | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="faildex triage", description=__doc__.split("\n\n")[0].split("\n", 1)[0],
        epilog="Exit codes: 0 every job has its line; 1 some jobs could not be read "
               "(their lines carry an error and are retried on the next run); 2 bad usage.")
    ap.add_argument("paths", nargs="+", metavar="PATH",
                    help="a folder per job, log files, or a quoted glob of either")
    ap.add_argument("-o", "--output", help="append JSON lines here (default: stdout); "
                                           "jobs already in it are skipped")
    ap.add_argument("--job-id", metavar="REGEX",
                    help="the job id in each path: the group named job, else group 1, "
                         "else the match (default: the folder or file name)")
    ap.add_argument("--job", metavar="ID",
                    help="all PATHs are the logs of one job with this id (a Slurm epilog)")
    ap.add_argument("--nodes", default="", metavar="H1,H2",
                    help="hosts the scheduler ran the job on (one job only), added to hosts")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, metavar="N",
                    help="processes (default: one per core)")
    ap.add_argument("--reports", metavar="DIR",
                    help="also keep each job's whole report here (JSON); `faildex fleet report` "
                         "then gives each listed job a page of its own")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    try:
        rx = re.compile(args.job_id) if args.job_id else None
    except re.error as err:
        print(f"faildex triage: --job-id: not a regular expression: {err}", file=sys.stderr)
        return 2
    if index_path is None:
        from .indexfile import index_path as default_index
        try:
            index_path = default_index()
        except ValueError as err:
            print(f"faildex triage: cannot read the index: {err}", file=sys.stderr)
            return 2
    try:
        load_index(index_path)
    except (OSError, ValueError) as err:
        print(f"faildex triage: cannot read the index: {err}", file=sys.stderr)
        return 2
    nodes = [n for n in args.nodes.split(",") if n.strip()]
    if args.reports:
        try:
            os.makedirs(args.reports, exist_ok=True)
        except OSError as err:
            print(f"faildex triage: --reports {args.reports}: {err.strerror or err}", file=sys.stderr)
            return 2
    if args.output:
        try:
            done = done_jobs(args.output)
            out = open(args.output, "a", encoding="utf-8")
        except OSError as err:
            print(f"faildex triage: {args.output}: {err.strerror or err}", file=sys.stderr)
            return 2
    else:
        done, out = set(), sys.stdout
    skipped: list[str] = []
    if args.job:
        files = [f for p in _expand(args.paths)
                 for f in (_files_under(p) if os.path.isdir(p) else [p] if os.path.isfile(p) else [])]
        folder = args.paths[0] if len(args.paths) == 1 and os.path.isdir(args.paths[0]) else None
        jobs = iter([(args.job, folder, files)])
    else:
        jobs = iter_jobs(args.paths, rx, skipped)
    counts = {"written": 0, "skipped": 0, "errors": 0}
    workers = max(1, args.jobs)

    def write(line: dict) -> None:
        out.write(json.dumps(line, sort_keys=True, ensure_ascii=False) + "\n")
        out.flush()
        counts["written"] += 1
        counts["errors"] += "error" in line

    try:
        if workers == 1:
            _init(index_path, args.reports)
            for jid, folder, files in jobs:
                if jid in done:
                    counts["skipped"] += 1
                    continue
                done.add(jid)
                write(triage_job(jid, folder, files, nodes))
        else:
            with ProcessPoolExecutor(workers, initializer=_init, initargs=(index_path, args.reports)) as pool:
                pending = set()
                for jid, folder, files in jobs:
                    if jid in done:
                        counts["skipped"] += 1
                        continue
                    done.add(jid)
                    pending.add(pool.submit(triage_job, jid, folder, files, nodes))
                    if len(pending) >= 2 * workers:     # bounded: never the whole job list
                        finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                        for f in finished:
                            write(f.result())
                for f in pending:
                    write(f.result())
    except KeyboardInterrupt:
        print("\nfaildex triage: interrupted; rerun to continue", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    finally:
        if out is not sys.stdout:
            out.close()
    for p in skipped[:5]:
        print(f"faildex triage: {p}: " + ("no job id (--job-id)" if rx and os.path.exists(p)
                                          else "no such file or folder"), file=sys.stderr)
    if len(skipped) > 5:
        print(f"faildex triage: ... and {len(skipped) - 5} more paths skipped", file=sys.stderr)
    print(f"faildex triage: {counts['written']} job(s) written, {counts['skipped']} already done"
          + (f", {counts['errors']} unreadable" if counts["errors"] else ""), file=sys.stderr)
    return 1 if counts["errors"] else 0
