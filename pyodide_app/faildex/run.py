"""`faildex run -- COMMAND...`: run a job, pass its output through untouched, and when it
fails, say why at the end of its own log.

    faildex run -- torchrun --nproc-per-node 8 train.py
    srun faildex run --triage /shared/triage.jsonl -- python train.py

The command's stdout and stderr go to faildex's stdout and stderr as they arrive, byte
for byte (each chunk written and flushed as soon as it is read). Their complete lines are
also fed, in arrival order, to one diagnosis. Signals that stop a job (TERM, INT, HUP,
USR1, USR2, QUIT) are forwarded to the command's process group, which faildex starts on
its own so that each arrives exactly once (a terminal's Ctrl-C reaches faildex, which
passes it on). When the command exits non-zero (or is killed), faildex prints the
verdict and the next step on stderr, after everything the command printed, and with
--triage appends the job's triage line (the same JSON as `faildex triage`). The exit
status is the command's (128 + N when it was killed by signal N). On success nothing
is added.
"""
from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import subprocess
import sys
import time

from . import Diagnosis, __version__, load_index

FORWARDED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGQUIT")
READ = 1 << 16
INPUT = "job output"      # the name the merged output has in the report


def main(argv: list[str], index_path: str | None = None) -> int:
    ap = argparse.ArgumentParser(prog="faildex run", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--triage", metavar="FILE", help="append the job's triage line (JSON) here when it fails")
    ap.add_argument("--job", metavar="ID", help="the job id in the triage line (default: $SLURM_JOB_ID, "
                                                "else the command's first word and the start time)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- the command and its arguments")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("no command: faildex run [--triage FILE] -- COMMAND [ARG...]")
    index = load_index(index_path)
    diagnosis = Diagnosis(index)
    started = time.time()
    try:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, process_group=0)
    except OSError as err:
        print(f"faildex run: cannot start {command[0]!r}: {err.strerror or err}", file=sys.stderr)
        return 127 if isinstance(err, FileNotFoundError) else 126
    previous = _forward_signals(proc)
    try:
        _pump(proc, diagnosis)
        rc = proc.wait()
    finally:
        for name, handler in previous.items():
            signal.signal(getattr(signal, name), handler)
    status = 128 - rc if rc < 0 else rc
    if status == 0:
        return 0
    diagnosis.close(INPUT)
    report = diagnosis.report()
    sys.stderr.write(verdict_lines(report, command, rc))
    sys.stderr.flush()
    if args.triage:
        from .triage import TRIAGE_FORMAT, summary
        job = args.job or os.environ.get("SLURM_JOB_ID") or f"{os.path.basename(command[0])}-{int(started)}"
        line = {"faildex_triage": TRIAGE_FORMAT, "job": job, "release": __version__,
                "index": index.get("digest", ""), "exit_status": status,
                "ended": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                **summary(report, index, None, [])}
        with open(args.triage, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(line, sort_keys=True) + "\n")
    return status


def _forward_signals(proc: subprocess.Popen) -> dict:
    """Pass each stopping signal on to the command's process group, once."""
    previous = {}

    def forward(signum, frame):
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            pass
    for name in FORWARDED:
        sig = getattr(signal, name, None)
        if sig is not None:
            previous[name] = signal.signal(sig, forward)
    return previous


def _pump(proc: subprocess.Popen, diagnosis: Diagnosis) -> None:
    """Copy both pipes through as they arrive; feed their complete lines to the diagnosis."""
    sel = selectors.DefaultSelector()
    outs = {proc.stdout.fileno(): sys.stdout.buffer, proc.stderr.fileno(): sys.stderr.buffer}
    partial = {fd: b"" for fd in outs}
    for fd in outs:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    while sel.get_map():
        for key, _ in sel.select():
            fd = key.fd
            try:
                chunk = os.read(fd, READ)
            except (BlockingIOError, InterruptedError):
                continue
            if not chunk:
                sel.unregister(fd)
                if partial[fd]:
                    diagnosis.feed(INPUT, partial[fd] + b"\n")
                    partial[fd] = b""
                continue
            out = outs[fd]
            out.write(chunk)
            out.flush()
            data = partial[fd] + chunk
            cut = data.rfind(b"\n") + 1
            if cut:
                diagnosis.feed(INPUT, data[:cut])
            partial[fd] = data[cut:]
    sel.close()


def verdict_lines(report: dict, command: list[str], rc: int) -> str:
    """What faildex adds at the end of a failed job's log: the verdict and the next step."""
    how = f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}"
    lines = [f"faildex: {os.path.basename(command[0])} failed ({how})."]
    p = report.get("primary")
    if report.get("verdict"):
        lines.append(f"faildex: {report['verdict']}")
    if p:
        lines.append(f"faildex: {p['title']} [{p['id']}], {p.get('band', '')} ({p['confidence']:.2f}): {p['url']}")
    na = report.get("next_action") or {}
    if na.get("do"):
        lines.append(f"faildex: next: {na['do']}" + (f"  $ {na['command'].splitlines()[0]}" if na.get("command") else ""))
    if not p and not report.get("verdict"):
        lines.append("faildex: no known failure in the output; `faildex diagnose` on the full logs may say more.")
    return "\n".join(lines) + "\n"
