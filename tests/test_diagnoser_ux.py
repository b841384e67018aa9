"""The diagnoser as a reader meets it at 3 a.m. (issue 13), in real Chromium: a report head
to act on, doubt shown as doubt, a timeline that tells the order, clean state, complete
counts, a way forward when nothing matches, accessibility, a phone, dark mode, offline.

The logs are the entries' own examples (real tool output), chosen here by what the native
engine says about them, never written for these tests; the unmatched log is a traceback
produced by running Python here."""
from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import brotli
import pytest

from generator.validate import example_text

pytestmark = pytest.mark.browser
READY_MS = 120_000
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
AXE = Path(__file__).resolve().parent.parent / "node_modules" / "axe-core" / "axe.min.js"


# ---------------------------------------------------------------- logs, chosen by the engine

@pytest.fixture(scope="module")
def engine(index):
    from faildex import Diagnosis, load_index
    loaded = load_index(json.loads(json.dumps(index)))

    def diagnose(named_texts):
        d = Diagnosis(loaded)
        for name, text in named_texts:
            d.feed(name, text.encode())
            d.close(name, None)
        return d.report()
    return diagnose


@pytest.fixture(scope="module")
def examples(entries):
    """(entry id, example number, text) of every example small enough to paste."""
    out = []
    for e in entries:
        for k, ex in enumerate(e.data["examples"]):
            text = example_text(e, ex) or ""
            if 0 < len(text) < 20_000:
                out.append((e.id, k, text))
    return out


def pick(examples, engine, want):
    for eid, k, text in examples:
        r = engine([("pasted.log", text)])
        if r["primary"] and want(r):
            return text, r
    pytest.fail("no entry example gives such a report; the engine or the entries changed")


def watchdog_example(entries) -> str:
    e = next(e for e in entries if e.id == "nccl-watchdog-timeout")
    return example_text(e, e.data["examples"][0])


def timed_pair(examples, engine, entries):
    """A watchdog timeout log plus another file whose failure came earlier, every timeline
    item timed: the engine must call the other file's failure the cause."""
    wd = watchdog_example(entries)
    for eid, k, text in examples:
        if eid == "nccl-watchdog-timeout":
            continue
        r = engine([("a-rank0.log", wd), ("b-rank1.log", text)])
        tl = r["timeline"]
        if not r["primary"] or r["primary"]["id"] == "nccl-watchdog-timeout" or not all("ts" in t for t in tl):
            continue
        cause = [t["ts"] for t in tl if t["role"] == "initiating"]
        after = [t["ts"] for t in tl if t["role"] == "collateral"]
        if cause and after and max(cause) < min(after):
            return wd, text, r
    pytest.fail("no example pairs with the watchdog timeout as an earlier, timed cause")


def one_rank(text: str, rank: int, pod: str) -> str:
    """rank 0's lines of a torchrun log as rank `rank` prints them, behind `kubectl logs
    --prefix` (each rank of a real job prints the same watchdog report with its own number)."""
    lines = [ln for ln in text.splitlines() if ln.startswith("[rank0]:")]
    lines = [re.sub(r"\b([Rr]ank)( ?)0\b", lambda m: f"{m.group(1)}{m.group(2)}{rank}", ln) for ln in lines]
    return "".join(f"[pod/{pod}/trainer] {ln}\n" for ln in lines)


# ---------------------------------------------------------------- pages

def open_diagnoser(chromium, origin, viewport=DESKTOP, **ctx):
    context = chromium.new_context(viewport=viewport, accept_downloads=True,
                                   service_workers=ctx.pop("service_workers", "block"), **ctx)
    page = context.new_page()
    page.goto(f"{origin}/diagnose/")
    page.wait_for_selector("[data-testid=status][data-state=ready]", timeout=READY_MS)
    return context, page


@pytest.fixture(scope="module")
def app(chromium, origin):
    """One diagnoser page for the tests below; each starts with Clear."""
    context, page = open_diagnoser(chromium, origin,
                                   permissions=["clipboard-read", "clipboard-write"])
    yield page
    context.close()


