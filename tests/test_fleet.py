"""faildex triage (one JSON line per job, resumable) and faildex fleet report."""
from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import pytest

from faildex import fleet, triage

# screenshots of the fleet pages (the same folder as tests/test_browser.py's)
SHOTS = Path(os.environ.get("FAILDEX_SCREENSHOTS") or Path(tempfile.gettempdir()) / "faildex-screenshots")

ROOT = Path(__file__).resolve().parent.parent
OOM_LOG = ROOT / "entries" / "cuda" / "cuda-out-of-memory" / "deepspeed-rank3.log"
IB_LOG = ROOT / "entries" / "nccl" / "nccl-ib-retry-exceeded" / "roce-intra-node-nic-path.log"
HEALTHY_LOG = ROOT / "entries" / "healthy" / "ddp-gloo-2rank.log"


@pytest.fixture(scope="module")
def index_file(index, tmp_path_factory):
    path = tmp_path_factory.mktemp("index") / "index.json"
    path.write_text(json.dumps(index))
    return str(path)


@pytest.fixture()
def jobs(tmp_path):
    for jid, log in [("101", OOM_LOG), ("102", HEALTHY_LOG), ("103", IB_LOG)]:
        (tmp_path / "jobs" / jid).mkdir(parents=True)
        (tmp_path / "jobs" / jid / log.name).write_bytes(log.read_bytes())
    (tmp_path / "jobs" / "104").mkdir()          # a job that left no log
    return tmp_path


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_triage_writes_one_line_per_job(jobs, index, index_file, capsys):
    out = jobs / "t.jsonl"
    rc = triage.main([str(jobs / "jobs" / "*"), "-o", str(out), "--jobs", "2"], index_path=index_file)
    assert rc == 1                                   # job 104 had no log
    lines = {line["job"]: line for line in read_lines(out)}
    assert sorted(lines) == ["101", "102", "103", "104"]
    assert lines["101"]["primary"]["id"] == "cuda-out-of-memory"
    assert lines["103"]["primary"]["id"] == "nccl-ib-retry-exceeded"
    assert lines["102"]["primary"] is None and lines["102"]["outcome"] == "clean"
    assert lines["104"]["error"] == "no log files"
    for line in lines.values():
        assert line["index"] == index["digest"]
        assert isinstance(line["suspects"], list) and isinstance(line["hosts"], list)
        assert isinstance(line["versions"], dict)
    ev = lines["101"]["evidence"][0]
    assert ev["source"] == OOM_LOG.name and "CUDA out of memory" in ev["text"]
    assert "1 unreadable" in capsys.readouterr().err


def test_triage_resumes_and_survives_a_cut_line(jobs, index_file):
    out = jobs / "t.jsonl"
    triage.main([str(jobs / "jobs" / n) for n in ("101", "102", "103")] + ["-o", str(out), "--jobs", "1"],
                index_path=index_file)
    first = out.read_text()
    triage.main([str(jobs / "jobs" / n) for n in ("101", "102", "103")] + ["-o", str(out), "--jobs", "1"],
                index_path=index_file)
    assert out.read_text() == first                  # nothing done twice
    # a crash while writing job 103's line: the cut line is dropped, 103 done again
    kept = first.splitlines(keepends=True)
    cut = [x for x in kept if '"job": "103"' not in x]
    line103 = next(x for x in kept if '"job": "103"' in x)
    out.write_text("".join(cut) + line103[:40])
    triage.main([str(jobs / "jobs" / "*")] + ["-o", str(out), "--jobs", "1"], index_path=index_file)
    lines = read_lines(out)
    assert sorted(x["job"] for x in lines) == ["101", "102", "103", "104"]


