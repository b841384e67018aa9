"""Mine message templates from upstream source into catalog/<project>.yaml.

    python catalog/mine.py nccl --git /work/.mirror/NVIDIA+nccl/repo
    python catalog/mine.py gloo --git /work/.mirror/pytorch+gloo/repo
    python catalog/mine.py pytorch --tree /path/to/site-packages --release 2.13.0
    python catalog/mine.py cuda-runtime --libcudart path/to/libcudart.so.12 --release 12.9.79
    python catalog/mine.py kubelet --git /work/.mirror/OWNER+kubernetes-1.28.7/repo --tags HEAD --release 1.28.7
    python catalog/mine.py nvidia-xid --table catalog/nvidia-xid-catalog.tsv --release 2026-12-08

Each run reads one or more releases of one project (git tags, an installed wheel's
source, a shared library), extracts every error- and warning-level message the
in-scope code can print, and merges them into the project's YAML: a template seen
before keeps its mapping (entry / collateral / benign / uncovered) and widens its
release range; a template this release no longer prints keeps its old range (the
historical form stays matched). New templates start as `uncovered`. With --fresh the
project's file starts empty: what the miner read wrongly before goes, and the
mappings come back from catalog/decisions/ (catalog/apply.py --all), where they live.

Extraction is syntactic (Python: the ast module; C/C++ and Go: a small tokenizer over macro
and function calls): literal text is kept, every runtime value becomes a `{name}` placeholder.
"""
from __future__ import annotations

import argparse
import ast
import ctypes
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from generator.catalog import ProjectCatalog, Template, load_project, save_project, template_key  # noqa: E402

# ---------------------------------------------------------------- what is in scope

# PyTorch: the Python half of distributed/elastic/FSDP/DDP, serialization, DataLoader,
# CUDA initialisation and memory, and the top-level compile failures. Read from an
# installed wheel (the release's own files); the C++ half needs a source checkout.
PYTORCH_SCOPE = [
    "torch/distributed/distributed_c10d.py", "torch/distributed/rendezvous.py",
    "torch/distributed/run.py", "torch/distributed/launch.py", "torch/distributed/c10d_logger.py",
    "torch/distributed/utils.py", "torch/distributed/elastic/", "torch/distributed/launcher/",
    "torch/distributed/fsdp/", "torch/distributed/_composable/fsdp/",
    "torch/distributed/flight_recorder/", "torch/nn/parallel/distributed.py",
    "torch/serialization.py", "torch/utils/data/dataloader.py", "torch/utils/data/_utils/",
    "torch/cuda/__init__.py", "torch/cuda/memory.py", "torch/_dynamo/exc.py",
    "torch/_inductor/exc.py", "torch/_utils.py", "torch/nn/modules/module.py", "torch/_weights_only_unpickler.py",
    "torch/multiprocessing/spawn.py", "torch/utils/cpp_extension.py", "torch/_prims_common/__init__.py",
    "torch/_inductor/compile_fx.py", "torch/_dynamo/convert_frame.py", "torch/_inductor/runtime/triton_heuristics.py",
    "torch/cuda/_memory_viz.py", "torch/_inductor/codecache.py", "torch/utils/_triton.py",
]
# Where PyTorch's message helpers are read (python_helpers): torch.distributed and DDP, whose
# helpers raise the caller's text (_p_assert, _log_and_throw); their call sites anywhere in scope
# are templates. Dynamo's and Inductor's helpers are left out: their argument is a graph-break
# reason or a shell command, not a failure a training log shows.
PYTORCH_HELPER_SCOPE = ("torch/distributed/", "torch/nn/parallel/")
# Python projects read from their released wheel or sdist (--archive): release, the
# repository, and the in-scope paths (prefixes inside the archive, after its top folder).
# A path only older releases have is the earlier home of an in-scope one: vLLM's V0 engine
# (up to 0.10) schedules in vllm/core/scheduler.py what V1 schedules in vllm/v1/core/sched/.
PY_PROJECTS = {
    "transformers": ("https://github.com/huggingface/transformers", [
        "transformers/trainer.py", "transformers/trainer_utils.py", "transformers/trainer_pt_utils.py",
        "transformers/training_args.py", "transformers/modeling_utils.py", "transformers/configuration_utils.py",
        "transformers/tokenization_utils_base.py", "transformers/utils/hub.py", "transformers/utils/import_utils.py",
        "transformers/dynamic_module_utils.py", "transformers/integrations/deepspeed.py",
        "transformers/integrations/fsdp.py", "transformers/modeling_flash_attention_utils.py"]),
    "accelerate": ("https://github.com/huggingface/accelerate", [
        "accelerate/accelerator.py", "accelerate/state.py", "accelerate/checkpointing.py",
        "accelerate/commands/launch.py", "accelerate/utils/launch.py", "accelerate/utils/memory.py",
        "accelerate/utils/dataclasses.py", "accelerate/utils/fsdp_utils.py", "accelerate/utils/deepspeed.py",
        "accelerate/utils/environment.py", "accelerate/utils/modeling.py"]),
    "huggingface_hub": ("https://github.com/huggingface/huggingface_hub", [
        "huggingface_hub/utils/_http.py", "huggingface_hub/utils/_errors.py", "huggingface_hub/errors.py",
        "huggingface_hub/file_download.py", "huggingface_hub/_snapshot_download.py",
        "huggingface_hub/utils/_validators.py", "huggingface_hub/_login.py"]),
    "deepspeed": ("https://github.com/deepspeedai/DeepSpeed", [
        "deepspeed/runtime/engine.py", "deepspeed/runtime/zero/", "deepspeed/runtime/fp16/",
        "deepspeed/runtime/bf16_optimizer.py", "deepspeed/runtime/config.py", "deepspeed/runtime/utils.py",
        "deepspeed/runtime/checkpoint_engine/", "deepspeed/launcher/", "deepspeed/comm/", "deepspeed/checkpoint/",
        "deepspeed/ops/", "op_builder/builder.py", "op_builder/", "deepspeed/accelerator/",
        "deepspeed/env_report.py", "deepspeed/git_version_info.py"]),
    "vllm": ("https://github.com/vllm-project/vllm", [
        "vllm/v1/engine/", "vllm/v1/core/kv_cache_utils.py", "vllm/v1/core/sched/", "vllm/core/scheduler.py",
        "vllm/v1/worker/gpu_worker.py",
        "vllm/v1/worker/gpu_model_runner.py", "vllm/v1/executor/", "vllm/engine/", "vllm/executor/",
        "vllm/worker/", "vllm/entrypoints/launcher.py", "vllm/entrypoints/openai/api_server.py",
        "vllm/config/", "vllm/config.py", "vllm/model_executor/model_loader/", "vllm/distributed/",
        "vllm/platforms/cuda.py", "vllm/platforms/interface.py", "vllm/utils/__init__.py", "vllm/utils.py",
        "vllm/model_executor/models/registry.py", "vllm/transformers_utils/config.py"]),
}
EXCLUDE = re.compile(r"/(tests?|testing|_testing|benchmarks?|examples?)/")
# Files inside an in-scope folder that no training run executes (exact paths or folder
# prefixes). DeepSpeed (checked in 0.19.8 by what imports each file):
# checkpoint/ds_to_universal.py is the offline ZeRO -> universal conversion script (the
# engine imports only dp_index_to_str from it, which raises nothing); affine_transfer.py is
# imported by nothing; reshape_*.py serve only DeepSpeedCheckpoint/ZeROCheckpoint's
# reshaping, which only that script drives (zero_checkpoint.py and universal_checkpoint.py,
# which training loads, stay); ops/triton_ops/fused_rms_norm.py and fused_rotary_pos_emb.py
# are imported by nothing in the package. Kept although first proposed for leaving out:
# checkpoint/autoep_*.py and affine.py (the engine and module_inject import and call them
# when AutoEP / AutoTP models are set up, saved and loaded) and ops/triton_ops' MoE kernels
# (autoep_fused_token_ops, swiglu_triton, group_gemm_triton: moe/ and auto_ep_layer run them).
PY_EXCLUDE = {
    "deepspeed": ["deepspeed/checkpoint/ds_to_universal.py", "deepspeed/checkpoint/affine_transfer.py",
                  "deepspeed/checkpoint/reshape_", "deepspeed/ops/triton_ops/fused_rms_norm.py",
                  "deepspeed/ops/triton_ops/fused_rotary_pos_emb.py"],
}

# ---------------------------------------------------------------- Python


def _expr_name(node: ast.AST) -> str:
    """A short name for a runtime value: the last attribute or the variable."""
    try:
        text = ast.unparse(node)
    except Exception:  # noqa: BLE001 - any odd node is just "value"
        return "value"
    m = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)
    name = m[-1] if m else "value"
    return name if len(text) < 60 else "value"


# printf conversions; %p a pointer, %ps Slurm's step id (xstring.h), %m strerror(errno) (no argument)
_PERCENT = re.compile(r"%(?:\((\w+)\))?[-#0 +]*\d*(?:\.\d+)?[hlLqjzt]*([diouxXeEfFgGcrsam%]|ps?)")


