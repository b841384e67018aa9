"""The in-browser diagnoser in real Chromium (Debian's /usr/bin/chromium via Playwright),
served from 127.0.0.1: the built site, the real Pyodide, the real engine wheel."""
from __future__ import annotations

import gzip
import json
import os
import tempfile
import threading
from pathlib import Path

import pytest

from generator.validate import example_text

pytestmark = pytest.mark.browser
READY_MS = 90_000   # the `origin` and `chromium` fixtures are in conftest.py


def open_page(chromium, origin):
    # No service worker here: its first-visit download of the whole site would compete with
    # Pyodide in every test (tests/test_diagnoser_ux.py tests it, offline).
    context = chromium.new_context(accept_downloads=True, service_workers="block")
    pg = context.new_page()
    pg.requests = []   # every URL the page asks for, from navigation on
    pg.on("request", lambda r: pg.requests.append(r.url))
    pg.goto(f"{origin}/diagnose/")
    pg.wait_for_selector("[data-testid=status][data-state=ready]", timeout=READY_MS)
    return context, pg


@pytest.fixture()
def fresh_page(chromium, origin):
    """A page of its own, from navigation on."""
    context, pg = open_page(chromium, origin)
    yield pg
    context.close()


@pytest.fixture(scope="module")
def shared_page(chromium, origin):
    context, pg = open_page(chromium, origin)
    yield pg
    context.close()


@pytest.fixture()
def page(shared_page):
    """One diagnoser page for the tests that give it an input and read the report, as a
    reader diagnosing one log after another does: each starts with Clear. (A fresh page
    costs a Pyodide cold start: 2.6-2.7 s from the snapshot on this machine on 2026-12-04,
    6-9 s without.)"""
    shared_page.click("[data-testid=clear]")
    shared_page.wait_for_selector("[data-testid=status][data-state=ready]", timeout=READY_MS)
    assert shared_page.locator("#fdx-report > *").count() == 0
    return shared_page


def example(entries, entry_id: str, i: int = 0) -> str:
    e = next(e for e in entries if e.id == entry_id)
    return example_text(e, e.data["examples"][i])


def diagnose_and_wait(page, timeout: int = 120_000) -> str:
    page.click("[data-testid=diagnose]")
    page.wait_for_selector("[data-testid=primary]", timeout=timeout)
    return page.get_attribute("[data-testid=primary]", "data-entry-id")


def test_workers_start_from_the_builds_snapshot_and_without_it(chromium, origin, real_site, entries):
    # generator/pyodide_snapshot.mjs: Pyodide's memory with the engine imported, gzip'd
    manifest = json.loads((real_site.site / "assets" / "faildex" / "manifest.json").read_text())
    snapshot = real_site.site / "assets" / "faildex" / manifest["snapshot"]
    assert snapshot.read_bytes()[:2] == b"\x1f\x8b" and len(gzip.decompress(snapshot.read_bytes())) > 10 << 20
    for blocked in (False, True):
        context = chromium.new_context(service_workers="block")
        if blocked:   # a host that lost the file: the plain start, and the same engine
            context.route(f"**/{manifest['snapshot']}", lambda route: route.fulfill(status=404))
        pg = context.new_page()
        pg.goto(f"{origin}/diagnose/")
        pg.wait_for_selector("[data-testid=status][data-state=ready]", timeout=READY_MS)
        assert pg.get_attribute("[data-testid=status]", "data-snapshot") == ("0" if blocked else "1")
        pg.fill("[data-testid=log-input]", example(entries, "cuda-out-of-memory"))
        assert diagnose_and_wait(pg) == "cuda-out-of-memory"
        context.close()