def test_triage_groups_files_by_job_id(tmp_path, index_file, capsys):
    for name, log in [("slurm-77.out", OOM_LOG), ("slurm-77.err", HEALTHY_LOG),
                      ("slurm-78.out", HEALTHY_LOG), ("notes.txt", HEALTHY_LOG)]:
        (tmp_path / name).write_bytes(log.read_bytes())
    rc = triage.main([str(tmp_path / "*"), "--job-id", r"slurm-(\d+)", "--jobs", "1"],
                     index_path=index_file)
    assert rc == 0
    lines = {x["job"]: x for x in map(json.loads, capsys.readouterr().out.splitlines())}
    assert sorted(lines) == ["77", "78"]
    assert lines["77"]["files"] == 2 and lines["77"]["primary"]["id"] == "cuda-out-of-memory"


def test_triage_bad_usage_is_one_line(tmp_path, index_file, capsys):
    assert triage.main([str(tmp_path), "--job-id", "("], index_path=index_file) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--job-id" in err


def test_hardware_entries_exist_and_are_cuda_or_nccl(index):
    for eid in fleet.HARDWARE_ENTRIES:
        assert index["entries"][eid]["category"] in ("cuda", "nccl"), eid


def _line(job, eid=None, hosts=(), ev_host=None, ended="2026-11-30T10:00:00Z", category="cuda"):
    primary = None
    evidence = []
    if eid:
        primary = {"id": eid, "title": eid.replace("-", " "), "category": category,
                   "severity": "critical", "url": f"entries/{eid}/", "confidence": 0.9}
        e = {"entry": eid, "source": "rank0.log", "line": 7, "text": f"Xid <{job}> & fell off"}
        if ev_host:
            e["host"] = ev_host
        evidence = [e]
    return {"faildex_triage": 1, "job": job, "primary": primary, "hosts": list(hosts),
            "evidence": evidence, "ended": ended, "index": "abc", "suspects": [], "versions": {},
            "outcome": "known" if eid else "clean"}


def test_fleet_ranks_recurring_hardware_hosts(tmp_path, capsys):
    lines = [
        _line("1", "gpu-fell-off-bus", ["n1", "n2", "n3", "n4"], ev_host="n3"),
        _line("2", "gpu-ecc-error", ["n3", "n5"], ev_host="n3"),
        _line("3", "nvlink-error", ["n3", "n6"]),                       # no host on the line
        _line("4", "nccl-ib-retry-exceeded", ["n7", "n8"], category="nccl"),
        _line("5", "nccl-ib-retry-exceeded", ["n7", "n9"], category="nccl"),
        _line("6", "cuda-out-of-memory", ["n1", "n2"]),                 # not hardware
        _line("7", "cuda-out-of-memory", ["n1", "n2"], ended="2026-12-08T00:00:00Z"),
        _line("8", None, ["n1"]),
        _line("9", "gpu-ecc-error", ["n6"], ev_host="n6"),
        _line("9", None, ["n6"]),              # job 9 triaged again: the last line counts
    ]
    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"job": "10", "prim\n')
    warnings: list[str] = []
    agg = fleet.aggregate([str(src)], warn=warnings.append)
    assert [h["host"] for h in agg["drain"]] == ["n3", "n7"]
    n3 = agg["drain"][0]
    assert n3["jobs"] == 3 and n3["named"] == 2 and n3["score"] == 2.5
    assert dict(agg["classes"]) == {"cuda-out-of-memory": 2, "nccl-ib-retry-exceeded": 2,
                                    "gpu-fell-off-bus": 1, "gpu-ecc-error": 1, "nvlink-error": 1}
    assert agg["weeks"]["2026-W50"] == {"cuda-out-of-memory": 1}
    assert agg["jobs"] == 9
    assert warnings == [f"{src}:11: not a JSON line (a line cut short?), skipped"]

    rc = fleet.main(["report", str(src), "-o", str(tmp_path / "page")])
    assert rc == 0
    html = (tmp_path / "page" / "index.html").read_text()
    assert html.index('id="host-n3"') < html.index('id="host-n7"')
    assert 'id="host-n1"' not in html
    assert "Xid &lt;1&gt; &amp; fell off" in html                # log text escaped
    assert 'href="https://faildex.dev/entries/gpu-fell-off-bus/"' in html
    # no inline script; the one script file and every stylesheet are in the folder
    scripts = re.findall(r'<script src="([^"]+)" defer></script>', html)
    assert html.count("<script") == len(scripts) == 1
    for href in re.findall(r'<link rel="stylesheet" href="([^"]+)"', html) + scripts:
        assert (tmp_path / "page" / href).is_file(), href
    assert any("main." in h for h in re.findall(r'href="(assets/[^"]+\.css)"', html))