@pytest.fixture()
def fresh(app):
    app.click("[data-testid=clear]")
    app.set_viewport_size(DESKTOP)
    return app


def diagnose(page, how="click", timeout=180_000):
    if how == "keys":
        page.focus("[data-testid=log-input]")
        page.keyboard.press("Control+Enter")
    else:
        page.click("[data-testid=diagnose]")
    page.wait_for_selector("[data-testid=status][data-state=done]", timeout=timeout)
    return page.locator("[data-testid=primary]")


def files(tmp_path, named):
    paths = []
    for name, text in named:
        p = tmp_path / name
        p.write_text(text)
        paths.append(str(p))
    return paths


# ---------------------------------------------------------------- 1. act at a glance

def test_ctrl_enter_diagnoses_and_the_head_is_in_view_and_focused(fresh, examples, engine):
    text, r = pick(examples, engine, lambda r: r["next_action"] and r["next_action"].get("command"))
    fresh.fill("[data-testid=log-input]", "\n" * 200 + text)   # a long paste: the report is far below
    head = diagnose(fresh, how="keys")
    assert head.get_attribute("data-entry-id") == r["primary"]["id"]
    assert fresh.evaluate("document.activeElement.dataset.testid") == "primary"
    box = head.bounding_box()
    assert 0 <= box["y"] < DESKTOP["height"] / 2, box
    # failure, confidence in words, the rank/host slot, the next action and its command
    assert head.locator("h2 a").inner_text() == r["primary"]["title"]
    assert head.locator("[data-testid=band]").first.inner_text().strip().lower() in ("certain", "likely", "a guess")
    assert "confidence" in head.locator("[data-testid=confidence]").inner_text()
    assert head.locator("[data-testid=suspects-slot]").count() == 1
    assert head.locator("[data-testid=next-command]").inner_text() == r["next_action"]["command"]
    assert "Diagnosed the pasted text" in head.locator("[data-testid=used]").inner_text()


def test_a_click_before_the_engine_is_ready_is_queued(chromium, origin, entries):
    context = chromium.new_context(service_workers="block")
    page = context.new_page()
    page.goto(f"{origin}/diagnose/", wait_until="domcontentloaded")
    page.wait_for_function("() => document.querySelector('[data-testid=example]') !== null")
    assert page.get_attribute("[data-testid=status]", "data-state") == "loading"
    page.fill("[data-testid=log-input]", watchdog_example(entries))
    page.click("[data-testid=diagnose]")
    assert page.get_attribute("[data-testid=status]", "data-state") == "queued"
    assert "Queued" in page.inner_text("[data-testid=status]")
    assert page.inner_text("[data-testid=diagnose]") == "Queued…"
    page.wait_for_selector("[data-testid=primary]", timeout=READY_MS)
    assert page.get_attribute("[data-testid=primary]", "data-entry-id") == "nccl-watchdog-timeout"
    assert page.inner_text("[data-testid=diagnose]") == "Diagnose"
    context.close()


# ---------------------------------------------------------------- 2. doubt is visible

def test_bands_look_different_and_a_guess_says_not_sure(fresh, examples, engine):
    certain, rc = pick(examples, engine, lambda r: r["primary"]["confidence"] >= 0.8)
    guess, rg = pick(examples, engine, lambda r: r["primary"]["confidence"] < 0.5 and len(r["alternatives"]) >= 1)
    fresh.fill("[data-testid=log-input]", certain)
    head = diagnose(fresh)
    assert head.get_attribute("data-band") == "certain"
    assert head.locator("[data-testid=not-sure]").count() == 0
    look_certain = head.evaluate("e => { const s = getComputedStyle(e); return [s.borderLeftStyle, s.borderLeftColor, s.backgroundColor]; }")
    fresh.click("[data-testid=clear]")
    fresh.fill("[data-testid=log-input]", guess)
    head = diagnose(fresh)
    assert head.get_attribute("data-band") == "guess"
    assert head.locator("[data-testid=band]").first.inner_text().strip().lower() == "a guess"
    assert "Not sure" in head.locator("[data-testid=not-sure]").inner_text()
    look_guess = head.evaluate("e => { const s = getComputedStyle(e); return [s.borderLeftStyle, s.borderLeftColor, s.backgroundColor]; }")
    assert look_guess[0] != look_certain[0] and look_guess[1:] != look_certain[1:]
    cards = head.locator("[data-testid=compare] .fdx-card")
    ids = cards.evaluate_all("els => els.map(e => e.dataset.entryId)")
    assert ids[:2] == [rg["primary"]["id"], rg["alternatives"][0]["id"]]
    a, b = cards.nth(0).bounding_box(), cards.nth(1).bounding_box()
    assert abs(a["y"] - b["y"]) < 2 and b["x"] > a["x"] + a["width"] - 1, (a, b)   # side by side


