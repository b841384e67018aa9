"""The queries "paste an error, get the entry" must answer (tests/test_browser.py, bench/search.py).

From the entries, never written to fit the search:
- line: each defining signature's line as the software printed it, taken from the
  entry's examples (the first line it matches that is not indented);
- prefixed: the same line behind what launchers and loggers put in front of it;
- half: the same line cut at its middle word boundary, keeping the half that holds
  more of the message: the text the signature spells out (its literal runs), not the
  values it captures (a pod name, a path), which no reader would search for, nor what
  the line starts with before its message (a program and level, "srun: error: ", or an
  exception's type). A line whose message is under CUT_FROM characters is not cut: no
  terminal or log viewer cuts a line that short, and its half is a word or two that
  many messages share ("Unsupported").
Plus SHORT: what people type, with the entries that answer it.
"""
from __future__ import annotations

import re

from generator.regexes import literal_runs
from generator.text import log_lines
from generator.validate import example_text

CUT_FROM = 40   # characters of message (after _LEAD): a shorter line is a query whole only
PREFIXES = ["[rank3]:", "2026-12-02 17:16:50,123 ERROR ", "[default0]:[rank0]: ",
            "torch.distributed.elastic.multiprocessing.api: "]

# (what people type, the entries that answer it: the first is the one wanted first,
# any of them counts as right)
SHORT: list[tuple[str, tuple[str, ...]]] = [
    ("Socket Timeout", ("tcpstore-wait-timeout", "tcpstore-connection-timed-out", "master-addr-unreachable")),
    ("exitcode -9", ("worker-sigkill-host-oom",)),
    ("exitcode: -9", ("worker-sigkill-host-oom",)),
    ("DistStoreError", ("store-barrier-timeout", "tcpstore-wait-timeout")),
    ("NCCL timeout", ("nccl-watchdog-timeout",)),
    ("CUDA OOM", ("cuda-out-of-memory",)),
    ("CUDA out of memory", ("cuda-out-of-memory",)),
    ("ChildFailedError", ("elastic-child-failed",)),
    ("RendezvousTimeoutError", ("torchrun-rendezvous-timeout",)),
    ("address already in use", ("master-port-in-use",)),
    ("EADDRINUSE", ("master-port-in-use",)),
    ("device-side assert triggered", ("cuda-device-side-assert",)),
    ("illegal memory access", ("cuda-illegal-memory-access",)),
    ("no kernel image is available", ("cuda-no-kernel-image",)),
    ("Bus error shared memory", ("dataloader-shm-bus-error",)),
    ("Too many open files", ("too-many-open-files",)),
    ("No space left on device", ("disk-full",)),
    ("Stale file handle", ("stale-file-handle",)),
    ("weights_only", ("torch-load-weights-only",)),
    ("Unsupported global", ("torch-load-weights-only",)),
    ("Missing key(s) in state_dict", ("state-dict-key-mismatch",)),
    ("size mismatch for", ("state-dict-size-mismatch",)),
    ("central directory", ("checkpoint-corrupt",)),
    ("HeaderTooLarge", ("safetensors-header-error",)),
    ("find_unused_parameters", ("ddp-unused-parameters",)),
    ("Xid 79", ("gpu-fell-off-bus",)),
    ("fallen off the bus", ("gpu-fell-off-bus",)),
    ("ECC error", ("gpu-ecc-error",)),
    ("NCCL_SOCKET_IFNAME", ("nccl-wrong-interface", "nccl-docker-interface")),
    ("Connection closed by remote peer", ("nccl-connection-closed-by-peer",)),
    ("ncclRemoteError", ("nccl-remote-error",)),
    ("unhandled system error", ("nccl-unhandled-system-error",)),
    ("Broken pipe", ("tcpstore-broken-pipe",)),
    ("OOMKilled", ("k8s-pod-oomkilled",)),
    ("Insufficient nvidia.com/gpu", ("k8s-unschedulable-gpu",)),
    ("DUE TO TIME LIMIT", ("slurm-time-limit",)),
    ("oom_kill events", ("slurm-oom-kill",)),
    ("SIGTERM", ("worker-sigterm-preemption",)),
    ("segmentation fault", ("worker-sigsegv",)),
    ("loss is nan", ("loss-spike-divergence", "loss-nan-fp16-overflow", "anomaly-nan-backward")),
    ("Gradient overflow. Skipping step", ("loss-nan-fp16-overflow",)),
    ("backward through the graph a second time", ("backward-twice",)),
    ("modified by an inplace operation", ("inplace-autograd-error",)),
    ("Expected all tensors to be on the same device", ("device-mismatch",)),
    ("undefined symbol", ("undefined-symbol-extension", "nccl-library-mismatch")),
    ("driver is too old", ("cuda-driver-too-old",)),
    ("KV cache", ("vllm-kv-cache-insufficient",)),
    ("EngineDeadError", ("vllm-engine-dead",)),
    ("huggingface offline", ("hf-model-not-found-offline",)),
    ("TCP client failed to connect", ("master-addr-unreachable", "rendezvous-host-unresolved")),
]