def test_page_has_a_strict_csp_and_violates_nothing(chromium, origin):
    context = chromium.new_context()
    pg = context.new_page()
    messages = []
    pg.on("console", lambda m: messages.append(m.text))
    for url in ("/diagnose/", "/entries/cuda-out-of-memory/", "/errors/", "/"):
        pg.goto(origin + url)
        pg.wait_for_load_state("load")
    csp = pg.get_attribute('meta[http-equiv="Content-Security-Policy"]', "content")
    assert "default-src 'self'" in csp and "unsafe-eval'" not in csp.replace("wasm-unsafe-eval'", "")
    pg.goto(origin + "/diagnose/")
    pg.wait_for_selector("[data-testid=status][data-state=ready]", timeout=READY_MS)
    assert not [m for m in messages if "Content Security Policy" in m], messages
    context.close()


@pytest.mark.parametrize("entry_id", ["torchrun-rendezvous-timeout", "cuda-out-of-memory",
                                      "nccl-connection-closed-by-peer"])
def test_paste_an_example_names_its_entry(page, entries, entry_id):
    page.fill("[data-testid=log-input]", example(entries, entry_id))
    assert diagnose_and_wait(page) == entry_id
    link = page.locator("[data-testid=primary] a").first.get_attribute("href")
    assert link.endswith(f"/entries/{entry_id}/")


def test_two_rank_files_first_failure_is_primary(page, entries, tmp_path):
    rank3 = tmp_path / "rank3.log"
    rank0 = tmp_path / "rank0.log"
    rank3.write_text(example(entries, "cuda-out-of-memory"))
    rank0.write_text(example(entries, "nccl-watchdog-timeout"))
    page.set_input_files("[data-testid=file-input]", [str(rank0), str(rank3)])
    assert diagnose_and_wait(page) == "cuda-out-of-memory"
    collateral = page.locator("[data-testid=collateral] li").evaluate_all(
        "els => els.map(e => e.dataset.entryId)")
    assert "nccl-watchdog-timeout" in collateral
    # one lane per rank; the cause (rank 3's OOM) is marked in its own lane
    cause = page.locator("[data-testid=timeline] .fdx-lane", has=page.locator(".fdx-mark[data-role=initiating]"))
    assert cause.count() == 1 and cause.locator(".fdx-lane-name").inner_text() == "rank 3"


