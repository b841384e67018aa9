"""Shared fixtures: the repo root, the validated entries and the compiled index."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "pyodide_app"))
sys.path.insert(0, str(ROOT))


# `make test` runs the suite in parallel (pytest-xdist): each test file runs whole in one
# worker (its module-scoped fixtures are made once), and the files that need the built site
# share one worker, so the site is built once.
SITE_FILES = {"test_browser.py", "test_diagnoser_assets.py", "test_diagnoser_ux.py", "test_filler.py",
              "test_site.py"}
SITE_FIXTURES = {"real_site", "fixture_site", "built", "origin"}


def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            file = nodeid.split("::", 1)[0]
            return "site" if Path(file).name in SITE_FILES else file

    return ByFile(config, log)


def pytest_collection_modifyitems(config, items):
    strays = sorted({item.path.name for item in items
                     if SITE_FIXTURES & set(getattr(item, "fixturenames", ()))} - SITE_FILES)
    if strays:
        raise pytest.UsageError(f"{', '.join(strays)} use the built site: add them to SITE_FILES in "
                                f"tests/conftest.py, or the site is built again in another worker")


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


def _build(name: str, root: Path, site_dir: Path) -> BuiltSite:
    from generator import site
    result = mkdocs_build(root, site_dir)
    assert result.returncode == 0, f"mkdocs build failed:\n{result.stdout}\n{result.stderr}"
    return BuiltSite(name, root, site_dir, site.build(root))


@pytest.fixture(scope="session")
def real_site(tmp_path_factory, entries) -> BuiltSite:
    """The repository's entries, built with `mkdocs build --strict` (they must validate:
    the `entries` fixture fails first, with every problem, when they do not)."""
    return _build("real", REPO, tmp_path_factory.mktemp("real") / "site")


@pytest.fixture(scope="session")
def fixture_site(tmp_path_factory) -> BuiltSite:
    """The fixture entries (tests/fixtures/site_entries) plus a hostile one."""
    tmp = tmp_path_factory.mktemp("fixtures")
    root = make_root(tmp / "root", FIXTURES / "site_entries", FIXTURES / "hostile")
    return _build("fixtures", root, tmp / "site")


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