def _percent_to_fields(fmt: str, names: list[str]) -> str:
    it = iter(names)

    def sub(m):
        if m.group(2) == "%":
            return "%"
        if m.group(2) == "m":
            return "{strerror}"
        name = m.group(1) or next(it, None)
        if m.group(2) == "ps":
            return "{step_id}"
        return "{" + (name if name and name != "value" else _printf_kind(m.group(2))) + "}"
    # literal braces become parentheses first, so that only fields are in braces
    return _PERCENT.sub(sub, fmt.replace("{", "(").replace("}", ")"))


def _printf_kind(conv: str) -> str:
    return {"d": "int", "i": "int", "u": "int", "o": "int", "x": "hex", "X": "hex", "p": "pointer",
            "f": "float", "e": "float", "g": "float", "F": "float", "E": "float", "G": "float",
            "c": "char"}.get(conv, "str")


# name -> the template pieces a variable holds where a message is being read
# (msg = f"..."; msg += "..."); set by mine_python_text for each line it reads
_ASSIGNED: dict[str, list[str]] = {}


def _inline(node: ast.AST) -> str | None:
    """A variable that the file assigns one message template (and perhaps appends to): that
    template, so that `raise X(msg)` and `f"{hint}"` keep their words."""
    if isinstance(node, ast.Name) and node.id in _ASSIGNED and len(_ASSIGNED[node.id]) <= 3:
        return "".join(_ASSIGNED[node.id])
    return None


def py_message(node: ast.AST, args: list[ast.AST] = ()) -> str | None:
    """The template of a message expression, or None when it holds no literal text."""
    inlined = _inline(node)
    if inlined is not None:
        return inlined
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value.replace("{", "(").replace("}", ")")
        if args and "%" in node.value:
            text = _percent_to_fields(node.value, [_expr_name(a) for a in args])
        return text
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value).replace("{", "(").replace("}", ")"))
            else:
                out.append(_inline(part.value) or "{" + _expr_name(part.value) + "}")
        return "".join(out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = py_message(node.left), py_message(node.right)
        return (left if left is not None else "{" + _expr_name(node.left) + "}") + \
               (right if right is not None else "{" + _expr_name(node.right) + "}")
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and \
            isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
        vals = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
        return _percent_to_fields(node.left.value, [_expr_name(v) for v in vals])
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format" \
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str):
        return re.sub(r"\{([^{}]*)\}", lambda m: "{" + (m.group(1).split(":")[0].split("!")[0] or "value") + "}",
                      node.func.value.value)
    return None


_LOG_LEVELS = {"error": "error", "exception": "error", "critical": "error", "fatal": "error",
               "warning": "warning", "warn": "warning"}


def _is_logger(node: ast.AST) -> bool:
    name = _expr_name(node).lower()
    return name.endswith(("log", "logger", "_logger")) or name == "logging"


# name -> [helper]: functions whose raise / warnings.warn / log call prints one of their
# parameters as the whole message (torch.distributed.utils._p_assert(cond, s) raises
# AssertionError(s); DDP's self._log_and_throw(err_type, err_msg) raises err_type(err_msg)).
# Set by python_helpers for the files of the release being read; each call site that passes
# text is a template.
PY_HELPERS: dict[str, list[dict]] = {}


def python_helpers(files) -> dict[str, list[dict]]:
    """The message helpers of (rel, text) pairs: name -> [{"rel", "method", "params",
    "pieces": [(parameter, style, level, raises or ("param", name))]}]."""
    out: dict[str, list[dict]] = {}
    for rel, text in files:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        methods = {id(f) for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body}
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
            pieces = []
            stack = list(fn.body)
            while stack:
                node = stack.pop()
                if isinstance(node, _SCOPE):
                    continue
                stack.extend(ast.iter_child_nodes(node))
                if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                    msg, exc = node.exc.args[0], node.exc.func
                    raises = ("param", exc.id) if isinstance(exc, ast.Name) and exc.id in params else _expr_name(exc)
                    if not isinstance(raises, tuple) and not raises[:1].isupper():
                        continue        # raise _env_error(name): the function builds the message
                    piece = ("python-raise", "error", raises)
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                    msg, attr = node.args[0], node.func.attr
                    if attr == "warn" and _expr_name(node.func.value) == "warnings":
                        category = _expr_name(node.args[1]) if len(node.args) > 1 else "UserWarning"
                        piece = ("python-warn", "warning", category)
                    elif attr in _LOG_LEVELS and _is_logger(node.func.value):
                        piece = ("python-log", _LOG_LEVELS[attr], None)
                    else:
                        continue
                else:
                    continue
                if isinstance(msg, ast.Name) and msg.id in params:
                    pieces.append((msg.id, *piece))
            if pieces:
                out.setdefault(fn.name, []).append({"rel": rel, "method": id(fn) in methods,
                                                    "params": params, "pieces": pieces})
    return out


def _helper_call(node: ast.Call, rel: str) -> list[dict]:
    """The templates a call of a message helper prints: the caller's text in the helper's line."""
    func = node.func
    if isinstance(func, ast.Name):
        rows = [h for h in PY_HELPERS.get(func.id, ()) if not h["method"]]
    elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in ("self", "cls"):
        rows = [h for h in PY_HELPERS.get(func.attr, ()) if h["method"] and h["rel"] == rel]
    elif isinstance(func, ast.Attribute) and func.attr.startswith("_"):
        rows = [h for h in PY_HELPERS.get(func.attr, ()) if not h["method"]]
    else:
        return []
    if not rows:
        return []
    helper = next((h for h in rows if h["rel"] == rel), rows[0])
    params = helper["params"][1:] if helper["method"] else helper["params"]

    def arg(name):
        for kw in node.keywords:
            if kw.arg == name:
                return kw.value
        i = params.index(name) if name in params else len(node.args)
        return node.args[i] if i < len(node.args) and not isinstance(node.args[i], ast.Starred) else None

    out = []
    for param, style, level, raises in helper["pieces"]:
        value = arg(param)
        msg = py_message(value) if value is not None else None
        if msg is None or not re.search(r"[A-Za-z]{3}", FIELD_RE.sub("", msg)):
            continue
        if isinstance(raises, tuple):
            value = arg(raises[1])
            raises = _expr_name(value) if value is not None else None
        item = dict(message=msg, level=level, style=style, where=f"{rel}:{node.lineno}")
        if raises:
            item["raises"] = raises
        out.append(item)
    return out


def mine_python(path: Path, rel: str) -> list[dict]:
    return mine_python_text(path.read_text(encoding="utf-8", errors="replace"), rel)


def archive_files(archive: str):
    """(path inside the project, text) of every .py file of a wheel or an sdist."""
    import tarfile
    import zipfile
    if archive.endswith(".whl"):
        with zipfile.ZipFile(archive) as z:
            for name in z.namelist():
                if name.endswith(".py"):
                    yield name, z.read(name).decode("utf-8", "replace")
    else:
        with tarfile.open(archive) as t:
            for m in t.getmembers():
                if m.isfile() and m.name.endswith(".py"):
                    yield m.name.split("/", 1)[1], t.extractfile(m).read().decode("utf-8", "replace")


_SCOPE = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _scopes(tree: ast.Module) -> list[tuple[list[ast.AST], list[ast.AST]]]:
    """Each function (and class, and the module), outermost first, as (the scopes whose
    names it sees, innermost first; the nodes that belong to it, nested scopes excluded)."""
    out = []

    def visit(scope, chain):
        own, nested, stack = [], [], list(ast.iter_child_nodes(scope))
        while stack:
            n = stack.pop()
            if isinstance(n, _SCOPE):
                nested.append(n)
                continue
            own.append(n)
            stack.extend(ast.iter_child_nodes(n))
        out.append(([scope] + chain, own))
        # a method does not see its class's names; a nested function sees its function's
        inner_chain = chain if isinstance(scope, ast.ClassDef) else [scope] + chain
        for n in nested:
            visit(n, inner_chain)

    visit(tree, [])
    return out


def _visible(assigns: dict, chain: list[ast.AST], line: int) -> dict[str, list[str]]:
    """name -> template pieces at `line`: in the innermost scope that assigns the name, its
    last assignment before the line and what was appended to it since."""
    seen: dict[str, list[str] | None] = {}
    for scope in chain:
        local: dict[str, list[str] | None] = {}
        for lineno, name, aug, msg in assigns.get(id(scope), []):
            if lineno >= line:
                break
            if not aug:
                local[name] = [msg] if msg is not None else None
            elif local.get(name) is not None and msg is not None:
                local[name] = local[name] + [msg]
        for name, pieces in local.items():
            seen.setdefault(name, pieces)
    return {k: v for k, v in seen.items() if v}


def mine_python_text(text: str, rel: str) -> list[dict]:
    """Raised exceptions, warnings.warn and logger.error/warning calls of one file.

    A message held in a variable (`msg = f"..."; msg += "..."; raise X(msg)`) is read at
    the raise: the variable as the enclosing function (or the module) last set it before
    that line, so two functions that each build their own `msg` keep their own words."""
    global _ASSIGNED
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    assigns: dict[int, list] = {}
    found = []
    for chain, own in _scopes(tree):
        scope = chain[0]
        rows = []
        for node in sorted((n for n in own if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))),
                           key=lambda n: (n.lineno, n.col_offset)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is None or len(targets) != 1 or not isinstance(targets[0], ast.Name):
                continue
            assigns[id(scope)] = rows
            _ASSIGNED = _visible(assigns, chain, node.lineno)
            msg = None
            if isinstance(node.value, (ast.Constant, ast.JoinedStr, ast.BinOp)):
                msg = py_message(node.value)
                if msg is not None and not (re.search(r"[A-Za-z]{3}", msg) and " " in msg):
                    msg = None
            rows.append((node.lineno, targets[0].id, isinstance(node, ast.AugAssign), msg))
        assigns[id(scope)] = rows
        for node in sorted(own, key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0))):
            if not isinstance(node, (ast.Raise, ast.Call)):
                continue
            _ASSIGNED = _visible(assigns, chain, node.lineno)
            if isinstance(node, ast.Raise):
                if isinstance(node.exc, ast.Call) and node.exc.args:
                    exc = _expr_name(node.exc.func)
                    msg = py_message(node.exc.args[0])
                    if msg is not None:
                        found.append(dict(message=msg, level="error", style="python-raise", raises=exc,
                                          where=f"{rel}:{node.lineno}"))
            elif PY_HELPERS and _helper_call(node, rel):
                found += _helper_call(node, rel)
            elif isinstance(node.func, ast.Attribute) and node.args:
                attr = node.func.attr
                if attr == "warn" and _expr_name(node.func.value) == "warnings":
                    msg = py_message(node.args[0])
                    category = _expr_name(node.args[1]) if len(node.args) > 1 else "UserWarning"
                    for kw in node.keywords:
                        if kw.arg == "category":
                            category = _expr_name(kw.value)
                    if msg is not None:
                        found.append(dict(message=msg, level="warning", style="python-warn", raises=category,
                                          where=f"{rel}:{node.lineno}"))
                elif attr in _LOG_LEVELS and _is_logger(node.func.value):
                    msg = py_message(node.args[0], node.args[1:])
                    if msg is not None:
                        found.append(dict(message=msg, level=_LOG_LEVELS[attr], style="python-log",
                                          where=f"{rel}:{node.lineno}"))
    _ASSIGNED = {}
    found.sort(key=lambda f: int(f["where"].rsplit(":", 1)[1]))
    return found