def test_no_internal_key_reaches_the_page(fresh, examples, engine):
    text, r = pick(examples, engine, lambda r: any("_" in m["fact"] for m in r["missing"]))
    fresh.fill("[data-testid=log-input]", text)
    diagnose(fresh)
    shown = fresh.inner_text("[data-testid=missing]")
    for m in r["missing"]:
        assert m["fact"] not in shown, m["fact"]


# ---------------------------------------------------------------- 3. time that tells the story

def test_timeline_orders_files_by_time_with_axis_legend_and_cause(fresh, tmp_path, examples, engine, entries):
    wd, other, r = timed_pair(examples, engine, entries)
    # the later file by name holds the earlier failure
    fresh.set_input_files("[data-testid=file-input]", files(tmp_path, [("a-rank0.log", wd), ("b-rank1.log", other)]))
    head = diagnose(fresh)
    assert head.get_attribute("data-entry-id") == r["primary"]["id"]
    tl = fresh.locator("[data-testid=timeline]")
    assert tl.get_attribute("data-scale") == "time"
    assert fresh.locator("[data-testid=axis] .fdx-tick").count() >= 2
    assert "UTC" in fresh.inner_text("[data-testid=axis]")
    legend = fresh.inner_text("[data-testid=legend]")
    assert "first failure" in legend and "consequence" in legend
    xs = lambda role: tl.locator(f".fdx-mark[data-role={role}]").evaluate_all("els => els.map(e => +e.dataset.x)")  # noqa: E731
    assert max(xs("initiating")) < min(xs("collateral"))
    first_lane = tl.locator(".fdx-lane").first
    assert first_lane.locator(".fdx-mark[data-role=initiating]").count() >= 1
    assert "first failure" in fresh.inner_text("[data-testid=story]")


@pytest.fixture(scope="module")
def many_ranks(tmp_path_factory, entries, examples, engine):
    """A 64-rank job on 8 pods: every rank's watchdog timeout, even ranks 0-126, and one
    earlier failure (the timed pair's cause) on rank 37's pod."""
    wd, other, _ = timed_pair(examples, engine, entries)
    d = tmp_path_factory.mktemp("ranks")
    paths = []
    for i, rank in enumerate(range(0, 128, 2)):
        p = d / f"rank{rank:03d}.log"
        p.write_text(one_rank(wd, rank, f"trainer-{i // 8}"))
        paths.append(p)
    cause = d / "rank037.log"
    cause.write_text(other)
    paths.append(cause)
    report = engine([(p.name, p.read_text()) for p in sorted(paths)])
    return sorted(paths), report