def signature_lines(entry) -> list[tuple[str, str, str]]:
    """(signature id, the line it matches as printed, the regex) per defining
    signature of the entry."""
    lines = [ln.rstrip() for ex in entry.data["examples"]
             for ln in log_lines(example_text(entry, ex) or "")]
    out = []
    for sig in entry.data["signatures"]:
        if sig["strength"] != "defining":
            continue
        rx = re.compile(sig["regex"])
        hits = [ln for ln in lines if rx.search(ln)]
        if not hits:
            continue
        ln = next((ln for ln in hits if not ln[:1].isspace()), hits[0])
        out.append((sig["id"], ln.strip(), sig["regex"]))
    return out


_LEAD = re.compile(r"(?:[\w.-]{1,40}: )?(?:(?:error|fatal|ERROR|FATAL): |[A-Za-z_.]*(?:Error|Exception|Warning): )")


def message_start(line: str) -> int:
    """Where a line's message starts, after its program and level or its exception's type."""
    lead = _LEAD.match(line)
    return lead.end() if lead else 0


def half(line: str, pattern: str) -> str:
    """The line cut at its middle word boundary; the half holding more of the message.

    The message is what the signature spells out: the characters of its match that
    belong to one of its literal runs ("ImagePullBackOff", "Back-off pulling image"),
    not the values its wildcards took (a 37-character pod name outweighs the status in
    a `kubectl get pods` row, yet a reader with only the name and "0/1" has no error to
    search for). On a tie, the half with more of the match."""
    mid = len(line) // 2
    cut = line.rfind(" ", 0, mid + 1)
    cut = cut if cut > 0 else mid
    first, second = line[:cut].rstrip(), line[cut:].strip()
    m = re.search(pattern, line)
    if not m:
        return first
    start, end = m.span()
    spelled = [False] * len(line)
    for run in literal_runs(pattern):
        if len(run) < 2:
            continue
        for hit in re.finditer(re.escape(run), line[start:end]):
            for i in range(start + hit.start(), start + hit.end()):
                spelled[i] = True
    # what a line starts with before its message is no message either: the program and level
    # ("slurmstepd: error: ") or the exception's type ("NotImplementedError: ")
    for i in range(message_start(line)):
        spelled[i] = False
    in_first, in_second = sum(spelled[:cut]), sum(spelled[cut:])
    if in_first == in_second:
        in_first = max(0, min(end, cut) - start)
        in_second = max(0, end - max(start, cut))
    return first if in_first >= in_second else second


def queries(entries) -> list[tuple[str, str, tuple[str, ...]]]:
    """(kind, query, entries that answer it) for every query of the test."""
    out = []
    n = 0
    # a half line can lose the words that made it this entry's ("NET/IB : Got completion
    # from peer" without "status=12 ... localGid"): when none of the entry's own signatures
    # matches the half any more, an entry whose defining or supporting signature does
    # answers it too
    matchers = [(e.id, re.compile(s["regex"])) for e in entries for s in e.data["signatures"]
                if s["strength"] in ("defining", "supporting")]
    for e in sorted(entries, key=lambda e: e.id):
        for sig_id, line, pattern in signature_lines(e):
            out.append(("line", line, (e.id,)))
            out.append(("prefixed", PREFIXES[n % len(PREFIXES)] + line, (e.id,)))
            if len(line) - message_start(line) >= CUT_FROM:
                part = half(line, pattern)
                lost = not any(rx.search(part) for eid, rx in matchers if eid == e.id)
                also = sorted({eid for eid, rx in matchers if lost and eid != e.id and rx.search(part)})
                out.append(("half", part, (e.id, *also)))
            n += 1
    out += [("short", q, want) for q, want in SHORT]
    return out