def test_empty_and_binary_files_get_a_clear_message(page, tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    binary = tmp_path / "model.pt"
    binary.write_bytes(bytes(range(256)) * 2048)
    page.set_input_files("[data-testid=file-input]", [str(empty), str(binary)])
    assert diagnose_and_wait(page) == ""
    notes = page.inner_text("[data-testid=notes]")
    assert "empty.log: the input is empty" in notes
    assert "model.pt: this looks like binary data" in notes


def test_hostile_log_text_is_shown_not_run(page, entries):
    hostile = ('<img src=x onerror="window.__pwned=1">\n<script>window.__pwned=2</script>\n'
               + example(entries, "torchrun-rendezvous-timeout")
               + '\nRuntimeError: <img src=y onerror="window.__pwned=3"> <b>bold</b>\n')
    page.fill("[data-testid=log-input]", hostile)
    assert diagnose_and_wait(page) == "torchrun-rendezvous-timeout"
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#fdx-report img").count() == 0
    assert page.locator("#fdx-report script").count() == 0
    assert page.locator("#fdx-report b:text('bold')").count() == 0


def test_gz_input_and_truncated_gz(page, entries, tmp_path):
    text = example(entries, "torchrun-rendezvous-timeout").encode()
    ok = tmp_path / "rank1.log.gz"
    ok.write_bytes(gzip.compress(text + b"".join(b"noise %d\n" % i for i in range(50000))))
    page.set_input_files("[data-testid=file-input]", [str(ok)])
    assert diagnose_and_wait(page) == "torchrun-rendezvous-timeout"
    page.click("[data-testid=clear]")
    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(ok.read_bytes()[:-3000])
    page.set_input_files("[data-testid=file-input]", [str(cut)])
    assert diagnose_and_wait(page) == "torchrun-rendezvous-timeout"
    assert "truncated" in page.inner_text("[data-testid=notes]")


def test_big_log_progress_cancel_and_rescan(fresh_page, entries, tmp_path):
    from bench.loggen import generate
    big = tmp_path / "big.log"
    generate(big, 300 << 20, seed=1, failures=[example(entries, "cuda-out-of-memory")])
    fresh_page.set_input_files("[data-testid=file-input]", [str(big)])
    fresh_page.click("[data-testid=diagnose]")
    fresh_page.wait_for_function(
        "() => { const p = document.querySelector('[data-testid=progress]'); return p.value > 0 && p.value < p.max; }",
        timeout=60_000)
    fresh_page.click("[data-testid=cancel]")
    fresh_page.wait_for_selector("[data-testid=status][data-state=cancelled]", timeout=60_000)
    assert fresh_page.locator("[data-testid=primary]").count() == 0
    fresh_page.click("[data-testid=clear]")
    fresh_page.fill("[data-testid=log-input]", example(entries, "torchrun-rendezvous-timeout"))
    assert diagnose_and_wait(fresh_page) == "torchrun-rendezvous-timeout"


def test_no_request_leaves_the_origin(fresh_page, entries, origin):
    fresh_page.fill("[data-testid=log-input]", example(entries, "cuda-out-of-memory"))
    diagnose_and_wait(fresh_page)
    fresh_page.click("[data-testid=copy-markdown]")
    assert fresh_page.requests, "no requests recorded"
    foreign = [u for u in fresh_page.requests if not (u.startswith(origin + "/") or u.startswith("blob:")
                                                or u.startswith("data:"))]
    assert foreign == []


def test_works_with_every_other_host_blocked(chromium, origin, entries):
    context = chromium.new_context()
    blocked = []

    def gate(route):
        url = route.request.url
        if url.startswith(origin + "/") or url.startswith(("blob:", "data:")):
            route.continue_()
        else:
            blocked.append(url)
            route.abort()

    context.route("**/*", gate)
    pg = context.new_page()
    pg.goto(f"{origin}/diagnose/")
    pg.wait_for_selector("[data-testid=status][data-state=ready]", timeout=READY_MS)
    pg.fill("[data-testid=log-input]", example(entries, "nccl-watchdog-timeout"))
    assert diagnose_and_wait(pg) == "nccl-watchdog-timeout"
    assert blocked == []
    context.close()


def test_markdown_is_redacted_and_share_link_reopens(fresh_page, entries, chromium, origin):
    log = ("[rank0]: started on gpu-a17.cluster.example.com"
           + "\nhostname=gpu-a17.cluster.example.com /home/alice/train.py HF_TOKEN=hf_" + "a" * 30
           + "\ntorch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n")
    fresh_page.fill("[data-testid=log-input]", log)
    diagnose_and_wait(fresh_page)
    fresh_page.click("[data-testid=copy-markdown]")
    md = fresh_page.input_value("[data-testid=markdown-text]")
    assert "RendezvousTimeoutError" in md and "<user-1>" in md
    for secret in ("alice", "gpu-a17", "hf_aaaa"):
        assert secret not in md
    fresh_page.click("[data-testid=share]")
    fresh_page.wait_for_function("() => document.querySelector('[data-testid=share-url]').value !== ''")
    url = fresh_page.input_value("[data-testid=share-url]")
    assert url.startswith(f"{origin}/diagnose/#share=")
    other = chromium.new_page()
    other.goto(url)
    other.wait_for_selector("[data-testid=primary]", timeout=READY_MS)
    assert other.get_attribute("[data-testid=primary]", "data-entry-id") == "torchrun-rendezvous-timeout"
    assert "alice" not in other.inner_text("#fdx-report")
    other.close()


def test_download_json_is_the_report(page, entries):
    page.fill("[data-testid=log-input]", example(entries, "cuda-out-of-memory"))
    diagnose_and_wait(page)
    with page.expect_download() as dl:
        page.click("[data-testid=download-json]")
    report = json.loads(Path(dl.value.path()).read_text())
    assert report["faildex_report"] == 1 and report["primary"]["id"] == "cuda-out-of-memory"


def test_try_an_example(page):
    options = page.locator("[data-testid=example] option").evaluate_all("els => els.map(e => e.value)")
    choice = next(o for o in options if o)
    page.select_option("[data-testid=example]", choice)
    assert diagnose_and_wait(page) == choice


@pytest.mark.parametrize("log,rank,kind,scope", [
    ("data/hang/nccl-logs/vllm-23448-rank-behind.log", "3", "behind", "global"),  # real: progress lines
    ("data/hang/nccl-logs/constructed-four-ranks-stack.log", "15", "op-mismatch", "global"),  # failed stacks
    # real, LlamaFactory#2424: old lines that print only the rank within the process group
    ("corpus/dev/053-nccl-watchdog-tokenize-30min.log", "0", "missing", "group"),
])
def test_pasted_watchdog_lines_name_the_suspect_rank(page, root, log, rank, kind, scope):
    # tests/data/hang/nccl-logs: the lines only suspects.SCAN_ANCHORS catch, found by the
    # worker's JavaScript anchor search, and a stack read from the lines after its header
    text = (root / "tests" / log).read_text()
    page.fill("[data-testid=log-input]", text)
    diagnose_and_wait(page)
    suspects = page.locator("[data-testid=suspects] > ul > li")
    assert suspects.count() == 1
    assert suspects.first.get_attribute("data-rank") == rank
    assert suspects.first.get_attribute("data-kind") == kind
    assert suspects.first.get_attribute("data-rank-scope") == scope
    assert ("within its process group" in suspects.first.inner_text()) == (scope == "group")


def drop_files(page, paths) -> None:
    """Drop files on the page as binary File objects, named as the browser names them."""
    import base64
    files = [{"name": p.name, "b64": base64.b64encode(p.read_bytes()).decode()} for p in paths]
    page.evaluate("""files => {
        const dt = new DataTransfer();
        for (const f of files) {
            const bytes = Uint8Array.from(atob(f.b64), c => c.charCodeAt(0));
            dt.items.add(new File([bytes], f.name, {type: "application/octet-stream"}));
        }
        const zone = document.querySelector("#fdx-drop");
        zone.dispatchEvent(new DragEvent("drop", {dataTransfer: dt, bubbles: true, cancelable: true}));
    }""", files)


def test_dropped_flight_recorder_dumps_name_the_suspect_rank(page, root):
    # The real pickle dumps of tests/data/hang/op (rank 3 broadcasts where the others
    # all_reduce), dropped on the page as binary files.
    drop_files(page, sorted((root / "tests" / "data" / "hang" / "op" / "fr").iterdir()))
    diagnose_and_wait(page)
    suspects = page.locator("[data-testid=suspects] > ul > li")
    assert suspects.count() == 1
    assert suspects.first.get_attribute("data-rank") == "3"
    assert suspects.first.get_attribute("data-kind") == "op-mismatch"
    assert "gloo:broadcast" in suspects.first.inner_text()
    # one sentence opens the report's head (who, before what); the suspects and their
    # evidence come after the heading
    verdict = page.locator("[data-testid=verdict]")
    assert verdict.inner_text().startswith("Rank 3 is the first suspect: ")
    assert page.evaluate("""() => {
        const v = document.querySelector('[data-testid=verdict]');
        const s = document.querySelector('[data-testid=suspects]');
        const h = document.querySelector('[data-testid=primary] h2');
        const F = Node.DOCUMENT_POSITION_FOLLOWING;
        return !!(v && s && h && (v.compareDocumentPosition(h) & F) && (h.compareDocumentPosition(s) & F));
    }""")


def test_a_dropped_nccl_ras_json_status_names_the_rank_behind(page, root):
    # `ncclras -f json` as NCCL 2.30.7 prints it (tests/data/ras): rank 5 launched one
    # AllReduce fewer than the other seven; read whole as a dump, not scanned as a log
    drop_files(page, [root / "tests" / "data" / "ras" / "ras-2.30.7-rank5-behind.json"])
    assert diagnose_and_wait(page) == "collective-hang-one-rank-stuck"
    suspects = page.locator("[data-testid=suspects] > ul > li")
    assert suspects.count() == 1
    assert (suspects.first.get_attribute("data-rank"), suspects.first.get_attribute("data-kind")) == ("5", "behind")
    assert page.locator("[data-testid=verdict]").inner_text().startswith("Rank 5 on 10.0.77.185 is the first suspect")


def test_a_phone_reads_who_started_it_first(chromium, origin, root):
    # A real torchrun hang (tests/data/job: rank 2 sleeps, ranks 0 and 1 time out, torchrun's
    # Root Cause block names rank 1) dropped on a 390 px phone: the verdict sentence, the rank
    # rows and the next step come before the quoted evidence, and nothing is wider than the screen.
    context = chromium.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True,
                                   service_workers="block")
    pg = context.new_page()
    try:
        pg.goto(f"{origin}/diagnose/")
        pg.wait_for_selector("[data-testid=status][data-state=ready]", timeout=READY_MS)
        # the paste box and the Diagnose button are on the first screen; no keyboard hint on a touch screen
        bottoms = pg.evaluate("""() => ['log-input', 'diagnose'].map(t =>
            document.querySelector(`[data-testid=${t}]`).getBoundingClientRect().bottom)""")
        assert max(bottoms) < 844, bottoms
        assert not pg.locator("#fdx-keys").is_visible()
        drop_files(pg, [root / "tests" / "data" / "job" / "hang-rank2-console.log"])
        assert diagnose_and_wait(pg) == "collective-hang-one-rank-stuck"
        verdict = pg.locator("[data-testid=verdict]").inner_text()
        assert verdict.startswith("Rank 2 stopped responding: ranks 0,1 timed out waiting for it")
        assert "names rank 1, a victim" in verdict
        rows = pg.locator("[data-testid=rank-rows] > li")
        assert rows.first.get_attribute("data-ranks") == "2" and rows.count() == 3
        order = pg.evaluate("""() => ['verdict', 'rank-rows', 'next-action', 'suspects'].map(t =>
            document.querySelector(`[data-testid=${t}]`)).map(e => e ? e.getBoundingClientRect().top : -1)""")
        assert -1 not in order and order == sorted(order), order
        # the sentence is on the first screen, and the page does not scroll sideways
        assert order[0] < 844
        assert pg.evaluate("() => document.documentElement.scrollWidth") <= 390
        # no noise: a small input gets no "0.0 MB in 0.17 s", the rank rows replace the findings' lanes
        assert pg.inner_text("[data-testid=progress-text]") == ""
        assert pg.locator("[data-testid=timeline]").count() == 0
        out = Path(os.environ.get("FAILDEX_SCREENSHOTS", Path(tempfile.gettempdir()) / "faildex-screenshots"))
        out.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(out / "diagnose-hang-phone.png"), full_page=False)
    finally:
        context.close()


