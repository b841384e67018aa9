"""The message catalogue: catalog/<project>.yaml, one file per upstream project.

Each file lists every error- and warning-level message template the in-scope code
of that project prints (mined from source by catalog/mine.py), where it is printed,
the releases that print it in that form, and what it means for faildex, exactly one of:

  entry: <id>            the failure this message names or confirms
  collateral: [<id>, …]  printed as a consequence of those failures
  benign: <why>          printed by healthy jobs
  uncovered: true        nobody has mapped it yet (the contributors' to-do list)

A template is the message with every runtime value written as a `{name}` field.
`printed()` renders it the way the software prints it (the exception line, the NCCL
WARN line, the glog line) with values filled in; the validator, the coverage bench
and the rendered-and-cut test all read templates through this module.
"""
from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from ruamel.yaml import YAML

from .loader import replace_cached

ROOT = Path(__file__).resolve().parent.parent
CATALOG_DIR = ROOT / "catalog"
FIELD = re.compile(r"\{([^{}]*)\}")
MAPPINGS = ("entry", "collateral", "benign", "uncovered")


def template_key(message: str) -> str:
    """Templates that differ only in their field names are one template."""
    return FIELD.sub("{}", message)


@dataclass
class Template:
    project: str
    message: str
    level: str
    style: str
    where: str
    releases: str                      # "first .. last" or one release
    raises: str | None = None          # the exception or warning class, when there is one
    entry: str | None = None
    collateral: list[str] | None = None
    benign: str | None = None
    uncovered: str | bool | None = None   # True, or the failure class it would need
    note: str | None = None
    sites: int = 1
    line: int = 0                      # of the item in its catalog file (for messages)
    key_words: str | None = None       # the words that make it this message (default: its longest literal run)

    @classmethod
    def mined(cls, project: str, release: str, **found) -> "Template":
        return cls(project=project, releases=release, **found)

    @property
    def mapping(self) -> str:
        if self.entry:
            return "entry"
        if self.collateral:
            return "collateral"
        if self.benign:
            return "benign"
        return "uncovered"

    @property
    def ids(self) -> list[str]:
        """The entries this template is tied to (its own, or those it is collateral of)."""
        return [self.entry] if self.entry else list(self.collateral or [])

    def to_yaml(self) -> dict:
        out = {"message": self.message, "level": self.level, "style": self.style, "where": self.where}
        if self.sites > 1:
            out["sites"] = self.sites
        if self.raises:
            out["raises"] = self.raises
        out["releases"] = self.releases
        if self.entry:
            out["entry"] = self.entry
        elif self.collateral:
            out["collateral"] = list(self.collateral)
        elif self.benign:
            out["benign"] = self.benign
        else:
            out["uncovered"] = self.uncovered or True
        if self.key_words:
            out["key_words"] = self.key_words
        if self.note:
            out["note"] = self.note
        return out

    @property
    def distinguishing(self) -> str:
        """The literal words that make a line this message: key_words when the catalogue
        sets them, else the template's longest run of literal text."""
        if self.key_words:
            return self.key_words
        runs = [r.strip() for r in FIELD.split(self.message)[::2]]
        return max(runs, key=lambda r: len(r.split())) if runs else ""

    # ------------------------------------------------------------ rendering

    def filled(self, rng: random.Random | None = None) -> str:
        """The message with each field filled: a typical value, or a random one of its kind."""
        return FIELD.sub(lambda m: fill(m.group(1), rng, self.project), self.message)

    def printed(self, rng: random.Random | None = None) -> str:
        """The line as the software prints it."""
        return printed_line(self.style, self.filled(rng), self.where, self.raises)