def test_many_ranks_fold_by_host_and_rank_lists_are_complete(fresh, many_ranks):
    paths, r = many_ranks
    fresh.set_input_files("[data-testid=file-input]", [str(p) for p in paths])
    head = diagnose(fresh)
    assert head.get_attribute("data-entry-id") == r["primary"]["id"]
    lanes = fresh.locator("[data-testid=timeline] .fdx-lane")
    assert lanes.count() <= 9
    folded = fresh.locator("[data-testid=timeline] .fdx-lane--folded")
    names = folded.locator(".fdx-lane-name").all_inner_texts()
    assert any(n.startswith("trainer-0 · 8 ranks") for n in names), names
    assert sum(int(n) for n in folded.evaluate_all("els => els.map(e => e.dataset.folded)")) == 64
    # the cause keeps its own lane
    assert fresh.locator("[data-testid=timeline] .fdx-lane:not(.fdx-lane--folded) .fdx-mark[data-role=initiating]").count() >= 1
    # 64 even ranks: 64 ranges, so the list says how many it leaves out, and adds up
    col = next(c for c in r["collateral"] if c["id"] == "nccl-watchdog-timeout")
    li = fresh.locator("[data-testid=collateral] li[data-entry-id=nccl-watchdog-timeout] [data-testid=ranks]")
    text = li.inner_text()
    m = re.search(r"(\d+) ranks: (.*) and (\d+) more$", text)
    assert m, text
    listed = m.group(2).split(", ")
    assert int(m.group(1)) == len(col["ranks"]) == len(listed) + int(m.group(3))
    assert [int(x) for x in listed] == col["ranks"][:len(listed)]


# ---------------------------------------------------------------- 4. clean state

def test_clear_example_and_new_file_each_reset_the_report(fresh, entries, tmp_path):
    wd = watchdog_example(entries)
    fresh.fill("[data-testid=log-input]", wd)
    diagnose(fresh)
    fresh.click("[data-testid=clear]")
    assert fresh.locator("#fdx-report > *").count() == 0
    assert fresh.input_value("[data-testid=log-input]") == ""
    assert fresh.evaluate("document.querySelector('[data-testid=progress]').value") == 0
    assert fresh.inner_text("[data-testid=progress-text]") == ""
    assert "Cleared" in fresh.inner_text("[data-testid=status]")

    fresh.fill("[data-testid=log-input]", wd)
    diagnose(fresh)
    option = fresh.locator("[data-testid=example] option:not([value=''])").first.get_attribute("value")
    fresh.select_option("[data-testid=example]", option)
    assert fresh.locator("#fdx-report > *").count() == 0
    assert fresh.input_value("[data-testid=log-input]") != wd
    assert "Example loaded" in fresh.inner_text("[data-testid=status]")

    diagnose(fresh)
    fresh.set_input_files("[data-testid=file-input]", files(tmp_path, [("rank0.log", wd)]))
    assert fresh.locator("#fdx-report > *").count() == 0
    assert fresh.inner_text("[data-testid=progress-text]") == ""


def test_cancel_resets_the_progress(fresh, entries, tmp_path):
    from bench.loggen import generate
    big = tmp_path / "big.log"
    generate(big, 200 << 20, seed=3, failures=[watchdog_example(entries)])
    fresh.set_input_files("[data-testid=file-input]", [str(big)])
    fresh.click("[data-testid=diagnose]")
    fresh.wait_for_function(
        "() => { const p = document.querySelector('[data-testid=progress]'); return p.value > 0 && p.value < p.max; }",
        timeout=120_000)
    fresh.click("[data-testid=cancel]")
    fresh.wait_for_selector("[data-testid=status][data-state=cancelled]", timeout=120_000)
    fresh.wait_for_timeout(500)   # progress messages already on their way are dropped
    assert fresh.evaluate("document.querySelector('[data-testid=progress]').value") == 0
    assert fresh.inner_text("[data-testid=progress-text]") == ""
    assert fresh.locator("#fdx-report > *").count() == 0


def test_text_and_files_are_separate_inputs_and_the_page_says_which(fresh, entries, tmp_path, examples, engine):
    wd = watchdog_example(entries)
    other, r = pick(examples, engine, lambda r: r["primary"]["id"] != "nccl-watchdog-timeout"
                    and r["primary"]["confidence"] >= 0.8)
    fresh.fill("[data-testid=log-input]", other)
    fresh.set_input_files("[data-testid=file-input]", files(tmp_path, [("rank0.log", wd)]))
    assert fresh.is_visible("[data-testid=source-choice]")
    assert fresh.is_checked("[data-testid=source-choice] input[value=files]")
    assert "Will diagnose 1 file (rank0.log). The pasted text is not used." == fresh.inner_text("[data-testid=using]")
    head = diagnose(fresh)
    assert head.get_attribute("data-entry-id") == "nccl-watchdog-timeout"
    assert "Diagnosed 1 file (rank0.log)" in head.locator("[data-testid=used]").inner_text()
    fresh.check("[data-testid=source-choice] input[value=text]")
    assert "The chosen files are not used." in fresh.inner_text("[data-testid=using]")
    head = diagnose(fresh)
    assert head.get_attribute("data-entry-id") == r["primary"]["id"]
    assert "Diagnosed the pasted text" in head.locator("[data-testid=used]").inner_text()


