"""faildex.browser, the API the in-browser worker calls, under CPython: the same calls in
the same order as pyodide_app/web/worker.js makes them (tests/test_browser.py drives the
real worker in Chromium)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from faildex import diagnose
from faildex.browser import Session, excerpt

ROOT = Path(__file__).resolve().parent.parent
RANKS = ROOT / "tests" / "corpus" / "ranks" / "dev"
CONSOLE = RANKS / "r08-json-keyerror-2x2"          # a real 4-rank job, JSON lines of a shipper
R22 = RANKS / "r22-logdir-colldtype-w3-fr"         # logs and two flight-recorder dumps


@pytest.fixture(scope="module")
def index_text(index):
    return json.dumps(index)


def whole(session: Session, path: Path, chunk: int = 1 << 16) -> None:
    data = path.read_bytes()
    for i in range(0, len(data), chunk):
        session.feed(path.name, memoryview(data)[i:i + chunk])   # not bytes: as a JsProxy is not
    session.close(path.name, None)


def test_a_whole_file_gives_the_engines_report_and_what_the_page_shows(index, index_text):
    log = next(CONSOLE.iterdir())
    s = Session(index_text)
    whole(s, log)
    out = json.loads(s.finish())
    direct = diagnose([str(log)], index)
    assert out["report"]["verdict"] == direct["verdict"] and out["report"]["verdict"]
    assert [x["rank"] for x in out["report"]["suspects"]] == [x["rank"] for x in direct["suspects"]]
    assert out["markdown"].startswith("#") and out["report"]["verdict"].split(" ")[1] in out["markdown"]
    # the page renders the view the CLI's text and Markdown render (render.view), not the report
    assert out["view"]["verdict"] == direct["verdict"]
    assert [x["who"] for x in out["view"]["suspects"]] == [f"rank {x['rank']}" + (f" on {x['host']}" if x.get("host") else "")
                                                           for x in direct["suspects"]]
    share = json.loads(out["share"])
    assert share["v"] == 2 and share["suspects"][0]["rank"] == direct["suspects"][0]["rank"]
    assert share["verdict"] and share["fact_rows"] is not None and share["timeline"] == []
    for host in direct["facts"].get("hosts", []):
        assert host not in out["share"] and host not in out["markdown"]     # redacted
    # the next scan starts from nothing
    s.start()
    assert json.loads(s.finish())["report"]["primary"] is None


def test_ranges_scanned_by_other_workers_merge_into_the_same_report(index_text):
    log = next(CONSOLE.iterdir())
    data = log.read_bytes()
    # three ranges cut just after a newline, as worker.js's splitPoints does
    cuts = [0] + [data.index(b"\n", len(data) * k // 3) + 1 for k in (1, 2)] + [len(data)]
    main = Session(index_text)
    order = main.order_of(log.name)
    parts = []
    for k in range(3):
        scanner = Session(index_text)        # another worker: its own engine
        scanner.part_start(log.name, order, cuts[k], data[max(0, cuts[k] - 8192):cuts[k]])
        for i in range(cuts[k], cuts[k + 1], 4096):
            scanner.part_feed(data[i:min(i + 4096, cuts[k + 1])])
        parts.append(scanner.part_finish(k == 2))
    for k in (2, 0, 1):                      # they arrive in any order
        main.part_adopt(log.name, k, parts[k])
    main.parts_merge(log.name)
    merged = json.loads(main.finish())["report"]
    alone = Session(index_text)
    whole(alone, log)
    single = json.loads(alone.finish())["report"]
    assert merged["verdict"] == single["verdict"]
    assert [(e["line"], e["text"]) for e in merged["evidence"]] == [(e["line"], e["text"]) for e in single["evidence"]]


def test_dumps_are_told_from_logs_and_a_bad_one_is_refused_in_one_line(index_text):
    s = Session(index_text)
    dump = next((R22 / "fr").iterdir())
    assert s.dump_kind(dump.read_bytes()[:8192]) == "fr"
    assert s.dump_kind(b"[rank0]: hello\n") == ""
    ras = ROOT / "tests" / "data" / "ras" / "ras-2.30.7-rank5-behind.json"
    assert s.dump_kind(ras.read_bytes()[:8192]) == "ras"
    assert s.add_dump(dump.name, dump.read_bytes()) == ""
    why = s.add_dump("comm_lib_trace_rank_7", b"\x80\x05not a pickle at all")
    assert why.startswith("comm_lib_trace_rank_7") and "\n" not in why


def test_an_unmatched_logs_excerpt_is_its_error_lines_redacted(index_text):
    s = Session(index_text)
    s.feed("job.log", b"starting on host gpu-node-17\nstep 1 ok\n"
                      b"Traceback (most recent call last):\n  File \"t.py\", line 3, in <module>\n"
                      b"ZorbleError: the zorble on gpu-node-17 is out of flux\n")
    s.close("job.log", None)
    out = json.loads(s.finish())
    assert out["excerpt"] == excerpt(out["report"])
    assert "ZorbleError" in out["excerpt"]