# ---------------------------------------------------------------- C and C++

_C_TOKEN = re.compile(r'''
    (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>(?:u8|[uUL])?"(?:[^"\\\n]|\\.)*")
  | (?P<char>'(?:[^'\\\n]|\\.)+')
  | (?P<open>[(\[{])
  | (?P<close>[)\]}])
  | (?P<comma>,)
  | (?P<shift><<)
  | (?P<semi>;)
  | (?P<other>[^\s"'()\[\]{},;</]+|[</])
''', re.S | re.X)


def _c_unescape(lit: str) -> str:
    body = lit[lit.index('"') + 1:-1]
    return re.sub(r"\\(.)", lambda m: {"n": " ", "t": " ", '"': '"', "\\": "\\"}.get(m.group(1), m.group(1)), body)


def _c_call_args(src: str, start: int) -> tuple[list[list[tuple[str, str]]], int]:
    """The arguments of the call whose "(" is at start, as lists of tokens; and the end."""
    depth, args, cur, pos = 0, [], [], start
    for m in _C_TOKEN.finditer(src, start):
        kind, text = m.lastgroup, m.group()
        pos = m.end()
        if kind == "comment":
            continue
        if kind == "open":
            depth += 1
            if depth == 1:
                continue
        elif kind == "close":
            depth -= 1
            if depth == 0:
                args.append(cur)
                return args, pos
        elif kind == "comma" and depth == 1:
            args.append(cur)
            cur = []
            continue
        elif kind == "semi" and depth <= 1:
            break
        cur.append((kind, text))
    return args, pos


_FMT_FIELD = re.compile(r"\{(?:\d+)?(?::[^{}]*)?\}")


def _c_fmt(args) -> str | None:
    """fmt::format / C10D_ERROR style: "{}" fields in the literal, values after it."""
    if not args or not args[0] or not all(k == "string" for k, _ in args[0]):
        return None
    fmt = "".join(_c_unescape(t) for _, t in args[0])
    names = iter(_c_piece(a) for a in args[1:])
    return _FMT_FIELD.sub(lambda m: next(names, "{value}"), fmt.replace("{{", "(").replace("}}", ")"))


def _c_piece(tokens: list[tuple[str, str]]) -> str:
    """One argument: adjacent string literals joined; a nested c10::str(...) or
    fmt::format(...) read as its own template; anything else a {name} field."""
    if tokens and all(k == "string" for k, _ in tokens):
        return "".join(_c_unescape(t) for _, t in tokens).replace("{", "(").replace("}", ")")
    parts = _c_plus_parts(tokens)
    if len(parts) > 1:          # "prefix: " + msg + "..." (std::string concatenation)
        return "".join(_c_piece(p) for p in parts)
    words = [t for k, t in tokens]
    if len(words) == 3 and words[1:] == ["(", ")"] and words[0].endswith(".str") and \
            _c_stream_text(words[0][:-4]) is not None:
        return _c_stream_text(words[0][:-4])     # ss.str(): what the function wrote into ss
    for i, t in enumerate(words[:-1]):
        if words[i + 1] == "(" and re.search(r"(?:^|::)(format|str|c_str)$", t) and not t.endswith("c_str"):
            inner = " ".join(words[i + 1:])
            args, _ = _c_call_args(inner, 0)
            out = _c_fmt(args) if t.endswith("format") else "".join(_c_piece(a) for a in args)
            if out is not None:
                return out
    names = [w for k, t in tokens if k == "other" for w in re.findall(r"[A-Za-z_]\w*", t)
             if w not in ("c_str", "str", "what", "std", "to_string", "size_t", "int")]
    if len(names) == 1 and names[0] not in _C_SHADOW and _c_string(names[0]) is not None:
        return _c_string(names[0])     # a message kept in a string variable of the file
    return "{" + (names[-1] if names else "value") + "}"


# The string variables of the file being mined, each definition with its position:
# `std::string kMsg = "..." "...";`, `auto msg = fmt::format("...", ...);`,
# `std::string exceptionMsg = c10::str("...", x, "...");`. A use reads the nearest
# definition above it (`msg` is defined again in every function).
FIELD_RE = re.compile(r"\{[^{}]*\}")
_C_STRINGS: dict[str, list[tuple[int, str]]] = {}
_C_POS = [0]
# the parameters of the function being read: a parameter `msg` is the caller's text, not a
# variable `msg` that another function above defined
_C_SHADOW: set[str] = set()
# std::stringstream variables: name -> [(position, "decl" | text written by `ss << ...;`)]
_C_STREAMS: dict[str, list[tuple[int, str]]] = {}
_C_STREAM_DECL = re.compile(r"\bstd::(?:o?stringstream|ostringstream)\s+(\w+)\s*;")