def test_copy_and_share_confirm(fresh, entries):
    fresh.fill("[data-testid=log-input]", watchdog_example(entries))
    diagnose(fresh)
    for button in ("copy-command", "copy-markdown", "share"):
        if fresh.locator(f"[data-testid={button}]").count() == 0:
            continue
        fresh.click(f"[data-testid={button}]")
        fresh.wait_for_selector(f"[data-testid={button}][data-confirmed=true]")
        assert fresh.inner_text(f"[data-testid={button}]").startswith("✓ Copied")
        assert fresh.inner_text("[data-testid=status]").startswith("Copied")
    clip = fresh.evaluate("navigator.clipboard.readText()")
    assert clip == fresh.input_value("[data-testid=share-url]") and "#share=" in clip
    assert fresh.is_visible("label[for=fdx-share-url]")


# ---------------------------------------------------------------- 6. unmatched is a start

@pytest.fixture(scope="module")
def real_traceback(engine):
    """A traceback printed by really running Python here; faildex has no entry for it."""
    run = subprocess.run([sys.executable, "-c", "import json\njson.loads('{\"a\": 1,}')"],
                         capture_output=True, text=True)
    text = "starting job on /home/alice/run\n" + run.stderr
    r = engine([("pasted.log", text)])
    assert r["primary"] is None and r["unmatched"], "the engine now matches this traceback"
    return text, r


def test_unmatched_log_shows_where_to_start_and_how_to_add_it(fresh, real_traceback):
    text, r = real_traceback
    fresh.fill("[data-testid=log-input]", text)
    head = diagnose(fresh)
    assert head.get_attribute("data-band") == "none"
    block = head.locator("[data-testid=unmatched]").inner_text()
    assert "First error:" in block and "Last exception:" in block and "JSONDecodeError" in block
    for n in r["unmatched"]["nearest"]:
        assert head.locator(f"[data-testid=nearest] a[href$='/{n['url']}']").count() == 1
    search = urlsplit(head.locator("[data-testid=search-error]").get_attribute("href"))
    assert search.path.endswith("/errors/") and "JSONDecodeError" in parse_qs(search.query)["text"][0]
    add = urlsplit(head.locator("[data-testid=add-entry]").get_attribute("href"))
    assert f"{add.scheme}://{add.netloc}" == "https://github.com"
    assert re.fullmatch(r"/faildex/faildex/new/main/entries/[a-z-]+", add.path), add.path
    q = parse_qs(add.query)
    assert q["filename"] == ["jsondecodeerror.yaml"]
    yaml = q["value"][0]
    assert "id: jsondecodeerror" in yaml and text.strip().splitlines()[-1] in yaml
    assert "TODO paste the log as printed" not in yaml and "alice" not in yaml
    # the search link works: the error index filters on the error
    fresh.goto(urlsplit(fresh.url)._replace(path=search.path, query=search.query).geturl())
    assert fresh.input_value("[data-fdx-filter=text]") == parse_qs(search.query)["text"][0]
    fresh.goto(urlsplit(fresh.url)._replace(path="/diagnose/", query="").geturl())
    fresh.wait_for_selector("[data-testid=status][data-state=ready]", timeout=READY_MS)


# ---------------------------------------------------------------- 7. accessible and mobile

def axe_violations(page, rows: int | None = None):
    """axe's serious and critical violations on the page; with `rows`, on a copy of the page
    whose tables keep their first `rows` rows (rows of a table share their styles)."""
    page.add_script_tag(content=AXE.read_text())
    if rows:
        page.evaluate("n => document.querySelectorAll(`table tbody tr:nth-child(n+${n + 1})`).forEach(r => r.remove())", rows)
    return page.evaluate("""async () => (await axe.run(document, {resultTypes: ['violations']})).violations
        .filter(v => v.impact === 'serious' || v.impact === 'critical')
        .map(v => `${v.id} (${v.impact}): ${v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | ')}`)""")