HANG_SCENARIOS = ("skip", "late", "op", "size", "dtype", "two-groups")


@pytest.mark.parametrize("scenario", HANG_SCENARIOS)
def test_a_dropped_hang_folder_names_its_expected_suspects(page, root, scenario):
    # Everything one real hang of tests/data/hang left (every rank's log, both forms of
    # flight-recorder dump, py-spy and faulthandler stacks), dropped together: the page
    # lists the suspects its expected.yaml gives for all the evidence, in that order.
    from ruamel.yaml import YAML
    folder = root / "tests" / "data" / "hang" / scenario
    want = YAML(typ="safe").load((folder / "expected.yaml").read_text())["suspects"]["all"]
    drop_files(page, sorted(p for p in folder.rglob("*") if p.is_file() and p.parent != folder))
    diagnose_and_wait(page)
    got = page.locator("[data-testid=suspects] > ul > li").evaluate_all(
        "els => els.map(e => [Number(e.dataset.rank), e.dataset.kind, e.dataset.rankScope])")
    assert got == [[rank, kind, "global"] for rank, kind in want]


# ---------------------------------------------------------------- paste an error, get the entry

# measured (bench/search.py --find-only): 97.5 % first, 749 of 749 in the top 3; 2026-12-07
# (find.js over search.json in Node, as _ranked does): 99.0 % first, 1,664 of 1,664 in the top 3
FIRST_SHARE = 0.965    # right entry first, over all queries; the issue asks for 0.95
                       # and the right entry in the top 3 for every query