def test_fleet_unreadable_input_is_one_line(tmp_path, capsys):
    assert fleet.main(["report", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "missing.jsonl" in err


def test_fleet_metrics_are_prometheus_text_a_textfile_collector_reads(tmp_path, capsys):
    lines = [
        _line("1", "gpu-fell-off-bus", ["n1", "n2"], ev_host="n2"),
        _line("2", "gpu-fell-off-bus", ["n2", "n3"], ev_host="n2", ended="2026-12-01T08:00:00Z"),
        _line("3", "cuda-out-of-memory", ['odd"host\\name'], ended="2026-12-01T09:00:00Z"),
        _line("4", None, ["n1"]),
    ]
    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "faildex.prom"
    assert fleet.main(["metrics", str(src), "-o", str(out)]) == 0
    text = out.read_text()
    assert not list(tmp_path.glob(".*.tmp"))                       # written beside, renamed over
    # every sample line: name{label="value",...} number, each family with HELP and TYPE first
    sample = re.compile(r'^(faildex_\w+)(\{(?:\w+="(?:[^"\\]|\\.)*",?)*\})? -?\d+(?:\.\d+)?$')
    families = []
    for line in text.splitlines():
        if line.startswith("# HELP "):
            families.append(line.split()[2])
        elif line.startswith("# TYPE "):
            assert line.split()[2:] == [families[-1], "gauge"]
        else:
            m = sample.match(line)
            assert m and m.group(1) == families[-1], line
    samples = {l.rsplit(" ", 1)[0]: float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if not l.startswith("#")}
    assert samples['faildex_jobs{outcome="known"}'] == 3 and samples['faildex_jobs{outcome="clean"}'] == 1
    assert samples['faildex_failures{entry="gpu-fell-off-bus",category="cuda",severity="critical"}'] == 2
    assert samples['faildex_host_failures{host="n2",entry="gpu-fell-off-bus"}'] == 2
    assert samples['faildex_host_failures{host="odd\\"host\\\\name",entry="cuda-out-of-memory"}'] == 1
    assert samples['faildex_failures_by_day{day="2026-12-01",entry="gpu-fell-off-bus"}'] == 1
    assert samples['faildex_drain_candidate_score{host="n2"}'] == 2
    assert samples["faildex_hosts_seen"] == 4
    # to stdout without -o
    assert fleet.main(["metrics", str(src)]) == 0
    assert capsys.readouterr().out == text


def test_a_fleet_whose_logs_name_no_host_is_not_shown_as_all_clear(tmp_path):
    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps(_line(str(n), "gpu-ecc-error")) + "\n" for n in range(3)))
    assert fleet.main(["report", str(src), "-o", str(tmp_path / "page")]) == 0
    html = (tmp_path / "page" / "index.html").read_text()
    assert "name no host" in html and "not an all-clear" in html
    assert "No host appears in" not in html


def test_fleet_links_point_at_the_operators_copy_of_the_site(tmp_path):
    src = tmp_path / "a.jsonl"
    src.write_text(json.dumps(_line("1", "gpu-ecc-error", ["n1"], ev_host="n1")) + "\n")
    assert fleet.main(["report", str(src), "-o", str(tmp_path / "p"), "--site-url", "http://faildex.internal"]) == 0
    html = (tmp_path / "p" / "index.html").read_text()
    assert 'href="http://faildex.internal/entries/gpu-ecc-error/"' in html and "faildex.dev/entries" not in html