@pytest.mark.parametrize("scheme", ["default", "slate"])
def test_axe_finds_no_serious_or_critical_violation(chromium, origin, entries, scheme):
    context = chromium.new_context(bypass_csp=True, service_workers="block",   # axe is injected inline
                                   color_scheme="dark" if scheme == "slate" else "light")
    page = context.new_page()
    found = {}
    for url in ("/", "/entries/cuda-out-of-memory/", "/errors/", "/entries/"):
        page.goto(origin + url)
        assert page.get_attribute("body", "data-md-color-scheme") == scheme
        # what depends on the content is checked on every row in the default scheme; the dark
        # one changes colours only, which a table's rows share (the error index's 1,400 rows:
        # 7 s of axe, 0.7 s with 40)
        found[url] = axe_violations(page, rows=None if scheme == "default" else 40)
    page.goto(origin + "/diagnose/")
    page.wait_for_selector("[data-testid=status][data-state=ready]", timeout=READY_MS)
    page.fill("[data-testid=log-input]", watchdog_example(entries))
    page.click("[data-testid=diagnose]")
    page.wait_for_selector("[data-testid=primary]", timeout=READY_MS)
    page.click("[data-testid=copy-markdown]")
    page.click("[data-testid=share]")
    found["/diagnose/ with a report"] = axe_violations(page)
    context.close()
    assert found == {url: [] for url in found}


def test_keyboard_live_status_and_visible_focus(chromium, origin):
    context, page = open_diagnoser(chromium, origin)
    assert page.get_attribute("[data-testid=status]", "role") == "status"
    assert page.get_attribute("[data-testid=status]", "aria-live") == "polite"
    # the text box: where the page starts (0 Tabs), and so within 3
    assert page.evaluate("document.activeElement.id") == "fdx-log"
    reached = {}
    for _ in range(30):
        page.keyboard.press("Tab")
        info = page.evaluate("""() => { const e = document.activeElement, s = getComputedStyle(e);
            return {id: e.id || e.dataset.testid || e.tagName, outline: s.outlineStyle, width: parseFloat(s.outlineWidth)}; }""")
        reached[info["id"]] = info
    for target in ("fdx-file-input", "diagnose", "clear", "fdx-example"):
        assert target in reached, (target, list(reached))
        assert reached[target]["outline"] != "none" and reached[target]["width"] >= 2, reached[target]
    context.close()


@pytest.mark.parametrize("url", ["/", "/entries/cuda-out-of-memory/", "/errors/", "/entries/", "/diagnose/"])
def test_no_horizontal_scroll_on_a_phone(chromium, origin, entries, url):
    context = chromium.new_context(viewport=PHONE, service_workers="block", is_mobile=True, has_touch=True)
    page = context.new_page()
    page.goto(origin + url)
    if url == "/diagnose/":
        page.wait_for_selector("[data-testid=status][data-state=ready]", timeout=READY_MS)
        page.fill("[data-testid=log-input]", watchdog_example(entries))
        page.click("[data-testid=diagnose]")
        page.wait_for_selector("[data-testid=primary]", timeout=READY_MS)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    context.close()


def test_dark_palette_toggle_is_kept(chromium, origin):
    context = chromium.new_context(service_workers="block", color_scheme="light")
    page = context.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto(origin + "/errors/")
    assert page.get_attribute("body", "data-md-color-scheme") == "default"
    page.click("label[for=__palette_1]")
    assert page.get_attribute("body", "data-md-color-scheme") == "slate"
    bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    page.goto(origin + "/diagnose/")   # the choice is applied by a file, not an inline script
    assert page.get_attribute("body", "data-md-color-scheme") == "slate"
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == bg != "rgb(255, 255, 255)"
    assert errors == []
    context.close()
    dark = chromium.new_context(service_workers="block", color_scheme="dark")   # the system's choice
    page = dark.new_page()
    page.goto(origin + "/")
    assert page.get_attribute("body", "data-md-color-scheme") == "slate"
    dark.close()


