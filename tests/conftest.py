"""Shared fixtures: the repo root, the validated entries and the compiled index."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "pyodide_app"))
sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def entries():
    from generator.validate import validate
    found, problems = validate(ROOT)
    assert not problems, "entries do not validate:\n" + "\n".join(map(str, problems))
    return found


@pytest.fixture(scope="session")
def index(entries):
    from generator.index import build_index
    return build_index(ROOT, entries)