def test_each_class_and_outcome_lists_its_jobs_most_recent_first_paged(tmp_path, monkeypatch):
    monkeypatch.setattr(fleet, "MAX_JOBS_LISTED", 120)    # a class with more jobs lists the 120 newest
    lines = []
    for n in range(150):     # 150 jobs of one class over 15 days, 30 of another, 20 clean, 3 unreadable
        day = f"2026-11-{10 + n % 15:02d}T{n % 24:02d}:00:00Z"
        item = _line(f"oom-{n:03d}", "cuda-out-of-memory", [f"n{n % 7}"], ended=day)
        item["suspects"] = [{"rank": n % 8, "host": f"n{n % 7}", "kind": "crashed", "why": "x"}]
        lines.append(item)
    lines += [_line(f"xid-{n}", "gpu-fell-off-bus", ["n1"], ev_host="n1", ended=f"2026-11-2{n % 9}T00:00:00Z")
              for n in range(30)]
    lines += [_line(f"ok-{n}", None, ["n2"]) for n in range(20)]
    lines += [dict(_line(f"bad-{n}"), outcome="error", error=f"job-{n}/rank0.log: permission denied")
              for n in range(3)]
    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "page"
    assert fleet.main(["report", str(src), "-o", str(out)]) == 0
    index = (out / "index.html").read_text()
    for href in re.findall(r'href="(jobs/[^"]+)"', index):
        assert (out / href).is_file(), href
    assert 'href="jobs/cuda-out-of-memory-1.html">150<' in index and 'href="jobs/clean-1.html">20<' in index
    first = (out / "jobs" / "cuda-out-of-memory-1.html").read_text()
    second = (out / "jobs" / "cuda-out-of-memory-2.html").read_text()
    assert not (out / "jobs" / "cuda-out-of-memory-3.html").exists()
    rows1 = re.findall(r'<tr id="job-(oom-\d+)">', first)
    rows2 = re.findall(r'<tr id="job-(oom-\d+)">', second)
    assert len(rows1) == 100 and len(rows2) == 20 and not set(rows1) & set(rows2)
    ended = {x["job"]: x["ended"] for x in lines}
    listed = [ended[j] for j in rows1 + rows2]
    assert listed == sorted(listed, reverse=True)                      # most recent first
    assert min(listed) >= sorted(ended[f"oom-{n:03d}"] for n in range(150))[30]   # the 120 newest
    assert "the 120 most recent" in first and 'href="cuda-out-of-memory-2.html" rel="next"' in first
    assert 'rel="prev"' not in first and 'rel="next"' not in second
    assert 'href="cuda-out-of-memory-1.html" rel="prev"' in second
    job = lines[int(rows1[0][4:])]
    assert f"rank {job['suspects'][0]['rank']} on {job['suspects'][0]['host']}" in first
    assert "Xid &lt;oom-" in first                                     # log text escaped
    bad = (out / "jobs" / "error-1.html").read_text()
    assert "permission denied" in bad and "Why it could not be read" in bad
    for page in [index, first, bad]:
        scripts = re.findall(r'<script src="([^"]+)" defer></script>', page)
        assert page.count("<script") == len(scripts) == 1 and "Content-Security-Policy" in page
        for href in re.findall(r'<link rel="stylesheet" href="([^"]+)"', page) + scripts:
            assert ((out / "jobs" if page is not index else out) / href).resolve().is_file(), href