def _header_hits(pg, query: str) -> list[str]:
    pg.fill("[data-md-component=search-query]", query)
    pg.wait_for_function(
        "q => document.querySelector('[data-testid=find-header]').getAttribute('data-query') === q",
        arg=query, timeout=10_000)
    return pg.locator("[data-testid=find-header] li").evaluate_all("els => els.map(e => e.dataset.entryId)")


def _ranked(pg, queries: list[str]) -> list[list[str]]:
    """The entries the page's own finder (find.js, in Chromium, over the served search.json)
    ranks first for each query, as the header shows them (its five), in one call."""
    return pg.evaluate("""async qs => {
        const data = await (await fetch(new URL('../assets/faildex/search.json', location.href))).json();
        const f = new window.FaildexFinder(data);
        return qs.map(q => q.trim() ? f.rank(q, 5).map(h => h.id) : []); }""", queries)


# Typing a query into the header and reading its list back takes ~0.1 s (three round trips to
# the browser); 1,400 queries took ~150 s of a CI run. So every query is ranked in one call by
# the page's own finder, and one query in SAMPLE is also typed into the header, which must
# list exactly that ranking: the figures are the header's.
SAMPLE = 8


def _header_figures(pg, rows) -> tuple[list[list[str]], list]:
    ranked = _ranked(pg, [query for _, query, _ in rows])
    typed = [(query, _header_hits(pg, query), hits) for (_, query, _), hits in list(zip(rows, ranked))[::SAMPLE]]
    return ranked, [t for t in typed if t[1] != t[2]]