# A field's kind comes from its name (the variable or the printf conversion).
_KINDS = [
    ("hex", re.compile(r"^(hex|ptr|pointer|addr(ess)?|handle)$|_ptr$", re.I)),
    ("host", re.compile(r"host|hostname|master_addr|endpoint|ifname|iface|interface|peer|node_?name|^node$", re.I)),
    # a point in time as Slurm and loggers print it; a job or step as Slurm names it
    ("time", re.compile(r"time_str|timestamp|^time$|^date$", re.I)),
    ("job", re.compile(r"^entity$|^job_?id_?str$|^step_?id_?str$", re.I)),
    # Slurm's %ps (a step id) and srun's "task 3" / "tasks 0-7" (src/srun/launch.c)
    ("step_id", re.compile(r"^step_id$")),
    ("task_word", re.compile(r"^task_str$")),
    ("tasks", re.compile(r"^tasks$")),
    ("path", re.compile(r"path|file|dir|fname|folder|checkpoint_id|ckpt", re.I)),
    ("float", re.compile(r"^(float|ratio|fraction|pct|percent)$", re.I)),
    # a tensor's shape as torch prints it (accelerate's set_module_tensor_to_device names it `shape`)
    ("shape", re.compile(r"shape", re.I)),
    # a rank is a number below a job's size (no job has a million ranks)
    ("rank", re.compile(r"rank|^first$", re.I)),
    ("int", re.compile(r"^(int|char|ret|rc|res|err|status|[ijknp])$|size|count|num|timeout|port|_ms$|^ms$|sec|second|_id$|^id$|idx|index|"
                       r"len|dev|device|world|step|seq|attempt|retr|pid|errno|code|bytes|nbytes|elem|offset|"
                       r"limit|max|min|total|version|nnodes|nproc|group|op$|tag", re.I)),
]
_TYPICAL = {"rank": "3", "int": "3", "hex": "0x7f3a2c000000", "host": "gpu-node-17", "path": "/scratch/u1/run/ckpt.pt",
            "float": "0.75", "time": "2026-12-05T01:02:03", "job": "JOB 4242", "step_id": "StepId=4242.0",
            "task_word": "task", "tasks": "3", "sockaddr": "10.0.3.4<43210>", "shape": "torch.Size([4096, 1024])",
            "str": "value"}
_RANDOM = {
    "rank": ["0", "1", "7", "511", "131071"],
    "int": ["0", "1", "7", "29500", "600000", "18446744073709551615"],
    "hex": ["0x0", "0x7f3a2c000000", "0xdeadbeef"],
    "host": ["gpu-node-17", "10.0.3.4", "node-a-12.cluster.internal", "[::1]", "ip-10-0-0-5.ec2.internal"],
    "path": ["/scratch/u1/run/ckpt.pt", "C:\\jobs\\run 3\\model.bin", "/tmp/x", "./out/step_100/"],
    "float": ["0.0", "1e-05", "3.14159"],
    "time": ["2026-12-05T01:02:03", "1999-12-31T23:59:59"],
    "job": ["JOB 4242", "STEP 4242.0", "STEP 4242.batch"],
    "step_id": ["StepId=4242.0", "StepId=4242.batch", "JobId=4242"],
    "task_word": ["task", "tasks"],
    "tasks": ["0", "3", "0-7", "1,5"],
    "sockaddr": ["10.0.3.4<43210>", "172.17.0.2<58121>", "fe80::a00:27ff:fe4e:66a1%ib0<49123>"],
    "shape": ["torch.Size([])", "torch.Size([4096, 1024])", "(3, 4)"],
    "str": ["x", "cuda:0", "AllReduce", "model.layers.3.mlp", "an unexpectedly long value " * 6],
}


# A name that means one thing in one project: NCCL's `line`/`rasLine` buffers hold
# ncclSocketToString's "address<port>" (src/misc/socket.cc)
_PROJECT_KINDS = {"nccl": [("sockaddr", re.compile(r"^(line|rasLine)$"))]}


def kind_of(name: str, project: str | None = None) -> str:
    for kind, rx in _PROJECT_KINDS.get(project, []) + _KINDS:
        if rx.search(name):
            return kind
    return "str"


def fill(name: str, rng: random.Random | None = None, project: str | None = None) -> str:
    kind = kind_of(name, project)
    return rng.choice(_RANDOM[kind]) if rng else _TYPICAL[kind]