def test_the_fleet_page_says_what_changed_with_a_chart_that_needs_no_script(tmp_path):
    lines = []
    for n in range(6):       # week 48: 1 oom; week 49: 4 oom (rising) and a class never seen before
        lines.append(_line(f"a{n}", "cuda-out-of-memory", ["n1"],
                           ended="2026-11-24T10:00:00Z" if n == 0 else f"2026-12-0{n}T10:00:00Z"))
    lines.append(_line("b1", "nvlink-error", ["n2"], ended="2026-12-03T11:00:00Z"))
    lines.append(_line("c1", "gpu-ecc-error", ["n3"], ended="2026-11-25T11:00:00Z"))
    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    agg = fleet.aggregate([str(src)])
    ch = fleet.changes(agg)
    assert ch["week"] == "2026-W49" and ch["previous"] == "2026-W48"
    assert ch["new"] == [("nvlink-error", 1)] and ch["rising"] == [("cuda-out-of-memory", 1, 5)]
    chart = fleet.day_chart(agg)
    assert [b["day"] for b in chart["bars"]] == ["2026-11-24", "2026-11-25", "2026-12-01", "2026-12-02",
                                                 "2026-12-03", "2026-12-04", "2026-12-05"]
    assert [b["n"] for b in chart["bars"]] == [1, 1, 1, 1, 2, 1, 1] and chart["top"] == 2
    tallest = max(chart["bars"], key=lambda b: b["h"])
    assert tallest["day"] == "2026-12-03" and tallest["y"] == 0 and tallest["h"] == chart["height"]
    assert fleet.main(["report", str(src), "-o", str(tmp_path / "p")]) == 0
    html = (tmp_path / "p" / "index.html").read_text()
    assert html.count("<rect ") == 7 and 'role="img"' in html and "aria-label=\"Failed jobs per day" in html
    # the page's CSP allows no inline style or script: one script file, from its own folder
    assert "style=" not in html and html.count("<script") == 1
    assert '<script src="assets/fleet-sort.js" defer></script>' in html
    assert 'href="jobs/nvlink-error-1.html">nvlink-error</a> (1)' in html and "(1 → 5)" in html


def test_hosts_that_keep_starting_failures_are_listed_by_class(tmp_path):
    lines = []
    for n, (eid, host) in enumerate([("cuda-out-of-memory", "n4"), ("nccl-watchdog-timeout", "n4"),
                                     ("cuda-out-of-memory", "n4"), ("cuda-out-of-memory", "n5"),
                                     ("cuda-out-of-memory", "n5")]):
        item = _line(str(n), eid, ["n4", "n5", "n6"])
        item["suspects"] = [{"rank": 3, "host": host, "kind": "crashed", "why": "x"}]
        lines.append(item)
    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    agg = fleet.aggregate([str(src)])
    assert agg["culprit_hosts"] == [{"host": "n4", "jobs": 3, "ran": 5,
                                     "entries": [("cuda-out-of-memory", 2), ("nccl-watchdog-timeout", 1)]}]
    assert fleet.main(["report", str(src), "-o", str(tmp_path / "p")]) == 0
    html = (tmp_path / "p" / "index.html").read_text()
    assert 'id="culprit-n4"' in html and 'id="culprit-n5"' not in html


@pytest.mark.parametrize("width", [390, 1280])
def test_fleet_pages_fit_a_phone_and_a_laptop_and_axe_finds_nothing_serious(chromium, tmp_path, width):
    from test_diagnoser_ux import axe_violations
    lines = []
    for n in range(60):
        eid = ("cuda-out-of-memory", "gpu-fell-off-bus", "nccl-watchdog-timeout")[n % 3]
        item = _line(f"job-{n:04d}-a-rather-long-job-identifier", eid, [f"gpu-node-{n % 5:02d}.cluster.internal"],
                     ev_host=f"gpu-node-{n % 5:02d}.cluster.internal", ended=f"2026-11-{1 + n % 28:02d}T10:00:00Z")
        item["suspects"] = [{"rank": n % 8, "host": f"gpu-node-{n % 5:02d}.cluster.internal", "kind": "crashed", "why": "x"}]
        lines.append(item)
    lines += [_line(f"ok-{n}", None, ["gpu-node-01.cluster.internal"]) for n in range(5)]
    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "page"
    assert fleet.main(["report", str(src), "-o", str(out)]) == 0
    context = chromium.new_context(viewport={"width": width, "height": 900}, bypass_csp=True)  # axe is injected inline
    page = context.new_page()
    found = {}
    for name in ("index.html", "jobs/cuda-out-of-memory-1.html", "jobs/clean-1.html"):
        page.goto((out / name).as_uri())
        # the page itself never scrolls sideways; wide tables scroll in their own box
        assert page.evaluate("() => document.scrollingElement.scrollWidth <= window.innerWidth + 1"), name
        found[name] = axe_violations(page)
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"fleet-{name.replace('/', '-')[:-5]}-{width}.png"), full_page=True)
    context.close()
    assert not any(found.values()), found