def test_header_search_puts_the_right_entry_first(chromium, origin, entries):
    from searchkit import queries
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.goto(f"{origin}/errors/")
    pg.click("[data-md-component=search-query]")
    rows = queries(entries)
    assert len(rows) >= 200 and sum(kind == "short" for kind, _, _ in rows) >= 40
    ranked, differ = _header_figures(pg, rows)
    context.close()
    assert not differ, differ
    first = sum(bool(hits) and hits[0] in want for (_, _, want), hits in zip(rows, ranked))
    misses = [(kind, query, want[0], hits[:3]) for (kind, query, want), hits in zip(rows, ranked)
              if not set(hits[:3]) & set(want)]
    assert first / len(rows) >= FIRST_SHARE, f"right entry first for {first}/{len(rows)}"
    assert not misses, misses


# the held-out queries (tests/corpus/search-heldout: written from public threads by a helper
# that never read the entries; the search is never tuned by reading them), measured by
# bench/search.py --heldout --find-only on 2026-12-05: 83.2 % first, 92.9 % in the top 3 before
# the day's search work; 85.8 % and 93.4 % after it (work done on tests/corpus/search-dev);
# 2026-12-07, 197 queries: 83.2 % / 91.4 % before the eighteenth session's search work, 85.8 % /
# 91.9 % after it
HELDOUT_FIRST, HELDOUT_TOP3 = 0.84, 0.90


def test_header_search_on_held_out_queries(chromium, origin):
    from bench.search import heldout
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.goto(f"{origin}/errors/")
    pg.click("[data-md-component=search-query]")
    rows = heldout()
    ranked, differ = _header_figures(pg, rows)
    context.close()
    # figures only: a held-out query read to find out why it missed would no longer be held out
    assert not differ, f"{len(differ)} held-out queries: the header lists another ranking than find.js"
    first = sum(bool(hits) and hits[0] in want for (_, _, want), hits in zip(rows, ranked))
    top3 = sum(bool(set(hits[:3]) & set(want)) for (_, _, want), hits in zip(rows, ranked))
    assert len(rows) >= 150
    assert first / len(rows) >= HELDOUT_FIRST and top3 / len(rows) >= HELDOUT_TOP3, (first, top3, len(rows))