# How each kind of call site prints its message: the traceback's last line, warnings'
# file:line prefix, PyTorch's glog-style loggers, NCCL's WARN line (src/debug.cc), an NCCL
# result inside PyTorch's "NCCL error in:", a CUDA runtime string inside "CUDA error:",
# Gloo's enforce and throw prefixes, Slurm's "tool: error:" (src/common/log.c).
STYLES = {
    "python-raise": "{raises}: {message}",
    "cpp-check": "{raises}: {message}",
    "python-warn": "/usr/lib/python3/site-packages/{file}:{line}: {warning}: {message}",
    "python-log": "W1205 01:02:03.456000 4242 site-packages/{file}:{line}] {message}",
    "cpp-warn": "[W1205 01:02:03.456789 4242 {file}:{line}] Warning: {message} (function operator())",
    "cpp-log": "[W1205 01:02:03.456789 4242 {file}:{line}] {message}",
    "nccl-warn": "gpu-node-17:4242:4300 [0] {file}:{line} NCCL WARN {message}",
    "nccl-info": "gpu-node-17:4242:4300 [0] NCCL INFO {message}",
    "nccl-result": "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
                   "ProcessGroupNCCL.cpp:2027, {message}, NCCL version 2.21.5",
    "slurm-error": "{tool}: error: {message}",
    "cuda-runtime": "torch.AcceleratorError: CUDA error: {message}",
    "gloo-enforce": "RuntimeError: [enforce fail at /pytorch/third_party/gloo/{file}:{line}] {message}",
    "gloo-throw": "RuntimeError: [/pytorch/third_party/gloo/{file}:{line}] {message}",
    "gloo-log": "RuntimeError: [/pytorch/third_party/gloo/{file}:{line}] {message}",
    # Kubernetes, as kubectl prints it (staging/src/k8s.io/kubectl/pkg/describe/describe.go):
    # describe pod's "Message:\t%s" (tabwriter, padding 2), which the kubelet's rejectPod fills
    # with "Pod was rejected: " + the admission message, itself "Allocate failed due to %v, which
    # is unexpected" around a device manager error (pkg/kubelet/cm/admission/errors.go); an event
    # row of DescribeEvents ("%v\t%v\t%s\t%v\t%v": type, reason, age, source, message, indented
    # two spaces); a pod condition's message as `kubectl get pod -o yaml` quotes it.
    "k8s-status": "Message:          {message}",
    "k8s-rejected": "Message:          Pod was rejected: {message}",
    "k8s-allocate": "Message:          Pod was rejected: Allocate failed due to {message}, which is unexpected",
    "k8s-event-warning": "  Warning  {raises}  12s   {source}  {message}",
    "k8s-event-normal": "  Normal   {raises}  12s   {source}  {message}",
    "k8s-condition": "    message: '{message}'",
    # a kernel message as dmesg shows it: printk's "[%5lu.%06lu] " time stamp (the NVIDIA driver's Xids)
    "kernel-log": "[ 8012.345678] {message}",
}


def printed_line(style: str, message: str, where: str, raises: str | None = None) -> str:
    """The line as the software prints it (STYLES); an unknown style is the bare message."""
    file, _, line = where.rpartition(":")
    tool = "slurmstepd" if "slurmstepd" in file else file.split("/")[1] if file.count("/") > 1 else "srun"
    source = "default-scheduler" if file.startswith("pkg/scheduler/") else "kubelet"   # an event's From
    return STYLES.get(style, "{message}").format(
        message=message, file=file, line=line, raises=raises or "RuntimeError",
        warning=raises or "UserWarning", tool=tool, source=source)


# ------------------------------------------------------------ files


@dataclass
class ProjectCatalog:
    project: str
    header: dict = field(default_factory=dict)
    templates: dict[str, Template] = field(default_factory=dict)
    path: Path | None = None

    @property
    def release_order(self) -> list[str]:
        return [r["release"] for r in self.header.get("releases", [])]

    def add_release(self, release: str, provenance: dict, found: list[Template]) -> None:
        """Merge one release's templates: known ones widen their range, new ones start uncovered,
        and one that only this release printed and that is no longer found goes."""
        releases = [r for r in self.header.setdefault("releases", []) if r["release"] != release]
        releases.append(dict(release=release, **provenance))
        self.header["releases"] = sorted(releases, key=lambda r: release_key(str(r["release"])))
        seen: dict[str, Template] = {}
        for t in found:
            key = template_key(t.message)
            if key in seen:
                seen[key].sites += 1
                continue
            seen[key] = t
        # a template only this mining run's releases printed, and which it no longer finds,
        # was the old miner's reading of the same source: it goes (a wording an older
        # release printed has that release in its range and stays)
        batch = {release} | {t.releases for t in found}
        for key in [k for k, t in self.templates.items() if t.releases in batch and k not in seen]:
            del self.templates[key]
        for key, t in seen.items():
            old = self.templates.get(key)
            if old is None:
                self.templates[key] = t
                continue
            known = old.releases.split(" .. ") + [t.releases]
            first, last = min(known, key=self.release_rank), max(known, key=self.release_rank)
            newest = self.release_rank(t.releases) >= self.release_rank(old.releases.split(" .. ")[-1])
            old.releases = first if first == last else f"{first} .. {last}"
            if newest:      # where and how it is printed: as the newest release prints it
                old.message, old.where, old.level, old.style, old.sites = t.message, t.where, t.level, t.style, t.sites
                old.raises = t.raises


    def release_rank(self, release: str) -> tuple:
        """release_key, and a "source@commit" release (a C++ file copied at a commit) ranks as
        the release whose header names that commit among its cpp_files, so C++ files copied
        for an older release and merged after newer ones widen ranges the same way."""
        if release.startswith("source@"):
            commit = release[len("source@"):]
            for r in self.header.get("releases", []):
                if commit and any(str(c).startswith(commit) for c in (r.get("cpp_files") or {}).values()):
                    return release_key(str(r["release"]))
        return release_key(release)