def test_fleet_tables_sort_by_a_column_under_the_pages_own_csp(chromium, tmp_path):
    # a column header is a button (assets/fleet-sort.js, the one script the CSP lets in):
    # numbers sort as numbers ("12" after "9"), a second press reverses, aria-sort says so
    lines = []
    for n, eid in enumerate(["cuda-out-of-memory"] * 12 + ["gpu-fell-off-bus"] * 9 + ["nccl-watchdog-timeout"] * 3):
        lines.append(_line(f"j{n}", eid, [f"n{n % 4}"], ev_host=f"n{n % 4}", ended=f"2026-11-{1 + n % 20:02d}T10:00:00Z"))
    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "page"
    assert fleet.main(["report", str(src), "-o", str(out)]) == 0
    context = chromium.new_context()           # the page's own CSP, not bypassed
    page = context.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto((out / "index.html").as_uri())
    table = page.locator("table", has=page.locator("th", has_text="Share of failed jobs"))
    first_col = "t => Array.from(t.tBodies[0].rows).map(r => r.cells[0].textContent.trim())"
    share = "t => Array.from(t.tBodies[0].rows).map(r => parseFloat(r.cells[4].textContent))"
    header = table.locator("th", has_text="Share of failed jobs")
    header.locator("button.fdx-sort").click()
    assert header.get_attribute("aria-sort") == "ascending"
    up = table.evaluate(share)
    assert up == sorted(up) and len(up) == 3, up
    header.locator("button.fdx-sort").click()
    assert header.get_attribute("aria-sort") == "descending" and table.evaluate(share) == sorted(up, reverse=True)
    table.locator("th", has_text="Failure").locator("button").click()
    names = table.evaluate(first_col)
    assert names == sorted(names, key=str.lower), names
    assert not errors, errors
    context.close()


def test_fleet_pages_follow_a_dark_system_preference_without_script(chromium, tmp_path):
    from test_diagnoser_ux import axe_violations
    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps(_line(str(n), "gpu-ecc-error", ["n1", "n2"], ev_host="n1",
                                            ended=f"2026-11-{1 + n:02d}T00:00:00Z")) + "\n" for n in range(6)))
    out = tmp_path / "page"
    assert fleet.main(["report", str(src), "-o", str(out)]) == 0
    css = (out / "assets" / fleet.DARK_CSS).read_text()
    assert css.startswith("@media (prefers-color-scheme: dark)") and "--md-default-bg-color" in css
    background = "() => getComputedStyle(document.body).backgroundColor"
    seen = {}
    for scheme in ("light", "dark"):
        context = chromium.new_context(color_scheme=scheme, bypass_csp=True)   # axe is injected inline
        page = context.new_page()
        for name in ("index.html", "jobs/gpu-ecc-error-1.html"):
            page.goto((out / name).as_uri())
            rgb = [int(x) for x in re.findall(r"\d+", page.evaluate(background))[:3]]
            seen[(scheme, name)] = sum(rgb) / 3
            assert not axe_violations(page), (scheme, name)
        context.close()
    assert all(seen[("light", n)] > 200 and seen[("dark", n)] < 80 for n in ("index.html", "jobs/gpu-ecc-error-1.html")), seen


def html_unescape(s: str) -> str:
    import html
    return html.unescape(s)


