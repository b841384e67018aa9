"""`faildex diagnose`: the engine from a terminal.

Exit codes: 0 the logs were read and a report printed (whatever it found);
2 bad usage or an input that cannot be read, with one line on stderr.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from . import InputError, diagnose, load_index
from .render import to_json, to_markdown, to_text

PROGRESS_OVER = 50 << 20


class _Progress:
    def __init__(self, total: int):
        self.total = max(total, 1)
        self.start = time.monotonic()
        self.last = 0.0

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        if now - self.last < 0.2:
            return
        self.last = now
        rate = done / max(now - self.start, 1e-6)
        frac = min(done / self.total, 1.0)
        bar = "#" * int(frac * 30)
        left = (self.total - done) / rate if rate and done < self.total else 0
        sys.stderr.write(f"\r[{bar:<30}] {done / 1e6:8.0f} MB {rate / 1e6:6.0f} MB/s ~{left:4.0f}s left")
        sys.stderr.flush()

    def done(self) -> None:
        sys.stderr.write("\r" + " " * 75 + "\r")
        sys.stderr.flush()


def _expand(paths: list[str]) -> list[str]:
    """A folder stands for the files under it (logs, flight-recorder and stack dumps), sorted;
    hidden files are skipped."""
    out = []
    for p in paths:
        if p != "-" and os.path.isdir(p):
            found = []
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(x for x in dirs if not x.startswith("."))
                found += [os.path.join(root, f) for f in sorted(files) if not f.startswith(".")]
            out += found or [p]      # an empty folder is reported below
        else:
            out.append(p)
    return out


def main(argv: list[str], index_path=None) -> int:
    ap = argparse.ArgumentParser(
        prog="faildex diagnose",
        description="Name the failure that started it all. Give one log per rank or node; "
                    "'-' reads stdin; .gz is read transparently. PyTorch flight-recorder dumps "
                    "(pickle or JSON) and py-spy/faulthandler stack dumps, one per rank, named with "
                    "the rank at the end (nccl_trace_rank_3), name the rank that hung; so does an "
                    "NCCL RAS status saved with `ncclras -f json`. A folder "
                    "stands for every file under it.",
        epilog="Exit codes: 0 report printed (whatever it found); 2 bad usage or unreadable input.")
    ap.add_argument("files", nargs="+", metavar="FILE")
    ap.add_argument("--format", choices=["text", "json", "markdown"], default="text")
    ap.add_argument("--baseline", action="append", metavar="GOOD_LOG", default=[],
                    help="a log of a good run: what is new in the failing run is listed first")
    ap.add_argument("--redact", action="store_true",
                    help="markdown: replace hosts, IPs, user names, e-mails and tokens")
    ap.add_argument("--index", help="index JSON (default: FAILDEX_INDEX, else the checkout's "
                                    "entries, else the index bundled with this release)")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 8), metavar="N",
                    help="processes for large files (default: one per core)")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return 2 if e.code else 0
    try:
        if not (args.index or index_path):
            from .indexfile import index_path as default_index
            index_path = default_index()
        index = load_index(args.index or index_path)
    except (OSError, ValueError) as err:
        print(f"faildex diagnose: cannot read the index: {err}", file=sys.stderr)
        return 2
    args.files = _expand(args.files)
    total = 0
    for f in args.files + args.baseline:
        if f == "-":
            continue
        if not os.path.exists(f):
            print(f"faildex diagnose: {f}: no such file", file=sys.stderr)
            return 2
        if os.path.isdir(f):
            print(f"faildex diagnose: {f}: is a directory with no files in it",
                  file=sys.stderr)
            return 2
        if not os.access(f, os.R_OK):
            print(f"faildex diagnose: {f}: permission denied", file=sys.stderr)
            return 2
        total += os.path.getsize(f)
    progress = None
    if total > PROGRESS_OVER and sys.stderr.isatty() and not args.no_progress:
        progress = _Progress(total)
    try:
        report = diagnose(args.files, index, baseline=args.baseline or None, progress=progress,
                          workers=max(1, args.jobs))
    except InputError as err:
        print(f"faildex diagnose: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nfaildex diagnose: interrupted", file=sys.stderr)
        return 130
    finally:
        if progress:
            progress.done()
    if args.format == "json":
        out = to_json(report)
    elif args.format == "markdown":
        out = to_markdown(report, redact_it=args.redact)
    else:
        out = to_text(report, color=sys.stdout.isatty() and not os.environ.get("NO_COLOR"))
    try:
        sys.stdout.write(out)
        sys.stdout.flush()
    except BrokenPipeError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
