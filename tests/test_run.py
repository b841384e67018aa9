"""`faildex run -- CMD`: the command's output passes through byte for byte, its exit status
is returned, signals reach it, and only a failure gets faildex's verdict at the end.

The jobs replay real output: a multi-rank torchrun job of the dev corpus (PyTorch 2.13,
made by tests/corpus/ranks/dev/make_runs.py) written to the pipes the way the job wrote
it, and a healthy run's log. (A live torchrun job needs torch, which the project does not
install; the note of issue 30 shows one run by hand.)"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAILED = ROOT / "tests" / "corpus" / "ranks" / "dev" / "r01-console-indexerror-w6" / "console.log"
HEALTHY = ROOT / "tests" / "corpus" / "ranks" / "dev" / "r32-console-healthy-w2" / "console.log"

# writes a file's lines in order, as a torchrun job does: the ranks' progress prints ("step N
# ... loss") to stdout, everything else (tracebacks, the launcher's records and report) to
# stderr, each line in two writes (cut in the middle), then exits with a status
REPLAY = r"""
import os, re, sys
for line in open(sys.argv[1], "rb").read().splitlines(True):
    fd = 1 if re.search(rb"step \d+.*loss", line) else 2
    half = len(line) // 2
    os.write(fd, line[:half]); os.write(fd, line[half:])
sys.exit(int(sys.argv[2]))
"""


def split(path):
    """The bytes REPLAY writes to stdout and to stderr."""
    import re
    out, err = [], []
    for line in path.read_bytes().splitlines(True):
        (out if re.search(rb"step \d+.*loss", line) else err).append(line)
    return b"".join(out), b"".join(err)


def faildex_run(*args, **kw):
    return subprocess.run([sys.executable, "-m", "faildex", "run", *args], capture_output=True, cwd=ROOT,
                          timeout=300, **kw)


def test_a_failed_job_passes_through_and_ends_with_the_verdict(tmp_path):
    triage = tmp_path / "triage.jsonl"
    r = faildex_run("--triage", str(triage), "--job", "j-1", "--", sys.executable, "-c", REPLAY, str(FAILED), "3")
    out, err = split(FAILED)
    assert r.returncode == 3 and out and err
    assert r.stdout == out                                    # every byte, in order, nothing added
    assert r.stderr.startswith(err)                           # the job's stderr first, untouched
    added = r.stderr[len(err):].decode()
    assert added.startswith("faildex: ") and "exit status 3" in added
    assert "Rank 2 failed first (IndexError: list index out of range)" in added
    line = json.loads(triage.read_text())
    assert line["job"] == "j-1" and line["exit_status"] == 3 and line["suspects"][0]["rank"] == 2


def test_a_healthy_job_gets_nothing_added():
    r = faildex_run("--", sys.executable, "-c", REPLAY, str(HEALTHY), "0")
    out, err = split(HEALTHY)
    assert r.returncode == 0 and (r.stdout, r.stderr) == (out, err)


def test_the_commands_flags_are_its_own_and_a_missing_command_is_one_line():
    # --help and --index after "--" belong to the command
    r = faildex_run("--", sys.executable, "-c", "import sys; print(sys.argv[1:]); sys.exit(0)", "--help", "--index", "x")
    assert r.returncode == 0 and r.stdout.decode().strip() == "['--help', '--index', 'x']"
    r = faildex_run("--", "no-such-command-faildex")
    assert r.returncode == 127 and r.stderr.decode().count("\n") == 1 and "no-such-command-faildex" in r.stderr.decode()


def test_a_stopping_signal_reaches_the_job_once_and_its_status_is_returned(tmp_path):
    job = (
        "import signal, sys, time\n"
        "got = []\n"
        "signal.signal(signal.SIGTERM, lambda s, f: got.append(s))\n"
        "print('ready', flush=True)\n"
        "while not got: time.sleep(0.05)\n"
        "time.sleep(0.3)\n"
        "print(f'terms {len(got)}', flush=True)\n"
        "sys.exit(143)\n")
    p = subprocess.Popen([sys.executable, "-m", "faildex", "run", "--", sys.executable, "-c", job],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert p.stdout.readline() == b"ready\n"
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 143 and out == b"terms 1\n"
    assert b"faildex: " in err and b"exit status 143" in err