def test_a_fleet_of_real_logs_triaged_then_paged_charted_and_counted(tmp_path, index_file, capsys):
    # 200+ job folders of real logs (the dev corpora: single logs and multi-rank runs), their
    # logs last written over 12 days; triage, the page, the metrics: every link resolves
    import shutil
    from bench.which_rank import load_manifest
    sources = [[p] for p in sorted((ROOT / "tests" / "corpus" / "dev").glob("*.log"))]
    runs = ROOT / "tests" / "corpus" / "ranks" / "dev"
    sources += [[runs / it["id"] / f for f in it["files"] if (runs / it["id"] / f).is_file()]
                for it in load_manifest("dev")]
    n = 0
    for k in range(2):
        for files in sources:
            job = tmp_path / "jobs" / f"job-{n:04d}"
            job.mkdir(parents=True)
            for f in files:
                shutil.copyfile(f, job / f.name)
                ts = 1_796_000_000 + (n % 12) * 86400 + n * 37
                os.utime(job / f.name, (ts, ts))
            n += 1
    assert n >= 200
    lines = tmp_path / "triage.jsonl"
    assert triage.main([str(tmp_path / "jobs" / "*"), "-o", str(lines), "--jobs", "2",
                        "--reports", str(tmp_path / "reports")], index_path=index_file) == 0
    triaged = read_lines(lines)
    assert len(triaged) == n and {x["outcome"] for x in triaged} >= {"known", "clean"}
    out = tmp_path / "page"
    assert fleet.main(["report", str(lines), "-o", str(out)]) == 0
    index_html = (out / "index.html").read_text()
    pages = [out / "index.html"] + sorted((out / "jobs").glob("*.html"))
    for page in pages:
        html = page.read_text()
        for href in re.findall(r'href="((?:jobs/|\.\./)?[\w.-]+\.html)"', html):
            assert (page.parent / href).resolve().is_file(), (page.name, href)
    assert index_html.count("<rect ") == 12                      # one bar per day
    known = [x for x in triaged if x["primary"]]
    eid = max({x["primary"]["id"] for x in known}, key=lambda e: sum(x["primary"]["id"] == e for x in known))
    listed = re.findall(r'<tr id="job-(job-\d+)">', (out / "jobs" / f"{eid}-1.html").read_text())
    theirs = [x for x in known if x["primary"]["id"] == eid]
    assert len(theirs) <= fleet.PAGE_SIZE and sorted(listed) == sorted(x["job"] for x in theirs)
    by_job = {x["job"]: x["ended"] for x in theirs}
    assert [by_job[j] for j in listed] == sorted(by_job.values(), reverse=True)     # newest first
    # each listed job has its own page, made from the same view as the CLI's text report
    from faildex.render import to_text, view
    for x in theirs[:10]:
        report = json.loads(Path(x["report"]).read_text())
        job_page = (out / "jobs" / f"job-{x['job']}.html").read_text()
        v = view(report)
        assert html_unescape(v["primary"]["title"]) in html_unescape(job_page) and v["primary"]["link"] in job_page
        if v["verdict"]:
            assert html_unescape(v["verdict"]) in html_unescape(job_page) and v["verdict"] in to_text(report)
        assert all(e["at"] in job_page for e in v["evidence"])
    assert fleet.main(["metrics", str(lines)]) == 0
    metrics = capsys.readouterr().out
    assert f'faildex_failures{{entry="{eid}"' in metrics and f'faildex_jobs{{outcome="known"}} {len(known)}' in metrics


def test_the_fleet_page_starts_with_the_failures_of_the_last_24_hours(tmp_path):
    lines = [_line("old", "gpu-ecc-error", ["n1"], ended="2026-12-02T09:00:00Z"),
             _line("day-before", "cuda-out-of-memory", ["n1"], ended="2026-12-03T09:59:00Z"),
             _line("recent-1", "cuda-out-of-memory", ["n1"], ended="2026-12-03T10:01:00Z"),
             _line("recent-2", "nvlink-error", ["n2"], ended="2026-12-04T08:00:00Z"),
             _line("newest", None, ["n3"], ended="2026-12-04T10:00:00Z")]     # clean: sets the clock only
    lines[3]["suspects"] = [{"rank": 5, "host": "n2", "kind": "crashed", "why": "x"}]
    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert [r["job"] for r in fleet.latest_failures(fleet.aggregate([str(src)]))] == ["recent-2", "recent-1"]
    assert fleet.main(["report", str(src), "-o", str(tmp_path / "p")]) == 0
    html = (tmp_path / "p" / "index.html").read_text()
    latest = html[html.index('id="latest"'):html.index('id="changes"')]
    assert latest.index("recent-2") < latest.index("recent-1") and "old" not in latest
    assert "rank 5 on n2" in latest and 'href="jobs/nvlink-error-1.html"' in latest
    assert html.index('id="latest"') < html.index('id="drain"')