# ---------------------------------------------------------------- 8. offline after one visit

def test_after_one_visit_an_entry_and_the_diagnoser_work_offline(chromium, origin, entries):
    context = chromium.new_context(service_workers="allow")
    page = context.new_page()
    page.goto(f"{origin}/")
    # the worker has cached every file once it is active (install waits for them)
    page.evaluate("navigator.serviceWorker.ready.then(() => true)")
    page.wait_for_function("() => navigator.serviceWorker.controller !== null", timeout=READY_MS)
    context.set_offline(True)
    entry = page.goto(f"{origin}/entries/nccl-watchdog-timeout/")
    assert entry.from_service_worker and "Watchdog" in page.inner_text("h1")
    page.goto(f"{origin}/diagnose/")
    page.wait_for_selector("[data-testid=status][data-state=ready]", timeout=READY_MS)
    page.fill("[data-testid=log-input]", watchdog_example(entries))
    page.click("[data-testid=diagnose]")
    page.wait_for_selector("[data-testid=primary]", timeout=READY_MS)
    assert page.get_attribute("[data-testid=primary]", "data-entry-id") == "nccl-watchdog-timeout"
    page.click("[data-testid=primary] h2 a")
    page.wait_for_load_state("load")
    assert page.url.endswith("/entries/nccl-watchdog-timeout/") and "Watchdog" in page.inner_text("h1")
    context.close()


def test_big_assets_have_gz_and_br_copies(real_site):
    site = real_site.site
    for name in ("assets/pyodide/pyodide.asm.wasm", "assets/pyodide/pyodide.asm.mjs",
                 "assets/faildex/index.json", "search/search_index.json"):
        original = (site / name).read_bytes()
        assert gzip.decompress((site / (name + ".gz")).read_bytes()) == original
        packed = (site / (name + ".br")).read_bytes()
        assert brotli.decompress(packed) == original and len(packed) < 0.6 * len(original)
    # an already compressed file gets no copy that would not be smaller
    assert not (site / "assets/pyodide/python_stdlib.zip.br").exists()
    listed = json.loads(re.search(r"const FILES = (\[.*?\]);", (site / "sw.js").read_text(), re.S).group(1))
    assert "assets/pyodide/pyodide.asm.wasm" in listed and "entries/nccl-watchdog-timeout/" in listed
    assert not [f for f in listed if f.endswith((".br", ".gz", ".map"))]


def test_the_diagnoser_starts_from_precompressed_files(chromium, real_site):
    from bench.browser import PrecompressedHandler, serve
    server, origin = serve(real_site.site, PrecompressedHandler)
    context = chromium.new_context(service_workers="block")
    page = context.new_page()
    encodings = {}   # the page's and its workers' responses
    context.on("response", lambda r: encodings.__setitem__(r.url.rsplit("/", 1)[-1], r.headers.get("content-encoding")))
    page.goto(f"{origin}/diagnose/")
    page.wait_for_selector("[data-testid=status][data-state=ready]", timeout=READY_MS)
    context.close()
    server.shutdown()
    assert encodings.get("pyodide.asm.wasm") == "br" and encodings.get("index.json") == "br"


def test_c10d_timestamps_after_a_rank_prefix_are_parsed(entries):
    """PyTorch 2.x's c10 log prefix has no PID ("[rank0]:[E1206 18:44:12.715298746
    ProcessGroupNCCL.cpp:607] ..."); the timeline needs its time."""
    from faildex.lines import parse_prefix
    line = next(ln for ln in watchdog_example(entries).splitlines() if "Watchdog caught" in ln)
    meta, rest = parse_prefix(line)
    assert meta["rank"] == 0 and meta["level"] == "E" and "pid" not in meta
    assert rest.startswith("[Rank 0] Watchdog caught")
    later, _ = parse_prefix(line.replace("18:44:12.", "18:54:12."))
    assert later["ts"] - meta["ts"] == pytest.approx(600)
