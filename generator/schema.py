"""The entry format: the single source of truth.

Everything about the shape of an entry lives here. The validator walks this
spec, `faildex schema` turns it into JSON Schema for editors, and the
Contributing page documents it from the same objects. To add a field, add it
here once.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .healthy import engine_module

KEBAB = r"^[a-z0-9]+(?:-[a-z0-9]+)*$"
SNAKE = r"^[a-z][a-z0-9_]*$"
VERSION = r"^[0-9]+(?:\.[0-9]+){0,3}$"
# "<fact> <op> [<number> *] <fact>", for discriminators that compare two facts
COMPARE = r"^[a-z][a-z0-9_]* (?:<|<=|>|>=) (?:[0-9]+(?:\.[0-9]+)? \* )?[a-z][a-z0-9_]*$"
DATE = r"^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])$"
# "<software> <release>": PyTorch 2.13, NCCL 2.28, NVIDIA driver 580, Slurm 25.05, Gloo @70dc360
RELEASE = r"^[A-Za-z][\w.+/-]*(?: [A-Za-z][\w.+/-]*)* (?:v?[0-9]+(?:\.[0-9]+){0,3}(?:\.x)?|@[0-9a-f]{7,40})$"

# The categories of the encyclopedia: folder name -> (title, what belongs there).
CATEGORIES: dict[str, tuple[str, str]] = {
    "rendezvous": ("Rendezvous and TCPStore",
                   "Ranks fail to find each other: torchrun rendezvous, the c10d TCPStore, env:// init."),
    "nccl": ("NCCL and collectives",
             "Communicator set-up, network transport and collective hangs or errors."),
    "elastic": ("Elastic agent and process exits",
                "What torchrun's agent reports when a worker process dies, and why it died."),
    "ddp": ("DDP, FSDP and DeepSpeed",
            "Data-parallel wrappers and sharded training refusing the model, the state or the step."),
    "cuda": ("CUDA and the GPU",
             "Device memory, kernels, libraries, drivers and hardware faults (Xid)."),
    "host": ("Host, DataLoader and files",
             "The CPU side: DataLoader workers, shared memory, file descriptors, disks, NFS."),
    "numerics": ("Numerics and autograd",
                 "NaN and overflow, divergence, and autograd or dtype/device errors in the step."),
    "checkpoint": ("Checkpoints and weights",
                   "Saving and loading state: key and shape mismatches, corrupt files, load policy."),
    "environment": ("Build and environment",
                    "Mismatched builds: CUDA, NCCL, extensions, compilers and caches."),
    "cluster": ("Schedulers and clusters",
                "Slurm and Kubernetes killing, refusing or delaying the job."),
    "serving": ("Serving and model loading",
                "vLLM engines and model or tokenizer loading at start-up."),
}

SEVERITIES = ["low", "medium", "high", "critical"]
STRENGTHS = ["defining", "supporting", "collateral", "context"]
# Software whose versions the engine reads from logs and entries can pin (the engine's table)
SOFTWARE = list(engine_module("context").SOFTWARE)


# ---------------------------------------------------------------- the types

@dataclass(frozen=True)
class Str:
    pattern: str | None = None      # regex the value must match
    multiline: bool = False         # prose (folded or literal block)
    max_len: int | None = None
    format: str | None = None       # "uri" or "regex": checked by the validator
    enum: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Bool:
    pass


@dataclass(frozen=True)
class EntryRef:
    """The id of another entry; the validator checks that it exists."""


@dataclass(frozen=True)
class List:
    item: Any
    min_items: int = 0
    unique: bool = False


@dataclass(frozen=True)
class Map:
    """Free keys (matching key_pattern) to values of one type."""
    value: Any
    key_pattern: str = SNAKE


@dataclass(frozen=True)
class OneOf:
    """The value is one of several types (e.g. a string or an object)."""
    options: tuple


@dataclass(frozen=True)
class F:
    name: str
    type: Any
    doc: str
    required: bool = False
    example: Any = None


@dataclass(frozen=True)
class Obj:
    fields: tuple[F, ...]
    doc: str = ""
    one_of_required: tuple[str, ...] = ()   # exactly one of these keys must be present

    def field(self, name: str) -> F | None:
        return next((f for f in self.fields if f.name == name), None)


# ---------------------------------------------------------------- the entry

LINK = Obj((
    F("entry", EntryRef(), "The other entry's id.", required=True),
    F("when", Str(), "What you would see if it were that entry instead.", required=True),
))

DISCRIMINATOR = Obj((
    F("signal", Str(), "What to look at (a fact, a timing, a value in the error).", required=True),
    F("here", Str(), "What that signal shows when it is this failure.", required=True),
    F("elsewhere", LINK, "The look-alike entry and what the signal shows there.", required=True),
    F("fact", Str(pattern=SNAKE),
      "Optional: a fact the engine can read (a named group of a signature, or a context fact "
      "such as pytorch_version) to evaluate this signal automatically."),
    F("here_pattern", Str(format="regex"),
      "With `fact`: a regex the fact's value matches when it is this entry. A value that does "
      "not match points at the `elsewhere` entry."),
    F("compare", Str(pattern=COMPARE),
      "Optional instead of fact/here_pattern: a comparison of two facts that holds when it is "
      "this entry, e.g. `reserved_unallocated > tried` or `reserved_total > 2 * "
      "allocated_by_pytorch`. Sizes with units (bytes, KiB, MiB, GiB, KB, MB, GB) and plain "
      "numbers compare by value."),
))

SIGNATURE = Obj((
    F("id", Str(pattern=KEBAB), "Unique within the entry.", required=True),
    F("regex", Str(format="regex"),
      "Python regex searched in one log line (ANSI codes stripped). Case-sensitive: it is the "
      "exact text the software prints. Named groups become facts in the report.", required=True),
    F("strength", Str(enum=tuple(STRENGTHS)),
      "defining: the line alone identifies this failure. supporting: an abnormal line that "
      "other failures print too. collateral: printed on other ranks or processes as a "
      "consequence; it attaches to the diagnosis and never makes it. context: printed by "
      "healthy runs as well (a config banner, the interface NCCL chose); only its named "
      "groups are used, as facts for discriminators. Defining and supporting lines must "
      "never appear in healthy output (entries/healthy/).", required=True),
    F("source", Str(),
      "Where this exact text was verified: upstream file (repo/path) or the URL of a real "
      "report. Reviewers check it.", required=True),
))

STEP = Obj((
    F("do", Str(), "The action, as an instruction.", required=True),
    F("only_for", Str(), "Only for some forms of the failure: which ones, in words (e.g. "
      "`CUBLAS_STATUS_ALLOC_FAILED`). The first step without `only_for` is the entry's first move "
      "in the error index and the category tables; with none, the first check of `confirm` is."),
    F("command", Str(multiline=True), "A command, setting or code change to copy."),
    F("why", Str(multiline=True), "Why this works for this failure.", required=True),
    F("when", Str(pattern=COMPARE),
      "Optional: a comparison of two facts (as in a discriminator's `compare`) that must hold "
      "for this step to be the next action, e.g. `allocated_by_pytorch < 0.5 * total_capacity`. "
      "The diagnoser puts the first step whose condition holds first."),
    F("upgrade", Bool(),
      "True when the step is an upgrade (a newer release of some software): never offered as "
      "the next action while a step that is not an upgrade exists."),
    F("for_signatures", List(Str(pattern=KEBAB), min_items=1, unique=True),
      "Optional: ids of this entry's signatures. When one of them matched the log, this step "
      "is the next action (after a step whose `when` holds): a family entry's groups of "
      "messages have different first fixes."),
))

CHECK = Obj((
    F("do", Str(), "The check, as an instruction.", required=True),
    F("command", Str(multiline=True), "The command that performs it."),
))

AFFECTS = Obj((
    F("software", Str(enum=tuple(SOFTWARE)), "Which software's version decides.", required=True),
    F("introduced", Str(pattern=VERSION), "First affected version (omit: all earlier ones)."),
    F("fixed", Str(pattern=VERSION), "First version without the failure (omit: not fixed)."),
    F("note", Str(), "What changed in that release."),
))

EXAMPLE = Obj((
    F("log", Str(multiline=True), "The log excerpt, as the software printed it."),
    F("file", Str(), "Or: a path relative to the entry's folder, e.g. "
      "`<id>/rank3.log` (larger examples live in a folder named after the entry)."),
    F("source", Str(),
      "Where it comes from: `reproduced: <how>` for output made here, or the URL of the real "
      "report it was taken from.", required=True),
    F("expect", EntryRef(),
      "The entry the engine must name as primary (default: this entry), or `none` when the "
      "example is output that is not a failure on its own (an advisory warning) and must "
      "get no diagnosis."),
), one_of_required=("log", "file"))

REFERENCE = Obj((
    F("title", Str(), "What the page is.", required=True),
    F("url", Str(format="uri"), "http(s) URL.", required=True),
))

NOT_THIS = Obj((
    F("entry", EntryRef(), "The entry people confuse this with.", required=True),
    F("because", Str(), "Why it is not that.", required=True),
))

QUESTION = Obj((
    F("ask", Str(), "The question as people ask it in an upstream thread (is it safe to raise "
      "this timeout? does this setting exist on my backend?), one that no other section of "
      "the entry answers.", required=True),
    F("asked_at", Str(format="uri"), "The upstream thread (issue, forum post) where it is asked.",
      required=True),
    F("answer", Str(multiline=True), "The answer: a fact, in our words, not a repeat of another "
      "section (a test compares them).", required=True),
    F("reference", Str(format="uri"), "Where that fact is stated upstream (source file, docs, "
      "release notes).", required=True),
))

CHECKED = Obj((
    F("on", Str(pattern=DATE), "The day of the check, quoted: '2026-12-06'.", required=True),
    F("against", List(Str(pattern=RELEASE), min_items=1, unique=True),
      "The releases every claim, command and first fix was checked against, as `<software> "
      "<release>` (`PyTorch 2.13`, `NCCL 2.28`, `Gloo @70dc360` for a commit), in upstream source or docs at that release.",
      required=True),
    F("corrected", Str(multiline=True),
      "What the check found wrong and changed, in a sentence; leave it out when it found nothing."),
))

SYMPTOM = Obj((
    F("see", Str(), "What the user sees.", required=True),
    F("why", Str(), "Why this failure produces it.", required=True),
))

ENTRY = Obj((
    F("id", Str(pattern=KEBAB), "Permanent id, equal to the file name. Never reused.", required=True,
      example="torchrun-rendezvous-timeout"),
    F("title", Str(max_len=90), "The failure as a reader would search for it.", required=True),
    F("category", Str(enum=tuple(CATEGORIES)), "The folder under entries/.", required=True),
    F("severity", Str(enum=tuple(SEVERITIES)), "low, medium, high or critical.", required=True),
    F("systems", List(Str(), min_items=1, unique=True),
      "Software involved (torchrun, NCCL, Slurm...).", required=True),
    F("quick_answer", Str(multiline=True), "One or two sentences: the cause and the first move.",
      required=True),
    F("root_cause", Str(multiline=True), "The mechanism, in prose.", required=True),
    F("misread_as", Str(multiline=True), "What people wrongly suspect, and why it is not that."),
    F("downstream", Bool(),
      "True when this failure is usually the report of another one (ChildFailedError, a "
      "watchdog timeout on ranks that waited): the engine prefers a cause found elsewhere "
      "in the logs and names this entry only when there is none."),
    F("wrapper", Bool(),
      "True when this entry's lines only say that a child process or a command failed "
      "(ChildFailedError's summary, an exit-code triage, a generic CalledProcessError): the "
      "engine never lets it outrank a specific finding, even a downstream one."),
    F("refines", List(EntryRef(), unique=True),
      "Entries this one is a special case of (an FSDP state-dict OOM is a CUDA OOM): when "
      "their defining signatures match the same line, this entry is preferred."),
    F("symptoms", List(SYMPTOM, min_items=1), "What the user sees, and why.", required=True),
    F("signatures", List(SIGNATURE, min_items=1), "What the engine matches in logs.", required=True),
    F("affects", List(AFFECTS), "Version ranges where this failure happens."),
    F("discriminators", List(DISCRIMINATOR), "Signals that separate look-alikes."),
    F("confirm", List(CHECK, min_items=1), "How to confirm: concrete checks.", required=True),
    F("fix", List(STEP, min_items=1), "The fix, as steps.", required=True),
    F("verify", Str(multiline=True), "How to prove the fix worked.", required=True),
    F("prevent", List(Str(multiline=True), min_items=1), "How to keep it from coming back.",
      required=True),
    F("not_this", List(NOT_THIS), "Failures people confuse with this one."),
    F("related", List(EntryRef(), unique=True), "Related entries (shown both ways)."),
    F("questions", List(QUESTION),
      "Questions people really ask about this failure upstream, each answered with a fact "
      "and its reference. Leave it out when there is no such question."),
    F("references", List(REFERENCE, min_items=1), "Upstream sources for the facts.", required=True),
    F("checked", CHECKED,
      "When the whole entry was last checked against current upstream releases, and which: "
      "the page shows it. Write it only after checking every claim, command and first fix."),
    F("examples", List(EXAMPLE, min_items=2), "Real log excerpts; each is a test.", required=True),
))


# ---------------------------------------------------------------- the entry page

@dataclass(frozen=True)
class Section:
    heading: str
    anchor: str
    fields: tuple[str, ...]   # the entry fields it shows ("" first: always shown)
    doc: str
    heading_shown: bool = True   # False: a box at the top of the page, no heading
    optional: bool = False       # shown only when its first field has a value


# The sections of an entry page, in page order: the page template renders them in this
# order, the site tests check the headings against it, the Contributing page lists it
# and `faildex new` orders its template by it.
ENTRY_SECTIONS: tuple[Section, ...] = (
    Section("Quick answer", "quick-answer", ("quick_answer",),
            "The cause and the first move, on top.", heading_shown=False),
    Section("First move", "first-move", ("fix",),
            "The first fix step and its command, right under the quick answer.",
            heading_shown=False),
    Section("What you will see", "what-you-will-see", ("signatures",),
            "The lines this failure prints, as general messages; the patterns on request."),
    Section("Symptoms", "symptoms", ("symptoms",), "What you see, and why."),
    Section("Root cause", "root-cause", ("root_cause",), "The mechanism."),
    Section("Misread as", "misread-as", ("misread_as",), "The usual wrong suspicion.",
            optional=True),
    Section("How to confirm", "how-to-confirm", ("confirm",), "Checks, with commands."),
    Section("Fix", "fix", ("fix",), "Every step, with its command and why it works."),
    Section("Verify", "verify", ("verify",), "How to prove the fix worked."),
    Section("Prevent", "prevent", ("prevent",), "How to keep it from coming back."),
    Section("Look-alikes", "look-alikes", ("discriminators",),
            "Signals that separate it from similar failures.", optional=True),
    Section("What this is not", "what-this-is-not", ("not_this",),
            "Failures people confuse it with.", optional=True),
    Section("Questions people ask", "questions-people-ask", ("questions",),
            "Real questions from upstream threads, answered with a fact.", optional=True),
    Section("For a support ticket", "for-a-support-ticket", ("signatures", "affects", "confirm"),
            "The line, the facts and versions, and the output of the checks to attach."),
    Section("Related", "related", ("related",), "Related entries, both ways.", optional=True),
    Section("Versions affected", "versions-affected", ("affects",),
            "Where the failure happens, by version.", optional=True),
    Section("References", "references", ("references",), "Upstream sources."),
    Section("Example logs", "example-logs", ("examples",), "Real logs, each one a test."),
)


# ---------------------------------------------------------------- JSON Schema

def json_schema() -> dict:
    """JSON Schema (draft 2020-12) for editors, derived from ENTRY."""

    def conv(t) -> dict:
        if isinstance(t, Str):
            s: dict = {"type": "string", "minLength": 1}
            if t.enum:
                s["enum"] = list(t.enum)
            if t.pattern:
                s["pattern"] = t.pattern
            if t.max_len:
                s["maxLength"] = t.max_len
            if t.format == "uri":
                s["pattern"] = r"^https?://"
            return s
        if isinstance(t, EntryRef):
            return {"type": "string", "pattern": KEBAB}
        if isinstance(t, Bool):
            return {"type": "boolean"}
        if isinstance(t, List):
            s = {"type": "array", "items": conv(t.item)}
            if t.min_items:
                s["minItems"] = t.min_items
            if t.unique:
                s["uniqueItems"] = True
            return s
        if isinstance(t, Map):
            return {"type": "object", "propertyNames": {"pattern": t.key_pattern},
                    "additionalProperties": conv(t.value)}
        if isinstance(t, OneOf):
            return {"oneOf": [conv(o) for o in t.options]}
        if isinstance(t, Obj):
            s = {"type": "object", "additionalProperties": False,
                 "properties": {f.name: {**conv(f.type), "description": f.doc} for f in t.fields},
                 "required": [f.name for f in t.fields if f.required]}
            if t.one_of_required:
                s["oneOf"] = [{"required": [k]} for k in t.one_of_required]
            return s
        raise TypeError(t)

    schema = conv(ENTRY)
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema",
              "$id": "https://faildex.dev/schema/entry.json",
              "title": "faildex entry", **schema}
    return schema


def describe_type(t) -> str:
    """Short human name of a type, for the format docs."""
    if isinstance(t, Str):
        if t.enum:
            return " | ".join(t.enum)
        if t.format == "regex":
            return "regex"
        if t.format == "uri":
            return "URL"
        return "text" if t.multiline else "string"
    if isinstance(t, EntryRef):
        return "entry id"
    if isinstance(t, Bool):
        return "true | false"
    if isinstance(t, List):
        return f"list of {describe_type(t.item)}"
    if isinstance(t, Obj):
        return "object"
    if isinstance(t, Map):
        return f"map of {describe_type(t.value)}"
    return "value"
