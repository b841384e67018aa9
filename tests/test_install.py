"""The one wheel: built by setuptools with the index inside, installed into a fresh
virtual environment with no network and no index server, used from a folder that
is not a checkout."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from generator.wheel import build_wheel

ROOT = Path(__file__).resolve().parent.parent
OOM_LOG = ROOT / "entries" / "cuda" / "cuda-out-of-memory" / "deepspeed-rank3.log"
# The wheel is the engine plus the index, which grows with the encyclopedia, so the
# budget has two parts: the code and metadata (140 KB compressed today, 112 entries)
# and the index per entry (2.3 KB compressed per entry today).
MAX_CODE_BYTES = 170_000
MAX_INDEX_BYTES_PER_ENTRY = 2_800


@pytest.fixture(scope="module")
def wheel(tmp_path_factory, index) -> Path:
    # after `index`: the build bundles the cached index it writes (build_wheel reuse_index)
    return build_wheel(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="module")
def fresh(wheel, tmp_path_factory):
    """A new venv with only the wheel in it; pip told to use no index and no config."""
    base = tmp_path_factory.mktemp("fresh")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "PIP_CONFIG_FILE": os.devnull,
           "HOME": str(base), "PIP_NO_INDEX": "1"}
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet", "--no-index", "--no-deps",
                    "--disable-pip-version-check", str(wheel)], check=True, env=env)
    work = base / "work"          # not a checkout: no entries/ above it
    work.mkdir()

    def run(*args, extra_env=None):
        return subprocess.run([str(venv / "bin" / args[0]), *args[1:]], cwd=work,
                              env=dict(env, **(extra_env or {})), capture_output=True, text=True,
                              timeout=300)
    run.work = work
    return run


def test_wheel_holds_the_engine_and_this_releases_index_only(wheel, index):
    zf = zipfile.ZipFile(wheel)
    names = zf.namelist()
    assert wheel.name.endswith("-py3-none-any.whl")
    index_bytes = zf.getinfo("faildex/index.json").compress_size
    assert wheel.stat().st_size - index_bytes < MAX_CODE_BYTES, wheel.stat().st_size - index_bytes
    assert index_bytes < MAX_INDEX_BYTES_PER_ENTRY * len(index["entries"]), index_bytes
    assert all(n.startswith(("faildex/", "faildex-")) for n in names), names
    # no test data, no entries' YAML or logs, no generator (a repository tool)
    assert not [n for n in names if n.endswith((".log", ".yaml", ".gz")) or "tests/" in n
                or "generator" in n], names
    bundled = json.loads(zf.read("faildex/index.json"))
    assert bundled["digest"] == index["digest"]
    assert set(bundled["entries"]) == set(index["entries"])
    meta = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    requires = [line for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    assert requires and all("extra ==" in r for r in requires), requires   # nothing at run time
    entry_points = zf.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "faildex = faildex.command:main" in entry_points
    # `faildex fleet report` from an install: every template the page extends or includes, its
    # script and the site's CSS (the wheel once held fleet.html.j2 alone, which extends _page)
    fleet = {p.name for p in (ROOT / "site_template" / "fleet").iterdir() if p.is_file()} | {"faildex.css"}
    assert {"_page.html.j2", "job.html.j2", "jobs.html.j2", "fleet-sort.js"} <= fleet
    assert {f"faildex/fleet/{n}" for n in fleet} <= set(names), sorted(n for n in names if "/fleet/" in n)


def test_wheel_is_reproducible(wheel, entries, tmp_path):
    # The fixture's wheel bundles the checkout's cached index; a build without one (a clean
    # checkout, an sdist) runs the same cached_index_path: validate_once (the `entries`
    # fixture ran it) and build_index, written as below. Compiled afresh, the index is the
    # cache's bytes, so the cache cannot drift from a build; and a second build of the wheel
    # gives the same bytes. (Building the second wheel without the cache validated every
    # entry again inside setuptools: 94 s idle in the sixteenth session, 296 s in a loaded run today.)
    from generator.index import build_index, cached_index_path
    fresh = json.dumps(build_index(ROOT, entries), sort_keys=True, separators=(",", ":"))
    assert fresh == cached_index_path(ROOT).read_text(encoding="utf-8")
    again = build_wheel(tmp_path / "again")
    assert again.read_bytes() == wheel.read_bytes()


def test_fresh_install_diagnoses_from_any_folder(fresh, index):
    log = fresh.work / "job.log"
    log.write_bytes(OOM_LOG.read_bytes())
    p = fresh("faildex", "diagnose", "--format", "json", "job.log")
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["primary"]["id"] == "cuda-out-of-memory"
    assert report["index"] == index["digest"]
    assert report["index_entries"] == len(index["entries"])
    assert report["release"]
    v = fresh("faildex", "--version")
    assert v.returncode == 0
    assert f"index {index['digest']} · {len(index['entries'])} entries (bundled)" in v.stdout
    assert "prefilter passes (pip install 'faildex[fast]'" in v.stdout   # no RE2 in a bare install
    m = fresh("python", "-m", "faildex", "diagnose", "job.log")
    assert m.returncode == 0 and "cuda-out-of-memory" in m.stdout, m.stderr


def test_fresh_install_refuses_a_damaged_index_and_takes_a_good_one(fresh, index):
    good = fresh.work / "newer-index.json"
    good.write_text(json.dumps(index))
    p = fresh("faildex", "--version", extra_env={"FAILDEX_INDEX": str(good)})
    assert str(good) in p.stdout and index["digest"] in p.stdout
    damaged = dict(index, entries=dict(list(index["entries"].items())[:-1]))
    bad = fresh.work / "damaged-index.json"
    bad.write_text(json.dumps(damaged))
    (fresh.work / "job.log").write_bytes(OOM_LOG.read_bytes())
    p = fresh("faildex", "diagnose", "--index", str(bad), "job.log")
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "digest mismatch" in p.stderr, p.stderr
    p = fresh("faildex", "triage", "job.log", extra_env={"FAILDEX_INDEX": str(bad)})
    assert p.returncode == 2 and "digest mismatch" in p.stderr


def test_fresh_install_has_no_repository_tools_and_says_so(fresh):
    p = fresh("faildex", "validate")
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "repository tool" in p.stderr, p.stderr
    p = fresh("faildex", "fleet", "report", "x.jsonl", "-o", "out")
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr


def test_fresh_install_triages(fresh):
    job = fresh.work / "jobs" / "4242"
    job.mkdir(parents=True)
    (job / "rank3.log").write_bytes(OOM_LOG.read_bytes())
    p = fresh("faildex", "triage", "jobs/4242", "-o", "t.jsonl", "--jobs", "1")
    assert p.returncode == 0, p.stderr
    line = json.loads((fresh.work / "t.jsonl").read_text())
    assert line["job"] == "4242" and line["primary"]["id"] == "cuda-out-of-memory"