def release_key(release: str) -> tuple:
    """Releases in order, whatever order they were mined in: "2.4.1" < "2.13.0",
    "slurm-23-11-11-1" < "slurm-25-11-7-1" (a "source@commit" release has no order)."""
    return tuple(int(n) for n in re.findall(r"\d+", release)) if "@" not in release else ()


class CatalogError(ValueError):
    """A catalogue file that cannot be read: names the file and line."""

    def __init__(self, file: str, line: int, message: str):
        super().__init__(f"{file}:{line}: {message}")
        self.file, self.line, self.message = file, line, message


_FIELDS = {"message", "level", "style", "where", "releases", "raises", "sites", "note", "key_words", *MAPPINGS}


def load_project(path: Path, project: str | None = None, root: Path = ROOT) -> ProjectCatalog:
    """One catalogue file; errors name it relative to root (the checkout)."""
    if not path.exists():
        return ProjectCatalog(project=project or path.stem, path=path)
    rel = path.relative_to(root) if path.is_relative_to(root) else path
    data, lines = _parsed(path, rel, root)
    cat = ProjectCatalog(project=str(data.get("project", project or path.stem)),
                         header={k: v for k, v in data.items() if k not in ("templates", "project")}, path=path)
    for i, item in enumerate(data.get("templates") or []):
        line = lines[i]
        if not isinstance(item, dict) or not isinstance(item.get("message"), str):
            raise CatalogError(str(rel), line, "a template is a mapping with a message")
        unknown = sorted(set(item) - _FIELDS)
        if unknown:
            raise CatalogError(str(rel), line, f"unknown key {unknown[0]!r} (known: {', '.join(sorted(_FIELDS))})")
        mapped = [k for k in MAPPINGS if item.get(k)]
        if len(mapped) != 1:
            raise CatalogError(str(rel), line, f"template {item['message'][:60]!r} needs exactly one of "
                               f"{', '.join(MAPPINGS)}; it has {', '.join(mapped) or 'none'}")
        missing = [k for k in ("level", "style", "where", "releases") if not item.get(k)]
        if missing:
            raise CatalogError(str(rel), line, f"template {item['message'][:60]!r} has no {missing[0]}")
        coll = item.get("collateral")
        t = Template(project=cat.project, message=str(item["message"]), level=str(item["level"]),
                     style=str(item["style"]), where=str(item["where"]), releases=str(item["releases"]),
                     raises=item.get("raises"), entry=item.get("entry"),
                     collateral=[str(coll)] if isinstance(coll, str) else [str(c) for c in coll or []] or None,
                     benign=item.get("benign"), uncovered=item.get("uncovered"), note=item.get("note"),
                     sites=int(item.get("sites", 1)),
                     line=line, key_words=item.get("key_words"))
        cat.templates[template_key(t.message)] = t
    return cat


def _parsed(path: Path, rel, root: Path) -> tuple[dict, list[int]]:
    """A catalogue file's data and each template's line. ruamel's pure-Python parser takes
    about 6 s for the catalogue, most of `faildex validate`; the result is kept in
    root/.cache/catalog/, keyed on the file's bytes, so an unchanged file is read as JSON."""
    raw = path.read_bytes()
    key = hashlib.sha256(raw).hexdigest()[:20]
    cached = root / ".cache" / "catalog" / path.stem / f"{key}.json"
    if cached.is_file():
        try:
            kept = json.loads(cached.read_text(encoding="utf-8"))
            return kept["data"], kept["lines"]
        except (OSError, ValueError, KeyError):
            pass    # a damaged cache file: parse the YAML again
    try:
        data = YAML(typ="rt").load(raw.decode("utf-8")) or {}
    except Exception as err:  # noqa: BLE001 - ruamel's errors carry the position in their text
        mark = getattr(err, "problem_mark", None)
        raise CatalogError(str(rel), mark.line + 1 if mark else 1,
                           f"not valid YAML: {getattr(err, 'problem', None) or err}") from None
    if not isinstance(data, dict):
        raise CatalogError(str(rel), 1, "a catalogue file is a mapping with a templates list")
    items = data.get("templates") or []
    if not isinstance(items, list):
        raise CatalogError(str(rel), 1, "templates is a list")
    lines = [items.lc.item(i)[0] + 1 for i in range(len(items))] if items else []
    plain = json.loads(json.dumps(data))
    try:
        replace_cached(cached, json.dumps({"data": plain, "lines": lines}), "*.json")
    except OSError:
        pass        # a read-only checkout parses every time
    return plain, lines


