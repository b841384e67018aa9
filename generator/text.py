"""Text as the generator shows it: ANSI colour codes and control characters removed,
log lines split the way the engine splits them. The colour codes are the engine's
own pattern (faildex/lines.py), so the validator reads an example exactly as the
engine does; the site's paste box (assets/faildex/find.js) spells the same pattern
and a test holds the two equal."""
from __future__ import annotations

import re

from .healthy import engine_module

ANSI = engine_module("lines").ANSI
_CTRL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_NEWLINE = re.compile(r"\r\n|\r|\n")


def strip_ansi(text: str) -> str:
    """Log text without ANSI colour codes (what a signature regex is searched in)."""
    return ANSI.sub("", text)


def clean(text) -> str:
    """Text as shown: no ANSI colour codes or control characters (tabs and newlines stay)."""
    return _CTRL.sub("", strip_ansi("" if text is None else str(text)))


def log_lines(text: str) -> list[str]:
    """The lines of a log (CRLF, CR or LF), without colour codes."""
    return [strip_ansi(ln) for ln in _NEWLINE.split(text)]
