"""bench/suite.py's report, on a timeline whose figures are known."""
from bench.suite import make_test_options, report


def _events(worker, test, start, end):
    return [{"worker": worker, "test": test, "at": "start", "t": start},
            {"worker": worker, "test": test, "at": "end", "t": end}]


def test_the_report_gives_each_workers_busy_time_and_the_lone_tail():
    events = (_events("gw0", "a", 110, 150) + _events("gw0", "b", 150, 160)
              + _events("gw1", "c", 110, 300)
              # the controller replays what the workers report: not counted twice
              + _events("main", "a", 110, 150))
    text = report(events, started=100, ended=310, top=2)
    assert "wall 210 s, 2 worker(s)" in text
    assert "gw0: first test at 10 s, busy 50 s, idle from 60 s" in text
    assert "gw1: first test at 10 s, busy 190 s, idle from 200 s" in text
    assert "the last worker ran alone for 140 s" in text
    longest = text.split("longest 2 tests")[1].splitlines()[1:]
    assert [ln.split()[-1] for ln in longest] == ["c", "a"]


def test_a_run_without_workers_reads_the_controllers_events():
    text = report(_events("main", "a", 0, 5), started=0, ended=6)
    assert "1 worker(s)" in text and "main: first test at 0 s, busy 5 s" in text


def test_the_suite_is_timed_with_make_tests_options():
    options = make_test_options()
    assert options[:3] == ["-q", "-n", "auto"] and "--maxprocesses" in options