def _c_plus_parts(tokens: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """An argument split at its top-level `+` when one side is a string literal (so that
    `a + b` arithmetic stays one value)."""
    parts, cur, depth = [], [], 0
    for kind, text in tokens:
        depth += kind == "open"
        depth -= kind == "close"
        if depth == 0 and kind == "other" and text == "+":
            parts.append(cur)
            cur = []
            continue
        cur.append((kind, text))
    parts.append(cur)
    if len(parts) > 1 and all(parts) and any(p and p[0][0] == "string" for p in parts):
        return parts
    return [tokens]


def _c_stream_text(name: str) -> str | None:
    """What `name << ... ;` statements wrote since the stream's declaration above _C_POS."""
    rows = [(pos, text) for pos, text in _C_STREAMS.get(name, ()) if pos < _C_POS[0]]
    decl = max((i for i, (_, text) in enumerate(rows) if text is None), default=None)
    if decl is None:
        return None
    text = "".join(t for _, t in rows[decl + 1:])
    return text if re.search(r"[A-Za-z]{3}", FIELD_RE.sub("", text)) else None


def _c_streams(src: str) -> dict[str, list[tuple[int, str | None]]]:
    out: dict[str, list[tuple[int, str | None]]] = {}
    for m in _C_STREAM_DECL.finditer(src):
        out.setdefault(m.group(1), []).append((m.start(), None))
    for name in list(out):
        for m in re.finditer(rf"(?<![\w.>]){re.escape(name)}\s*<<", src):
            out[name].append((m.start(), _c_stream(src, m.end() - 2)))
        out[name].sort(key=lambda r: r[0])
    return out
_C_STRING_DEF = re.compile(r'(?:std::string|const char\s*\*|auto)\s+(?:const\s+)?(\w+)\s*=\s*'
                           r'(?:((?:"(?:[^"\\\n]|\\.)*"\s*)+);|(c10::str|(?:c10::)?fmt::format)\s*\()')


def _c_string(name: str) -> str | None:
    found = [text for pos, text in _C_STRINGS.get(name, ()) if pos < _C_POS[0]]
    return found[-1] if found else None


def _c_strings(src: str) -> dict[str, list[tuple[int, str]]]:
    # filled as it goes: a definition may use one above it (c10::str(kPrefix, "\n", info))
    out = _C_STRINGS
    out.clear()
    for m in _C_STRING_DEF.finditer(src):
        if m.group(2):
            text = "".join(_c_unescape(x) for x in re.findall(r'"(?:[^"\\\n]|\\.)*"', m.group(2)))
            text = text.replace("{", "(").replace("}", ")")
        else:
            _C_POS[0] = m.start()
            args, _ = _c_call_args(src, m.end() - 1)
            text = _c_fmt(args) if m.group(3).endswith("format") else "".join(_c_piece(a) for a in args)
        if text and re.search(r"[A-Za-z]{3}", FIELD_RE.sub("", text)):
            out.setdefault(m.group(1), []).append((m.start(), text))
    return dict(out)


_TEXT_OF_ERROR = {"strerror", "gai_strerror", "dlerror", "ncclGetErrorString", "cudaGetErrorString",
                  "ibv_wc_status_str"}


def _c_printf(args) -> str | None:
    """printf-style: the format's literal text with {name} (or {kind}) fields."""
    if not args or not args[0] or not all(k == "string" for k, _ in args[0]):
        return None
    fmt = "".join(_c_unescape(t) for _, t in args[0])
    names = []
    for a in args[1:]:
        n = [w for k, t in a if k == "other" for w in re.findall(r"[A-Za-z_]\w*", t)]
        # strerror(ret) is the error's text, not the number: name it for what it prints
        text = [w for w in n if w in _TEXT_OF_ERROR]
        names.append("strerror" if text else
                     n[-1] if n and n[-1] not in ("int", "long", "char", "void", "size_t", "c_str") else None)
    return _percent_to_fields(fmt, names)


def _c_stream(src: str, pos: int) -> str:
    """After `LOG(ERROR)`: the `<< a << "b"` chain up to the ';' as a template."""
    pieces, cur, depth = [], [], 0
    for m in _C_TOKEN.finditer(src, pos):
        kind, text = m.lastgroup, m.group()
        if kind == "comment":
            continue
        if kind == "open":
            depth += 1
        elif kind == "close":
            depth -= 1
        if depth == 0 and kind in ("shift", "semi"):
            if cur:
                pieces.append(_c_piece(cur))
            cur = []
            if kind == "semi":
                return "".join(pieces)
            continue
        cur.append((kind, text))
    return "".join(pieces)


# how c10's error types print in a Python traceback (torch/csrc/Exceptions.h)
_PY_ERROR_NAMES = {"DistBackendError": "torch.distributed.DistBackendError",
                   "DistNetworkError": "torch.distributed.DistNetworkError",
                   "DistStoreError": "torch.distributed.DistStoreError",
                   "DistError": "torch.distributed.DistError",
                   "ValueError": "ValueError", "TypeError": "TypeError", "IndexError": "IndexError",
                   "NotImplementedError": "NotImplementedError", "OutOfMemoryError": "torch.OutOfMemoryError",
                   "AcceleratorError": "torch.AcceleratorError"}


def _blank_comments(src: str) -> str:
    """Comments replaced by spaces (newlines kept, so line numbers stay right)."""
    return _C_TOKEN.sub(lambda m: re.sub(r"[^\n]", " ", m.group()) if m.lastgroup == "comment" else m.group(), src)


def line_of(src: str, pos: int) -> int:
    return src.count("\n", 0, pos) + 1


# Leading arguments that are not the message: a condition (check), the two operands of
# GLOO_ENFORCE_EQ (check2), the error type (typed: C10_THROW_ERROR), or both (typed-check:
# TORCH_CHECK_WITH). "concat" joins every argument (c10::str style).
_NOT_MESSAGE = {"concat": 0, "check": 1, "check2": 2, "typed": 1, "typed-check": 2}


def _c_macro_calls(src: str, macros: dict[str, tuple], defs: list["_CDef"]):
    """(position, message, style, level, raises) of every call of the named macros in src
    (comments blanked, the file's string variables read)."""
    calls = "|".join(sorted((re.escape(n) for n in macros if not n.endswith(")")), key=len, reverse=True))
    streams = "|".join(re.escape(n) for n in macros if n.endswith(")")) or "(?!)"
    for m in re.finditer(rf"\b(?:({streams})|({calls})\s*\()", src):
        style, level, how, *keep = macros[m[1] or m[2]]
        _C_POS[0] = m.start()
        inner = _c_enclosing(defs, m.start())
        _C_SHADOW.clear()
        _C_SHADOW.update(inner.params if inner else ())
        raises = _MACRO_RAISES.get(m[2] or "")
        if how == "stream":      # LOG(ERROR) has no call of its own: the message follows
            msg = _c_stream(src, m.end())
        else:
            args, _ = _c_call_args(src, m.end() - 1)
            if how == "printf":
                msg = _c_printf(args)
            elif how == "printf1":      # a flag first, then the format (NCCL's INFO(NCCL_NET, ...))
                msg = _c_printf(args[1:])
            elif how == "fmt":
                msg = _c_fmt(args)
            else:
                msg = "".join(_c_piece(a) for a in args[_NOT_MESSAGE[how]:])
            if how.startswith("typed") and args:
                raises = _c_piece(args[0]).strip("{}")
        _C_SHADOW.clear()
        if keep and not (msg and re.match(keep[0], msg)):
            continue
        if msg:
            yield m.start(), msg.strip(), style, level, (_PY_ERROR_NAMES.get(raises, raises) if raises else None)


# ---- message helpers: functions that print or throw the text their caller passes
#
# ProcessGroupGloo reports argument errors through a lambda that adds its prefix,
#   static auto invalidArgument = [](const std::string& msg) {
#     TORCH_CHECK(false, "ProcessGroupGloo::gather: " + msg); };
#   invalidArgument("requires empty output on non-root");
# and through checks of Utils.hpp that call back with their own words,
#   inline void assertRootRank(std::function<void(const std::string&)> fn, int rank, int size) {
#     if (...) fn("invalid root rank: " + std::to_string(rank)); }
#   assertRootRank(invalidArgument, opts.rootRank, size_);
# Each call site is a template: the helper's words around the caller's.

_SLOT = "\x00"
_C_KEYWORDS = {"if", "for", "while", "switch", "return", "catch", "sizeof", "decltype", "defined", "throw",
               "static_assert", "alignof", "noexcept", "new", "delete", "case", "do", "else"}
_C_DEF_HEAD = re.compile(r"(?:\bauto\s+(\w+)\s*=\s*\[[^\]\n]*\]\s*\(|(?<![\w.>:])(?:\w+::)*(\w+)\s*\()")


class _CDef:
    """A function or a named lambda: its name, where its name is, its parameters (callback
    parameters, std::function, apart) and its body's span."""

    def __init__(self, name, pos, params, callbacks, body, texts=()):
        self.name, self.pos, self.params, self.callbacks, self.body = name, pos, params, callbacks, body
        self.texts = texts      # the parameters that are text (std::string, const char*)


def _c_definitions(src: str) -> list[_CDef]:
    out = []
    for m in _C_DEF_HEAD.finditer(src):
        name = m[1] or m[2]
        if name in _C_KEYWORDS:
            continue
        params, end = _c_call_args(src, m.end() - 1)
        tail = re.match(r"\s*(?:const\b\s*|noexcept\b\s*|override\b\s*|mutable\b\s*|->\s*[\w:<>,\s*&]+?)*\{",
                        src[end:end + 200])
        if not tail or (m[2] and not re.search(r"[\w>&*]\s*(?:\w+::)*$", src[max(0, m.start() - 80):m.start()])):
            continue
        body_start = end + tail.end() - 1
        depth, body_end = 0, len(src)
        for t in _C_TOKEN.finditer(src, body_start):
            if t.lastgroup == "open" and t.group() == "{":
                depth += 1
            elif t.lastgroup == "close" and t.group() == "}":
                depth -= 1
                if depth == 0:
                    body_end = t.end()
                    break
        names, callbacks, texts = [], [], []
        for i, toks in enumerate(params):
            words = [t for k, t in toks if k == "other"]
            if "=" in words:
                words = words[:words.index("=")]
            ident = [w for w in words if re.fullmatch(r"[A-Za-z_]\w*", w)]
            if not ident:
                names.append(None)
                continue
            names.append(ident[-1])
            if any("function" in w for w in words):
                callbacks.append(i)
            elif any(re.search(r"string|char\b|str\b", w) for w in words[:-1]):
                texts.append(i)
        out.append(_CDef(name, m.start(m.lastindex), names, callbacks, (body_start, body_end), texts))
    return out


def _c_enclosing(defs: list[_CDef], pos: int) -> _CDef | None:
    inside = [d for d in defs if d.body[0] < pos < d.body[1]]
    return min(inside, key=lambda d: d.body[1] - d.body[0]) if inside else None


def _c_prepare(src: str):
    """The source with its comments blanked, its string constants and streams noted for the
    readers (_C_STRINGS, _C_STREAMS), and its function definitions."""
    src = _blank_comments(src)
    _C_STRINGS.clear()
    _C_STRINGS.update(_c_strings(src))
    _C_STREAMS.clear()
    _C_STREAMS.update(_c_streams(src))
    return src, _c_definitions(src)


def c_helpers(src: str, macros: dict[str, tuple], shared: dict | None = None) -> dict[str, list[dict]]:
    """The message helpers a file defines: name -> [helper], each either
    {"kind": "message", "pos", "pieces": [(param index, template with _SLOT, style, level, raises)]}
    (the function prints or throws its parameter's text) or
    {"kind": "callback", "pos", "index": callback parameter, "messages": [template]}
    (the function calls its std::function parameter with these words). `shared` are the
    helpers of other files (headers) that this file's helpers may call."""
    src, defs = _c_prepare(src)
    calls = list(_c_macro_calls(src, macros, defs))
    found: dict[str, list[dict]] = {}
    for d in defs:
        pieces = []
        for pos, msg, style, level, raises in calls:
            if d.body[0] < pos < d.body[1] and _c_enclosing(defs, pos) is d:
                for i, p in enumerate(d.params):
                    # the caller's text ends the line (a prefix helper, or the whole message); a
                    # text parameter inside the helper's own words is a value, and the line
                    # itself is the template ("Attribute {attrName} of node {name} not found")
                    if p and i in d.texts and re.search(r"\{" + p + r"\}[\s.:;!]*$", msg):
                        pieces.append((i, msg.replace("{" + p + "}", _SLOT, 1), style, level, raises))
        if pieces:
            pieces.sort(key=lambda x: x[2] != "cpp-check")      # the exception before the log line
            found.setdefault(d.name, []).append({"kind": "message", "pos": d.pos, "pieces": pieces})
    # callbacks: fn("words"), and other callback helpers handed fn; to a fixpoint
    for _ in range(4):
        known = {**(shared or {}), **found}
        for d in defs:
            if not d.callbacks:
                continue
            messages = []
            for cb in d.callbacks:
                for m in re.finditer(r"(?<![\w.>:])(\w+)\s*\(", src[d.body[0]:d.body[1]]):
                    start = d.body[0] + m.end() - 1
                    args, _ = _c_call_args(src, start)
                    _C_POS[0] = start
                    _C_SHADOW.clear()
                    if m[1] == d.params[cb] and args:
                        text = _c_piece(args[0])
                        if re.search(r"[A-Za-z]{3}", FIELD_RE.sub("", text)):
                            messages.append(text)
                    for h in known.get(m[1], ()):
                        if h["kind"] == "callback" and h["index"] < len(args) and \
                                [t for _, t in args[h["index"]]] == [d.params[cb]]:
                            messages += h["messages"]
            if messages:
                entry = {"kind": "callback", "pos": d.pos, "index": d.callbacks[0],
                         "messages": list(dict.fromkeys(messages))}
                rows = found.setdefault(d.name, [])
                old = next((h for h in rows if h["pos"] == d.pos), None)
                if old:
                    old["messages"] = list(dict.fromkeys(old["messages"] + entry["messages"]))
                else:
                    rows.append(entry)
    # overloads share their name: a callback helper's messages are those of all of them
    for name, rows in found.items():
        cbs = [h for h in rows if h["kind"] == "callback"]
        union = list(dict.fromkeys(m for h in cbs for m in h["messages"]))
        for h in cbs:
            h["messages"] = union
    _C_SHADOW.clear()
    return found


def _c_visible(helpers: dict[str, list[dict]], name: str, pos: int, kind: str) -> dict | None:
    """The definition a call at pos means: the nearest one above it (a lambda is defined again
    in each function), else the first."""
    rows = [h for h in helpers.get(name, ()) if h["kind"] == kind]
    above = [h for h in rows if h["pos"] < pos]
    return (above[-1] if above else rows[0]) if rows else None


def mine_c(src: str, rel: str, macros: dict[str, tuple], shared: dict | None = None) -> list[dict]:
    """Calls of the named macros, and (when `shared` is given, even empty) calls of the file's
    and `shared`'s message helpers.
    macros: name -> (style, level, how[, pattern the message must start with]) where how is
    'printf' (a format and its values), 'printf1' (a flag, then printf's), 'fmt' (fmt::format's "{}" fields), 'stream'
    (LOG(...) << ...), or one of _NOT_MESSAGE (the message pieces after some arguments)."""
    own = c_helpers(src, macros, shared) if shared is not None else {}
    helpers = {k: list(v) for k, v in (shared or {}).items()}
    for k, v in own.items():
        helpers[k] = v + [h for h in helpers.get(k, ()) if h["kind"] not in {x["kind"] for x in v}]
    found = []
    src, defs = _c_prepare(src)
    used: set[int] = set()      # the helpers (by position) a call site here printed through

    def add(pos, msg, style, level, raises):
        if msg and re.search(r"[A-Za-z]{3}", re.sub(r"\{[^{}]*\}", "", msg)):
            item = dict(message=msg.strip(), level=level, style=style, where=f"{rel}:{line_of(src, pos)}")
            if raises:
                item["raises"] = raises
            found.append(item)

    defined = {d.pos for d in defs}
    for m in re.finditer(r"(?<![\w.>])(?:\w+::)*(\w+)\s*\(", src):
        name = m[1]
        if name not in helpers or m.start(1) in defined:
            continue
        args, _ = _c_call_args(src, m.end() - 1)
        _C_POS[0] = m.start()
        inner = _c_enclosing(defs, m.start())
        _C_SHADOW.clear()
        _C_SHADOW.update(inner.params if inner else ())
        emitted = set()
        helper = _c_visible(helpers, name, m.start(), "message")
        if helper:
            for index, template, style, level, raises in helper["pieces"]:
                if index < len(args) and args[index]:
                    text = template.replace(_SLOT, _c_piece(args[index]))
                    if text not in emitted and re.search(r"[A-Za-z]{3}", FIELD_RE.sub("", _c_piece(args[index]))):
                        emitted.add(text)
                        used.add(helper["pos"])
                        add(m.start(), text, style, level, raises)
        helper = _c_visible(helpers, name, m.start(), "callback")
        if helper and helper["index"] < len(args):
            words = [t for _, t in args[helper["index"]]]
            target = _c_visible(helpers, words[0], m.start(), "message") if len(words) == 1 else None
            if target:
                for words_ in helper["messages"]:
                    for index, template, style, level, raises in target["pieces"]:
                        text = template.replace(_SLOT, words_)
                        if text not in emitted:
                            emitted.add(text)
                            used.add(target["pos"])
                            add(m.start(), text, style, level, raises)
        _C_SHADOW.clear()
    # a helper's own line prints whatever its callers pass: where they pass text, the call
    # sites are the templates and the line itself ("ProcessGroupGloo::gather: {msg}") is not
    bodies = [(d.body, {d.params[i] for i in d.texts}) for d in defs if d.pos in used]
    for pos, msg, style, level, raises in _c_macro_calls(src, macros, defs):
        if not any(a < pos < b and any("{" + p + "}" in msg for p in params) for (a, b), params in bodies):
            add(pos, msg, style, level, raises)
    found.sort(key=lambda f: int(f["where"].rsplit(":", 1)[1]))
    return found


def c_shared_helpers(files: dict[str, str], macros: dict[str, tuple]) -> dict[str, list[dict]]:
    """The message helpers the headers among `files` define, for every file that includes them."""
    shared: dict[str, list[dict]] = {}
    for _ in range(2):          # a header's helper may call another header's
        for rel, src in files.items():
            if rel.endswith((".h", ".hpp", ".cuh")):
                for name, rows in c_helpers(src, macros, shared).items():
                    shared[name] = rows
    return shared


# the exception type a macro raises in Python (c10's typed errors, as torch/csrc/Exceptions.h
# translates them)
_MACRO_RAISES = {"TORCH_CHECK_VALUE": "ValueError", "TORCH_CHECK_INDEX": "IndexError",
                 "TORCH_CHECK_NOT_IMPLEMENTED": "NotImplementedError"}


PYTORCH_MACROS = {
    "TORCH_CHECK": ("cpp-check", "error", "check"),
    "TORCH_CHECK_WITH": ("cpp-check", "error", "typed-check"),
    "TORCH_CHECK_VALUE": ("cpp-check", "error", "check"),
    "TORCH_CHECK_INDEX": ("cpp-check", "error", "check"),
    "TORCH_CHECK_NOT_IMPLEMENTED": ("cpp-check", "error", "check"),
    "C10_THROW_ERROR": ("cpp-check", "error", "typed"),
    "C10D_THROW_ERROR": ("cpp-check", "error", "typed"),
    "REDUCER_CHECK": ("cpp-check", "error", "check2"),   # TORCH_CHECK after logging (reducer.hpp)
    "TORCH_WARN": ("cpp-warn", "warning", "concat"),
    "TORCH_WARN_ONCE": ("cpp-warn", "warning", "concat"),
    "C10D_ERROR": ("cpp-log", "error", "fmt"),
    "C10D_WARNING": ("cpp-log", "warning", "fmt"),
    "LOG(ERROR)": ("cpp-log", "error", "stream"),
    "LOG(WARNING)": ("cpp-log", "warning", "stream"),
    "LOG(FATAL)": ("cpp-log", "error", "stream"),
}
# Slurm's user-facing tools and the step daemon: error()/fatal() print "srun: error: ...",
# "slurmstepd: error: ..." (src/common/log.c); verbose levels are not failures.
SLURM_SCOPE = ["src/srun", "src/slurmd/slurmstepd", "src/plugins/task/cgroup", "src/plugins/cgroup",
               "src/sbatch", "src/salloc", "src/plugins/launch"]
SLURM_MACROS = {"error": ("slurm-error", "error", "printf"), "fatal": ("slurm-error", "error", "printf")}
# NCCL reports its errors as WARN; after some errors it adds INFO lines that start "HINT:"
# (src/transport/net_ib/common.h, src/misc/ibvwrap.cc), which name the likely cause
NCCL_MACROS = {"WARN": ("nccl-warn", "error", "printf"),
               "INFO": ("nccl-info", "warning", "printf1", r"HINT: ")}
GLOO_MACROS = {
    "GLOO_ENFORCE": ("gloo-enforce", "error", "check"),
    "GLOO_ENFORCE_EQ": ("gloo-enforce", "error", "check2"), "GLOO_ENFORCE_NE": ("gloo-enforce", "error", "check2"),
    "GLOO_ENFORCE_LE": ("gloo-enforce", "error", "check2"), "GLOO_ENFORCE_LT": ("gloo-enforce", "error", "check2"),
    "GLOO_ENFORCE_GE": ("gloo-enforce", "error", "check2"), "GLOO_ENFORCE_GT": ("gloo-enforce", "error", "check2"),
    "GLOO_THROW_IO_EXCEPTION": ("gloo-throw", "error", "concat"),
    "GLOO_THROW_INVALID_OPERATION_EXCEPTION": ("gloo-throw", "error", "concat"),
    "GLOO_THROW": ("gloo-throw", "error", "concat"),
    "GLOO_ERROR": ("gloo-log", "error", "concat"), "GLOO_WARN": ("gloo-log", "warning", "concat"),
}


# ---------------------------------------------------------------- Go (Kubernetes)

# The kubelet's and the scheduler's messages about a pod killed or refused for resources:
# what `kubectl describe pod` shows as the pod's Message, its events, and the preemption
# condition. Files read, with the functions whose fmt.Errorf texts reach the pod: the
# device manager's allocation path, whose error the kubelet wraps in "Allocate failed due to
# %v, which is unexpected" (cm/admission/errors.go; "Update plugin resources failed due to
# %v, which is unexpected." in lifecycle/predicate.go before the topology manager).
# Scheduler: the victim's event moved from scheduler.go (1.15) to framework/preemption/; the
# error types whose text the kubelet's admission shows lived in scheduler/algorithm/predicates/
# error.go before lifecycle/predicate.go had its own. Also read: the kubelet killing a pod to admit a
# critical one (kubelet/preemption/) and for a graceful node shutdown (spot and preemptible VMs).
# Of the scheduler's events only the victim's: the others are about placing pods, not killing them.
KUBE_SCHEDULER_EVENTS = ("Preempted",)
KUBE_SCOPE = ["pkg/kubelet/eviction/helpers.go", "pkg/kubelet/eviction/eviction_manager.go",
              "pkg/kubelet/lifecycle/predicate.go", "pkg/kubelet/cm/admission/errors.go",
              "pkg/kubelet/cm/devicemanager/manager.go", "pkg/scheduler/scheduler.go",
              "pkg/scheduler/framework/preemption/preemption.go", "pkg/scheduler/algorithm/predicates/error.go",
              "pkg/kubelet/preemption/preemption.go", "pkg/kubelet/nodeshutdown/nodeshutdown_manager_linux.go"]
KUBE_ERRORF_FUNCS = {"pkg/kubelet/cm/devicemanager/manager.go": (
    "devicesToAllocate", "allocateContainerResources", "callGetPreferredAllocationIfAvailable")}

# Go's fmt verbs; %q prints the value quoted
_GO_VERB = re.compile(r"%[-+# 0]*\d*(?:\.\d+)?([vTtbcdoOqxXUeEfFgGspw%])")
_GO_CONST = re.compile(r'^\s*(?:const\s+)?(\w+)(?:\s+[\w.]+)?\s*=\s*"((?:[^"\\\n]|\\.)*)"', re.M)
_GO_CONST_BLOCK = re.compile(r"^const\s*\((.*?)^\)|^const\s+\w+[^\n]*", re.M | re.S)


def _go_consts(src: str):
    """The string constants of a file (in `const` declarations only), as regex matches."""
    return [m for b in _GO_CONST_BLOCK.finditer(src) for m in _GO_CONST.finditer(src, b.start(), b.end())]


def _go_message_const(name: str) -> bool:
    return name.endswith(("MessageFmt", "Message")) or name == "message"


def go_format_args(files: dict[str, str]) -> dict[str, list[str]]:
    """name -> the field names of a *MessageFmt constant, from a call that formats it
    (`fmt.Sprintf(containerMessageFmt, container.Name, usage.String(), ...)`) in any file read;
    "admitted" -> the message constants an admission result carries (`PodAdmitResult{...,
    Message: nodeShutdownNotAdmittedMessage}`), which the pod shows after "Pod was rejected: "."""
    out = {"admitted": []}
    for src in files.values():
        for m in re.finditer(r"\bfmt\.Sprintf\((\w+MessageFmt),", src):
            args, _ = _c_call_args(src, m.end() - len(m.group(1)) - 2)
            out.setdefault(m.group(1), [_go_name(a) for a in args[1:]])
        for m in re.finditer(r"\bMessage:\s*(?:fmt\.Sprintf\()?(\w+)", src):
            if m.group(1) != "message" and _go_message_const(m.group(1)) and \
                    "PodAdmitResult{" in src[max(0, m.start() - 200):m.start()]:
                out["admitted"].append(m.group(1))
    return out


def _go_name(tokens: list[tuple[str, str]]) -> str:
    """A field name for a value: its last identifier (.String(), .Len() and .Error() dropped)."""
    text = re.sub(r"\.(?:String|Len|Error)\(\)$", "", "".join(t for _, t in tokens).strip())
    names = re.findall(r"[A-Za-z_]\w*", text)
    return names[-1] if names else "value"


def _go_format(fmt: str, args) -> str:
    """A Sprintf/Errorf/Eventf format with its values as {name} fields."""
    names = iter(_go_name(a) for a in args)

    def sub(m):
        if m.group(1) == "%":
            return "%"
        name = "{" + next(names, "value") + "}"
        return f'"{name}"' if m.group(1) == "q" else name
    return _GO_VERB.sub(sub, fmt.replace("{", "(").replace("}", ")"))


def _go_text(tokens, consts: dict[str, str]) -> str | None:
    """The template of one Go expression: a literal (or the file's string constant),
    fmt.Sprintf/Sprint/Errorf of one, or literals and values joined with +."""
    if not tokens:
        return None
    words = [t for _, t in tokens]
    if words[0] in ("fmt.Sprintf", "fmt.Sprint", "fmt.Errorf") and len(words) > 1 and words[1] == "(":
        args, _ = _c_call_args(" ".join(words[1:]), 0)
        fmt = _go_text(args[0], consts) if args else None
        return _go_format(fmt, args[1:]) if fmt is not None else None
    parts, cur, depth = [], [], 0
    for kind, text in tokens:      # split at top-level "+"
        depth += text in "([{" if kind in ("open", "close") else 0
        depth -= text in ")]}" if kind == "close" else 0
        if kind == "other" and text == "+" and depth == 0:
            parts.append(cur)
            cur = []
        else:
            cur.append((kind, text))
    parts.append(cur)
    out, literal = [], False
    for part in parts:
        if part and all(k == "string" for k, _ in part):
            out.append("".join(_c_unescape(t) for _, t in part).replace("{", "(").replace("}", ")"))
            literal = True
        elif len(part) == 1 and part[0][1] in consts:
            out.append(consts[part[0][1]])
            literal = True
        else:
            out.append("{" + _go_name(part) + "}")
    return "".join(out) if literal else None


def _go_reason(tokens, consts: dict[str, str]) -> str | None:
    """An event's or an admission result's reason: a literal or one of the file's constants."""
    if len(tokens) == 1 and tokens[0][0] == "string":
        return _c_unescape(tokens[0][1])
    return consts.get(tokens[0][1]) if len(tokens) == 1 else None


def mine_go(src: str, rel: str, fmt_args: dict[str, list[str]] | None = None) -> list[dict]:
    """The pod-facing messages of one Kubernetes Go file:
    - string constants named *MessageFmt (the eviction messages; the reason is the file's
      `Reason` constant), printed as the pod's status message;
    - recorder Eventf/AnnotatedEventf calls with a literal format (the last literal argument;
      the reason is the argument after the event type);
    - `Message:` fields of admission results and pod conditions, `message = fmt.Sprintf(...)`
      assignments (their reason is the next `Reason:` field), and the Sprintf of `Error()`
      methods (error types whose text becomes the message);
    - fmt.Errorf in the functions KUBE_ERRORF_FUNCS names for the file."""
    src = _blank_comments(src)
    consts = {m.group(1): _c_unescape('"' + m.group(2) + '"') for m in _go_consts(src)}
    where = (lambda pos: f"{rel}:{line_of(src, pos)}")
    # how the message reaches the pod: an admission result is shown after "Pod was rejected: "
    admission = "k8s-rejected" if rel.startswith(("pkg/kubelet/lifecycle/", "pkg/kubelet/cm/admission/",
                                                  "pkg/scheduler/algorithm/predicates/")) else None
    out = []
    fmt_args = fmt_args or {}
    for m in _go_consts(src):
        name = m.group(1)
        if _go_message_const(name):
            names = [[("other", n)] for n in fmt_args.get(name, [])]
            # its reason: the constant named like it (nodeShutdownReason), else the file's Reason
            reason = consts.get(re.sub(r"Message(Fmt)?$", "Reason", name)) if name != "message" else None
            reason = reason or consts.get("Reason")
            item = dict(message=_go_format(consts[name], names), level="error", where=where(m.start(1)),
                        style="k8s-rejected" if name in fmt_args.get("admitted", ()) else "k8s-status")
            if reason:
                item["raises"] = reason
            out.append(item)
    for m in re.finditer(r"\b(?:Annotated)?Eventf\(", src):
        args, _ = _c_call_args(src, m.end() - 1)
        lits = [i for i, a in enumerate(args) if len(a) == 1 and a[0][0] == "string"]
        kinds = [i for i, a in enumerate(args) if any("EventType" in t for _, t in a)]
        if not lits or not kinds or lits[-1] <= kinds[0] + 1:
            continue
        normal = any("EventTypeNormal" in t for _, t in args[kinds[0]])
        text = _go_format(_c_unescape(args[lits[-1]][0][1]), args[lits[-1] + 1:])
        if not re.search(r"[A-Za-z]{3}", FIELD_RE.sub("", text)):
            continue        # "%v" of an error: the words are someone else's
        if rel.startswith("pkg/scheduler/") and _go_reason(args[kinds[0] + 1], consts) not in KUBE_SCHEDULER_EVENTS:
            continue
        out.append(dict(message=text, level="error",
                        style="k8s-event-normal" if normal else "k8s-event-warning", where=where(m.start()),
                        raises=_go_reason(args[kinds[0] + 1], consts)))
    for m in re.finditer(r"\bMessage:|\bmessage\s*:?=\s*(?=fmt\.Sprint)|\) Error\(\) string \{\s*return ", src):
        args, _ = _c_call_args("(" + src[m.end():], 0)
        text = _go_text(args[0] if args else [], consts)
        if text is None or text == consts.get(src[m.end():].split(",")[0].strip(), "") \
                or not re.search(r"[A-Za-z]{3}", FIELD_RE.sub("", text)):
            continue        # a variable, or a *MessageFmt constant already read where it is defined
        reason = re.search(r"\bReason:\s*([\w.]+|\"[^\"]*\")", src[m.start() - 120 if m.group().startswith("Message") else m.end():][:600])
        # a pod condition's message (DisruptionTarget) is read from the pod's YAML
        condition = "PodCondition{" in src[max(0, m.start() - 300):m.start()]
        item = dict(message=text, level="error", where=where(m.start()),
                    style="k8s-condition" if condition else admission or "k8s-status")
        reason = reason and _go_reason([("string" if reason.group(1)[0] == '"' else "other", reason.group(1))], consts)
        if reason and "Error()" not in m.group():
            item["raises"] = reason
        out.append(item)
    for name in KUBE_ERRORF_FUNCS.get(rel, ()):
        head = re.search(r"^func \([^)]*\) " + name + r"\(", src, re.M)
        if not head:
            continue
        end = src.find("\n}\n", head.end())
        for m in re.finditer(r"\bfmt\.Errorf\(", src[head.end():end]):
            pos = head.end() + m.start()
            args, _ = _c_call_args(src, pos + len("fmt.Errorf"))
            text = _go_text(args[0], consts) if args else None
            if text is not None:
                out.append(dict(message=_go_format(text, args[1:]), level="error", style="k8s-allocate",
                                where=where(pos), raises="UnexpectedAdmissionError"))
    return sorted(out, key=lambda f: int(f["where"].rsplit(":", 1)[1]))


# ---------------------------------------------------------------- NVIDIA Xid catalog (documentation)

# The driver logs an Xid as "NVRM: Xid (PCI:%04x:%02x:%02x): %d, pid=%s, name=%s, %s%s"
# (open-gpu-kernel-modules src/nvidia/src/kernel/gpu/rc/kernel_rc.c, XID_PRINT_WITH_ATTR); the text
# after name= is the error's own and the catalog does not give it, so it stays a field.
XID_LINE = "NVRM: Xid (PCI:{pci_device}): %s, pid={pid}, name={name}, {message}"


def mine_xid_table(path: str) -> list[dict]:
    """NVIDIA's Xid catalog (catalog/nvidia-xid-catalog.tsv: xid, mnemonic, description, immediate
    action, as the page words them): one template per Xid the driver still logs, the kernel line
    with the Xid number fixed. Rows the page describes as "Unused" (deprecated, or V100 and older)
    are not templates."""
    rows = [r.split("\t") for r in Path(path).read_text(encoding="utf-8").splitlines()
            if r and not r.startswith("#")]
    out = []
    for xid, mnemonic, description, *_ in rows[1:]:
        if description.strip() != "Unused":
            out.append(dict(message=XID_LINE % xid, level="error", style="kernel-log",
                            where=f"{mnemonic} = {xid}"))
    return out


def mine_nccl_results(src: str, rel: str) -> list[dict]:
    """ncclGetErrorString's table: what PyTorch prints after "NCCL error in: ...". """
    body = src[src.find("const char* ncclGetErrorString(ncclResult_t code) {"):]
    body = body[:body.find("\n}")]
    start = line_of(src, src.find("const char* ncclGetErrorString(ncclResult_t code) {"))
    out = []
    for m in re.finditer(r'return\s+"((?:[^"\\]|\\.)*)"', body):
        if m.group(1) != "no error":
            out.append(dict(message=m.group(1), level="error", style="nccl-result",
                            where=f"{rel}:{start + body.count(chr(10), 0, m.start())}"))
    return out


# ---------------------------------------------------------------- sources


def git_files(gitdir: str, ref: str, prefix: str, suffixes: tuple) -> dict[str, str]:
    names = subprocess.run(["git", "--git-dir", gitdir, "ls-tree", "-r", "--name-only", ref, prefix],
                           check=True, capture_output=True, text=True).stdout.split()
    out = {}
    for name in names:
        if name.endswith(suffixes) and not EXCLUDE.search("/" + name):
            out[name] = subprocess.run(["git", "--git-dir", gitdir, "show", f"{ref}:{name}"], check=True,
                                       capture_output=True).stdout.decode("utf-8", "replace")
    return out


def commit_of(gitdir: str, ref: str) -> str:
    return subprocess.run(["git", "--git-dir", gitdir, "rev-parse", f"{ref}^{{commit}}"], check=True,
                          capture_output=True, text=True).stdout.strip()


def release_of_tag(tag: str) -> str:
    return re.sub(r"^v", "", tag)


def mine_release(project: str, args, ref: str | None) -> tuple[list[dict], dict]:
    """(templates, provenance) of one release."""
    if project == "nccl":
        files = git_files(args.git, ref, "src", (".cc", ".h", ".cu", ".cpp"))
        found = []
        shared = c_shared_helpers(files, NCCL_MACROS)
        for rel, src in files.items():
            found += mine_c(src, rel, NCCL_MACROS, shared)
            if "ncclGetErrorString(ncclResult_t code) {" in src:
                found += mine_nccl_results(src, rel)
        return found, {"repository": "https://github.com/NVIDIA/nccl", "ref": ref, "commit": commit_of(args.git, ref)}
    if project == "gloo":
        files = git_files(args.git, ref, "gloo", (".cc", ".h", ".cu", ".cpp"))
        found = []
        shared = c_shared_helpers(files, GLOO_MACROS)
        for rel, src in files.items():
            found += mine_c(src, rel, GLOO_MACROS, shared)
        return found, {"repository": "https://github.com/pytorch/gloo", "ref": ref, "commit": commit_of(args.git, ref)}
    if project == "pytorch":
        tree = Path(args.tree)
        found, texts = [], {}
        for scope in PYTORCH_SCOPE:
            paths = sorted((tree / scope).rglob("*.py")) if scope.endswith("/") else [tree / scope]
            for p in paths:
                rel = p.relative_to(tree).as_posix()
                if p.is_file() and not EXCLUDE.search("/" + rel):
                    texts[rel] = p.read_text(encoding="utf-8", errors="replace")
        global PY_HELPERS
        PY_HELPERS = python_helpers((rel, t) for rel, t in texts.items() if rel.startswith(PYTORCH_HELPER_SCOPE))
        for rel, text in texts.items():
            found += mine_python_text(text, rel)
        PY_HELPERS = {}
        provenance = {"repository": "https://github.com/pytorch/pytorch", "ref": f"v{args.release}",
                      "mined_from": f"the installed torch=={args.release} wheel's Python sources"}
        if args.cpp_tree:
            # The C++ half is not in the wheel: files copied from the repository, each at
            # the commit COMMITS.tsv names ("path<TAB>commit<TAB>chars").
            # A tree may hold only some of the files (those re-read): the header keeps the
            # commits of the others (main merges the lists).
            files, sources = {}, {}
            for row in (Path(args.cpp_tree) / "COMMITS.tsv").read_text().splitlines():
                path, commit = row.split("\t")[:2]
                sources[path] = (Path(args.cpp_tree) / path).read_text(encoding="utf-8", errors="replace")
                files[path] = commit
            shared = c_shared_helpers(sources, PYTORCH_MACROS)
            for path, src in sources.items():
                found += [dict(f, release=f"source@{files[path][:10]}")
                          for f in mine_c(src, path, PYTORCH_MACROS, shared)]
            provenance["cpp_files"] = files
        return found, provenance
    if project in PY_PROJECTS:
        repo, scope = PY_PROJECTS[project]
        found = []
        for rel, text in archive_files(args.archive):
            if rel.endswith(".py") and rel.startswith(tuple(scope)) and not EXCLUDE.search("/" + rel) and \
                    any(rel == sc or (sc.endswith("/") and rel.startswith(sc)) for sc in scope) and \
                    not rel.startswith(tuple(PY_EXCLUDE.get(project, ()))):
                found += mine_python_text(text, rel)
        return found, {"repository": repo, "ref": f"v{args.release}", "mined_from": Path(args.archive).name}
    if project == "slurm":
        files = {}
        for prefix in SLURM_SCOPE:
            files.update(git_files(args.git, ref, prefix, (".c", ".h")))
        found = []
        for rel, src in files.items():
            found += mine_c(src, rel, SLURM_MACROS)
        return found, {"repository": "https://github.com/SchedMD/slurm", "ref": ref, "commit": commit_of(args.git, ref)}
    if project == "kubelet":
        partial = set()
        if args.git:
            # a copy of a release's tree (a git mirror): KUBE_SCOPE at the ref
            files = {}
            for path in KUBE_SCOPE:
                files.update(git_files(args.git, ref, path, (".go",)))
            mirror = Path(args.git).parent.name.replace("+", "/")
            provenance = {"repository": "https://github.com/kubernetes/kubernetes", "ref": f"v{args.release}",
                          "mined_from": f"the v{args.release} tree as copied in github.com/{mirror}",
                          "commit": commit_of(args.git, ref)}
        else:
            # files read one by one (--tree DIR with COMMITS.tsv: path, commit, characters read;
            # a file read only in part is a prefix of it, so its line numbers hold)
            files, read, partial = {}, {}, set()
            for row in (Path(args.tree) / "COMMITS.tsv").read_text().splitlines():
                path, commit, chars = row.split("\t")[:3]
                files[path] = (Path(args.tree) / path).read_text(encoding="utf-8")
                read[path] = f"{commit} ({chars} characters)"
                if len(set(re.findall(r"\d+", chars))) > 1:     # "3827 of 56788"
                    partial.add(path)
            provenance = {"repository": "https://github.com/kubernetes/kubernetes", "ref": args.release,
                          "mined_from": "the files named, each at its commit", "files": read}
        found, fmt_args = [], go_format_args(files)
        for rel in KUBE_SCOPE:
            if rel in files:
                found += mine_go(files[rel], rel, fmt_args)
        # a file read in part (the eviction constants without the calls that format them) keeps
        # the field names and the style that a full reading of an earlier release gave its messages
        known = load_project(HERE / "kubelet.yaml", "kubelet").templates
        for f in found:
            old = known.get(template_key(f["message"]))
            if args.tree and old and f["where"].rsplit(":", 1)[0] in partial:
                f["message"], f["style"] = old.message, old.style
        return found, provenance
    if project == "nvidia-xid":
        return mine_xid_table(args.table), {
            "source": "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html",
            "page_date": "none shown; its newest rows name CUDA 12.9 / driver R575",
            "ref": args.release, "mined_from": f"{Path(args.table).name}, the page's Xids sheet as read on {args.release}",
            "line_format": "open-gpu-kernel-modules src/nvidia/src/kernel/gpu/rc/kernel_rc.c (XID_PRINT_WITH_ATTR) at 595.45.04"}
    if project == "cuda-runtime":
        lib = ctypes.CDLL(args.libcudart)
        lib.cudaGetErrorString.restype = ctypes.c_char_p
        lib.cudaGetErrorName.restype = ctypes.c_char_p
        found = []
        for code in range(1, 1000):
            name = lib.cudaGetErrorName(code)
            if name and not name.startswith(b"unrecognized"):
                found.append(dict(message=lib.cudaGetErrorString(code).decode(), level="error",
                                  style="cuda-runtime", where=f"{name.decode()} = {code}"))
        return found, {"library": Path(args.libcudart).name, "ref": args.release,
                       "mined_from": "cudaGetErrorName/cudaGetErrorString of every code, called with ctypes"}
    raise SystemExit(f"unknown project {project!r}")


def merge_cpp_files(catalog: ProjectCatalog, release: str, provenance: dict, found: list[dict]) -> list[dict]:
    """C++ files re-read for a release join the files its header already lists (each at the
    commit it was read at): re-mining some files keeps the record of the others. A message
    the re-read files print that the catalogue already has from a file not re-read keeps that
    reading (its place and its count of sites span files this run did not see)."""
    if "cpp_files" not in provenance:
        return found
    old = next((r for r in catalog.header.get("releases", []) if r["release"] == release), {})
    read = set(provenance["cpp_files"])
    provenance["cpp_files"] = {**(old.get("cpp_files") or {}), **provenance["cpp_files"]}
    unread = set(provenance["cpp_files"]) - read
    keep = {k for k, t in catalog.templates.items() if t.where.rsplit(":", 1)[0] in unread}
    return [f for f in found if not (str(f.get("release", "")).startswith("source@")
                                     and template_key(f["message"]) in keep)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("project", choices=["nccl", "gloo", "pytorch", "cuda-runtime", "slurm", "kubelet", "nvidia-xid", *PY_PROJECTS])
    ap.add_argument("--archive", help="the release's wheel or sdist (transformers, accelerate, ...)")
    ap.add_argument("--git", help="a git directory (nccl, gloo, slurm; kubelet: a copy of a release's tree)")
    ap.add_argument("--tags", nargs="*", default=["HEAD"], help="the releases to read, oldest first")
    ap.add_argument("--tree", help="site-packages holding the installed release (pytorch); kubelet: files with a COMMITS.tsv")
    ap.add_argument("--cpp-tree", help="copied C++ sources with a COMMITS.tsv (pytorch)")
    ap.add_argument("--libcudart", help="libcudart.so of the release (cuda-runtime)")
    ap.add_argument("--table", help="the Xid catalog as a table (nvidia-xid: catalog/nvidia-xid-catalog.tsv)")
    ap.add_argument("--release", help="the release's version (pytorch, cuda-runtime, kubelet)")
    ap.add_argument("--fresh", action="store_true",
                    help="start the project's file empty instead of merging into it (then: catalog/apply.py --all)")
    args = ap.parse_args(argv)
    path = HERE / f"{args.project}.yaml"
    catalog = ProjectCatalog(project=args.project, path=path) if args.fresh else load_project(path, args.project)
    refs = args.tags if args.project in ("nccl", "gloo", "slurm") else args.tags[:1] if args.project == "kubelet" else [None]
    for ref in refs:
        found, provenance = mine_release(args.project, args, ref)
        release = release_of_tag(ref) if ref and ref != "HEAD" and args.project != "kubelet" else \
            (args.release or provenance.get("commit", "")[:10])
        found = merge_cpp_files(catalog, release, provenance, found)
        catalog.add_release(release, provenance,
                            [Template.mined(args.project, f.pop("release", release), **f) for f in found])
        print(f"{args.project} {release}: {len({template_key(f['message']) for f in found})} templates")
    save_project(catalog, HERE / f"{args.project}.yaml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
