"""Shared fixtures: the repo root, the validated entries and the compiled index."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "pyodide_app"))
sys.path.insert(0, str(ROOT))


# `make test` runs the suite in parallel (pytest-xdist). Tests are spread one by one, except
# the files in BY_FILE, which run whole in one worker because their module-scoped fixtures
# are costly (a wheel and a venv, a fleet of 200 jobs, diagnoser pages with logs loaded);
# test_validate.py's small checkout (5 s) is made once per worker, and its 57 tests spread.
# The built sites are made once a run, by the first worker that needs one (real_site,
# fixture_site below), and the index once, before the workers start (pytest_configure).
BY_FILE = {"test_browser_api.py", "test_deploy.py", "test_diagnoser_ux.py", "test_fleet.py",
           "test_install.py"}
# Long tests go out first, so that none starts while the other workers are idle at the end;
# the first needs the site, so one worker builds it while the others run the long ones that
# do not. Measured by `make test --durations` on a fresh clone (2026-12-07); a name that is
# not collected is ignored.
LONG_FIRST = ["test_browser.py::test_first_move_is_on_the_first_screen",
              "test_hostile.py::test_no_signature_backtracks_catastrophically",
              "test_corpus.py::test_no_figure_rests_on_a_signature_no_example_shows",
              "test_engine.py::test_demoted_anchors_give_the_reports_of_the_plain_scan",
              "test_install.py",
              "test_catalog.py::test_every_mapped_template_survives_random_values_and_cuts",
              "test_engine.py::test_candidates_sorted_in_bulk_give_the_reports",
              "test_engine.py::test_repeated_reader_lines_give_the_reports",
              "test_browser.py::test_header_search_puts_the_right_entry_first",
              "test_browser.py::test_header_search_on_held_out_queries",
              "test_diagnoser_ux.py", "test_site.py"]


def _scope(nodeid: str) -> str:
    file = nodeid.split("::", 1)[0]
    return file if Path(file).name in BY_FILE else nodeid


def pytest_configure(config):
    """In a parallel run, the controller compiles the index (.cache/) before the workers
    start; otherwise each worker's `index` fixture would compile it at the same time. A
    problem in the entries is left to the `entries` fixture, which reports every one."""
    if hasattr(config, "workerinput") or config.getoption("dist", "no") == "no":
        return
    from generator.index import cached_index_path
    try:
        cached_index_path(ROOT)
    except SystemExit:
        pass


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class Spread(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return _scope(nodeid)

    config.option.loadscopereorder = False     # keep the order pytest_collection_modifyitems sets
    return Spread(config, log)


def pytest_collection_modifyitems(config, items):
    def rank(item):
        name = f"{item.path.name}::{item.name}"
        return next((i for i, p in enumerate(LONG_FIRST) if name.startswith(p)), len(LONG_FIRST))
    items.sort(key=rank)      # stable: within a rank, the collection's order


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def entries():
    from generator.validate import validate_once
    found, problems = validate_once(ROOT)      # make check's `faildex validate` passed: not again
    assert not problems, "entries do not validate:\n" + "\n".join(map(str, problems))
    return found


@pytest.fixture(scope="session")
def index(entries):
    """The compiled index, as `faildex diagnose` in this checkout reads it (kept in .cache/,
    rebuilt when an entry, the generator or the engine changed)."""
    import json
    from generator.index import cached_index_path
    return json.loads(cached_index_path(ROOT).read_text(encoding="utf-8"))


# ---------------------------------------------------------------- the built site (tests/test_site.py)

from dataclasses import dataclass  # noqa: E402
from functools import lru_cache  # noqa: E402

from sitekit import FIXTURES, REPO, make_root, mkdocs_build, parse_html  # noqa: E402


@dataclass(eq=False)
class BuiltSite:
    name: str
    root: Path        # the checkout whose entries/ were built
    site: Path        # the built site
    build: object     # generator.site.SiteBuild of the same entries (what the pages show)

    def page_path(self, url: str) -> Path:
        return self.site / url / "index.html" if url.endswith("/") or url == "" else self.site / url

    @lru_cache(maxsize=None)
    def html(self, url: str) -> str:
        return self.page_path(url).read_text(encoding="utf-8")

    @lru_cache(maxsize=None)
    def doc(self, url: str):
        return parse_html(self.html(url))

    def entry_url(self, entry_id: str) -> str:
        return f"entries/{entry_id}/"

    def html_pages(self) -> list[Path]:
        return sorted(self.site.rglob("*.html"))


def _shared_dir(tmp_path_factory, name: str):
    """A folder every xdist worker of this run sees (beside the workers' own temp folders),
    and one lock for all site builds: the first worker to need a site builds it, the others
    wait and read it. One lock, not one a site: both builds write the repository's .cache/
    (wheel, Pyodide snapshot, compressed copies). Without xdist, a folder of this process's
    own and no lock."""
    import contextlib
    import fcntl
    import os

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return tmp_path_factory.mktemp(name), contextlib.nullcontext()
    shared = tmp_path_factory.getbasetemp().parent
    folder = shared / f"shared-{name}"
    folder.mkdir(exist_ok=True)

    @contextlib.contextmanager
    def lock():
        with open(shared / "shared-sites.lock", "w") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            yield
    return folder, lock()


def _build(name: str, root: Path, site_dir: Path) -> BuiltSite:
    """Build once per run: a site another worker finished (its .built mark) is read as is;
    a half-built one (a worker that failed) is built again."""
    import shutil
    from generator import site
    done = site_dir.parent / f".built-{site_dir.name}"
    if not done.exists():
        shutil.rmtree(site_dir, ignore_errors=True)
        result = mkdocs_build(root, site_dir)
        assert result.returncode == 0, f"mkdocs build failed:\n{result.stdout}\n{result.stderr}"
        done.touch()
    return BuiltSite(name, root, site_dir, site.build(root))


@pytest.fixture(scope="session")
def real_site(tmp_path_factory, entries) -> BuiltSite:
    """The repository's entries, built with `mkdocs build --strict` (they must validate:
    the `entries` fixture fails first, with every problem, when they do not)."""
    folder, lock = _shared_dir(tmp_path_factory, "real")
    with lock:
        return _build("real", REPO, folder / "site")


@pytest.fixture(scope="session")
def fixture_site(tmp_path_factory) -> BuiltSite:
    """The fixture entries (tests/fixtures/site_entries) plus a hostile one."""
    folder, lock = _shared_dir(tmp_path_factory, "fixtures")
    with lock:
        root = folder / "root"
        if not (folder / ".built-site").exists():
            import shutil
            shutil.rmtree(root, ignore_errors=True)
            make_root(root, FIXTURES / "site_entries", FIXTURES / "hostile")
        return _build("fixtures", root, folder / "site")


@pytest.fixture(scope="session", params=["real", "fixture"])
def built(request) -> BuiltSite:
    """Each built site in turn (tests that must hold for any set of entries)."""
    return request.getfixturevalue(f"{request.param}_site")


# ---------------------------------------------------------------- real Chromium (test_browser.py, test_diagnoser_ux.py)

import http.server  # noqa: E402
import threading  # noqa: E402

CHROMIUM = "/usr/bin/chromium"


class _Handler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".wasm": "application/wasm", ".mjs": "text/javascript",
                      ".js": "text/javascript", ".json": "application/json"}

    def log_message(self, *args):
        pass

    def send_error(self, code, message=None, explain=None):
        """A missing page gets the site's 404.html, as static hosts serve it."""
        page = Path(self.directory) / "404.html"
        if code != 404 or not page.is_file():
            return super().send_error(code, message, explain)
        body = page.read_bytes()
        self.send_response(404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


@pytest.fixture(scope="session")
def origin(real_site):
    handler = lambda *a, **k: _Handler(*a, directory=str(real_site.site), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture(scope="session")
def chromium():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (see .ci/run)")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()