def test_home_paste_box_names_the_entry_and_enter_opens_it(chromium, origin, entries):
    from searchkit import signature_lines
    e = next(e for e in entries if e.id == "elastic-child-failed")
    _, line, _ = signature_lines(e)[0]
    context = chromium.new_context()
    pg = context.new_page()
    pg.goto(origin + "/")
    pg.fill("[data-testid=paste-input]", "[rank3]: " + line)
    pg.wait_for_selector("[data-testid=paste-hits] li")
    assert pg.locator("[data-testid=paste-hits] li").first.get_attribute("data-entry-id") == e.id
    # the box comes before the categories
    assert pg.evaluate("""() => document.querySelector('[data-testid=paste-box]')
        .compareDocumentPosition(document.querySelector('#categories')) & Node.DOCUMENT_POSITION_FOLLOWING""")
    # Enter in the box opens the first match
    pg.press("[data-testid=paste-input]", "Enter")
    pg.wait_for_url(f"{origin}/entries/elastic-child-failed/")
    pg.goto(origin + "/")
    _header_hits(pg, "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:")
    pg.press("[data-md-component=search-query]", "Enter")
    pg.wait_for_url(f"{origin}/entries/elastic-child-failed/")
    context.close()


def test_error_index_filter_takes_a_whole_line(chromium, origin, entries):
    from searchkit import signature_lines
    e = next(e for e in entries if e.id == "torchrun-rendezvous-timeout")
    _, line, _ = signature_lines(e)[0]
    context = chromium.new_context()
    pg = context.new_page()
    pg.goto(origin + "/errors/")
    pg.fill("[data-fdx-filter=text]", "2026-12-02 17:16:50,123 ERROR " + line)
    pg.wait_for_function("() => !document.querySelector('[data-fdx-count]').textContent.startsWith('0 ')")
    shown = pg.locator("table[data-fdx-table=errors] tbody tr:not([hidden])").evaluate_all(
        "els => els.map(e => e.dataset.entry)")
    assert e.id in shown and len(shown) <= 10
    context.close()


# ---------------------------------------------------------------- the pages as a reader sees them

SHOTS = Path(os.environ.get("FAILDEX_SCREENSHOTS") or Path(tempfile.gettempdir()) / "faildex-screenshots")