def save_project(cat: ProjectCatalog, path: Path) -> None:
    def order(t: Template):
        file, _, line = t.where.rpartition(":")
        return (file, int(line) if line.isdigit() else 0, t.message)
    data = {"project": cat.project, **cat.header,
            "templates": [t.to_yaml() for t in sorted(cat.templates.values(), key=order)]}
    yaml = YAML()
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    with path.open("w", encoding="utf-8") as fh:
        fh.write("# Generated by catalog/mine.py, then mapped by hand: see catalog/README.md.\n")
        yaml.dump(data, fh)


def load_all(root: Path = ROOT) -> list[ProjectCatalog]:
    return [load_project(p, root=root) for p in sorted((root / "catalog").glob("*.yaml"))]


def all_templates(root: Path = ROOT) -> list[Template]:
    return [t for cat in load_all(root) for t in cat.templates.values()]


# ------------------------------------------------------------ signatures against templates


# Values tried in every field when asking "can this template print a line the signature
# matches": the field's own kind first, then values of every other kind.
PROBES = ["3", "-11", "15", "SIGTERM", "value", "gpu-node-17", "/scratch/u1/run/ckpt.pt", "0x7f3a2c000000",
          "cuda:0", "torch.float32", "1.5", "nan", "model.layers.0.weight", "AllReduce", "ALLREDUCE"]


class Rendered:
    """Every template rendered with typical values and with each probe value, as printed
    and as the bare message; searched for a signature through its longest literal."""

    def __init__(self, templates: list[Template]):
        self.templates = templates
        self.owner: list[int] = []
        lines = []
        for i, t in enumerate(templates):
            variants = {t.printed(), t.filled()}
            if FIELD.search(t.message):
                for probe in PROBES:
                    msg = FIELD.sub(lambda m: probe, t.message)
                    variants |= {msg, printed_line(t.style, msg, t.where, t.raises)}
            for v in sorted(variants):
                lines.append(v)
                self.owner.append(i)
        self.lines = lines
        self.lines_of: dict[int, list[str]] = {}     # template index -> its renderings
        for ln, owner in zip(lines, self.owner):
            self.lines_of.setdefault(owner, []).append(ln)
        self.text = "\n".join(lines)
        self.starts = []
        pos = 0
        for ln in lines:
            self.starts.append(pos)
            pos += len(ln) + 1

    def matches(self, regex: "re.Pattern", literal: str = "", first: bool = False) -> set[int]:
        """Indexes of the templates some rendering of which the regex matches (with first,
        only the first one found: enough to know that it matches any)."""
        import bisect
        if not literal:
            return {self.owner[i] for i, ln in enumerate(self.lines) if regex.search(ln)}
        found, seen, pos = set(), set(), self.text.find(literal)
        while pos >= 0:
            i = bisect.bisect_right(self.starts, pos) - 1
            if i not in seen:
                seen.add(i)
                if regex.search(self.lines[i]):
                    found.add(self.owner[i])
                    if first:
                        break
            pos = self.text.find(literal, self.starts[i] + len(self.lines[i]))
        return found

    def matches_among(self, regex: "re.Pattern", templates: set[int]) -> set[int]:
        """Which of the given templates some rendering of which the regex matches."""
        return {t for t in templates if any(regex.search(ln) for ln in self.lines_of.get(t, ()))}


def longest_literal(pattern: str) -> str:
    from .regexes import required_literals
    lits = required_literals(pattern)
    return max(lits, key=len) if lits else ""


def signature_table(entries) -> list[tuple[str, str, "re.Pattern"]]:
    """(entry id, signature id, compiled regex) of every defining and supporting signature."""
    out = []
    for e in entries:
        for s in e.data.get("signatures") or []:
            if isinstance(s, dict) and s.get("strength") in ("defining", "supporting"):
                try:
                    out.append((e.id, s.get("id", ""), re.compile(s["regex"])))
                except (re.error, TypeError, KeyError):
                    continue
    return out

