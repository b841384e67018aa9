"""The in-browser diagnoser in real Chromium (Debian's /usr/bin/chromium via Playwright),
served from 127.0.0.1: the built site, the real Pyodide, the real engine wheel."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from generator.validate import example_text

pytestmark = pytest.mark.browser
READY_MS = 90_000   # the `origin` and `chromium` fixtures are in conftest.py


@pytest.fixture()
def page(chromium, origin):
    # No service worker here: its first-visit download of the whole site would compete with
    # Pyodide in every test (tests/test_diagnoser_ux.py tests it, offline).
    context = chromium.new_context(accept_downloads=True, service_workers="block")
    pg = context.new_page()
    pg.requests = []
    pg.on("request", lambda r: pg.requests.append(r.url))
    pg.goto(f"{origin}/diagnose/")
    pg.wait_for_selector("[data-testid=status][data-state=ready]", timeout=READY_MS)
    yield pg
    context.close()


def example(entries, entry_id: str, i: int = 0) -> str:
    e = next(e for e in entries if e.id == entry_id)
    return example_text(e, e.data["examples"][i])


def diagnose_and_wait(page, timeout: int = 120_000) -> str:
    page.click("[data-testid=diagnose]")
    page.wait_for_selector("[data-testid=primary]", timeout=timeout)
    return page.get_attribute("[data-testid=primary]", "data-entry-id")


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


def test_big_log_progress_cancel_and_rescan(page, entries, tmp_path):
    from bench.loggen import generate
    big = tmp_path / "big.log"
    generate(big, 300 << 20, seed=1, failures=[example(entries, "cuda-out-of-memory")])
    page.set_input_files("[data-testid=file-input]", [str(big)])
    page.click("[data-testid=diagnose]")
    page.wait_for_function(
        "() => { const p = document.querySelector('[data-testid=progress]'); return p.value > 0 && p.value < p.max; }",
        timeout=60_000)
    page.click("[data-testid=cancel]")
    page.wait_for_selector("[data-testid=status][data-state=cancelled]", timeout=60_000)
    assert page.locator("[data-testid=primary]").count() == 0
    page.click("[data-testid=clear]")
    page.fill("[data-testid=log-input]", example(entries, "torchrun-rendezvous-timeout"))
    assert diagnose_and_wait(page) == "torchrun-rendezvous-timeout"


def test_no_request_leaves_the_origin(page, entries, origin):
    page.fill("[data-testid=log-input]", example(entries, "cuda-out-of-memory"))
    diagnose_and_wait(page)
    page.click("[data-testid=copy-markdown]")
    assert page.requests, "no requests recorded"
    foreign = [u for u in page.requests if not (u.startswith(origin + "/") or u.startswith("blob:")
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


def test_markdown_is_redacted_and_share_link_reopens(page, entries, chromium, origin):
    log = ("[rank0]: started on gpu-a17.cluster.example.com"
           + "\nhostname=gpu-a17.cluster.example.com /home/alice/train.py HF_TOKEN=hf_" + "a" * 30
           + "\ntorch.distributed.elastic.rendezvous.api.RendezvousTimeoutError\n")
    page.fill("[data-testid=log-input]", log)
    diagnose_and_wait(page)
    page.click("[data-testid=copy-markdown]")
    md = page.input_value("[data-testid=markdown-text]")
    assert "RendezvousTimeoutError" in md and "<user-1>" in md
    for secret in ("alice", "gpu-a17", "hf_aaaa"):
        assert secret not in md
    page.click("[data-testid=share]")
    page.wait_for_function("() => document.querySelector('[data-testid=share-url]').value !== ''")
    url = page.input_value("[data-testid=share-url]")
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