def test_first_move_is_on_the_first_screen_and_commands_are_not_under_the_copy_button(chromium, origin, entries):
    """Every entry page, on a 1280x800 desktop and a 390x844 phone: the first fix step and
    its command end above the fold on desktop, and start on the first screen on the phone;
    no command runs under Material's copy button (it wraps, and keeps a right margin wider
    than the button). Each page is loaded once and measured at both sizes (the viewport
    changes under it, as when a window is resized). Screenshots go to $FAILDEX_SCREENSHOTS
    (default: a folder in the temp dir)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = "torchrun-rendezvous-timeout"
    sizes = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 390, "height": 844}}
    below = {name: [] for name in sizes}
    clipped = {name: [] for name in sizes}
    # no service worker: its first-visit download of the whole site would compete with
    # the page loads (tests/test_diagnoser_ux.py tests it); no search index either: each
    # page load would fetch it and build Material's lunr index in a worker, which lays out
    # nothing (0.6 -> 0.4 s a page on 2026-12-04)
    context = chromium.new_context(viewport=sizes["desktop"], device_scale_factor=1, service_workers="block")
    context.route("**/search/search_index.json", lambda route: route.abort())
    pg = context.new_page()
    order = ["desktop", "phone"]
    for e in sorted(entries, key=lambda e: e.id):
        pg.goto(f"{origin}/entries/{e.id}/")
        for name in order:
            size = sizes[name]
            pg.set_viewport_size(size)
            # the layout after a resize settles over a few frames (Material reacts to the resize
            # event; a loaded machine delays it): wait until the first move stays put for 3 frames
            pg.evaluate("""() => new Promise(done => {
                const at = () => { const m = document.querySelector('.fdx-first-move');
                                   return m ? m.getBoundingClientRect().top + ':' + document.body.scrollHeight : ''; };
                let last = at(), same = 0, frames = 0;
                const tick = () => { const now = at(); same = now === last ? same + 1 : 0; last = now;
                                     if (same >= 3 || ++frames > 120) done(); else requestAnimationFrame(tick); };
                requestAnimationFrame(tick); })""")
            # [step top, step bottom, command top, command bottom] (no command: the step's)
            box = pg.evaluate("""() => { window.scrollTo(0, 0); const m = document.querySelector('.fdx-first-move');
                const s = m.querySelector('strong').getBoundingClientRect();
                const c = (m.querySelector('pre') || m.querySelector('strong')).getBoundingClientRect();
                return [s.top, s.bottom, c.top, c.bottom]; }""")
            # desktop: the whole step and command above the fold; phone: both start on it
            lowest = max(box[1], box[3]) if name == "desktop" else max(box[0], box[2])
            if lowest > size["height"]:
                below[name].append((e.id, box))
            clipped[name] += [(e.id, c) for c in pg.evaluate("""() => Array.from(document.querySelectorAll(
                '.fdx-first-move pre, .fdx-fix pre, .fdx-confirm pre')).map(pre => {
                  const code = pre.querySelector('code'), btn = pre.querySelector('.md-clipboard');
                  const pad = parseFloat(getComputedStyle(code).paddingRight);
                  const overflow = code.scrollWidth > code.clientWidth + 1;
                  const w = btn ? btn.getBoundingClientRect().width : 0;
                  return (overflow || pad < w) ? code.textContent.slice(0, 60) : null;
                }).filter(Boolean)""")]
            if e.id == shot:
                pg.screenshot(path=str(SHOTS / f"entry-{name}.png"))
        order.reverse()      # the next page starts at the size this one ended with
    context.close()
    assert len(entries) > 50
    for name in sizes:
        assert below[name] == [], (name, below[name])
        assert clipped[name] == [], (name, clipped[name])
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    pg = context.new_page()
    pg.goto(origin + "/")
    pg.fill("[data-testid=paste-input]", "[rank3]: torch.distributed.elastic.multiprocessing.errors.ChildFailedError:")
    pg.wait_for_selector("[data-testid=paste-hits] li")
    pg.screenshot(path=str(SHOTS / "home.png"))
    pg.goto(origin + "/categories/rendezvous/")
    pg.screenshot(path=str(SHOTS / "category-rendezvous.png"), full_page=True)
    pg.goto(origin + "/no/such/page/")
    assert pg.locator("[data-testid=not-found-links] a").count() >= 4
    pg.fill("[data-testid=paste-input]", "RendezvousTimeoutError")
    pg.wait_for_selector("[data-testid=paste-hits] li")
    assert pg.locator("[data-testid=paste-hits] li").first.get_attribute("data-entry-id") == \
        "torchrun-rendezvous-timeout"
    pg.screenshot(path=str(SHOTS / "not-found.png"))
    context.close()


def test_browser_anchor_search_finds_what_the_cli_finds(page, index, root, tmp_path):
    # The worker hands the anchor search to web/anchors.mjs (faildex.scan.set_hit_finder);
    # every candidate line, hence every finding, must be the CLI's.
    from faildex import diagnose
    logs = sorted((root / "tests" / "corpus" / "dev").glob("*.log"))
    mixed = tmp_path / "mixed.log"
    mixed.write_bytes(b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in logs))
    page.set_input_files("[data-testid=file-input]", str(mixed))
    diagnose_and_wait(page)
    with page.expect_download() as dl:
        page.click("[data-testid=download-json]")
    got = json.loads(Path(dl.value.path()).read_text())
    want = diagnose([str(mixed)], index)

    def findings(r):
        # what was found and how often; the order of collateral findings that are
        # incomparable in time may differ between CPython and Pyodide, and with it
        # which of them fill the evidence list's last slots
        return (r["primary"] and (r["primary"]["id"], r["primary"]["count"]),
                sorted((c["id"], c["count"], c["reports"]) for c in r["collateral"]),
                sorted(a["id"] for a in r["alternatives"]))
    assert findings(got) == findings(want)
    assert len(want["collateral"]) >= 5
