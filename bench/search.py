"""Which search puts the right entry first? mkdocs-material's own (lunr) against find.js.

    .venv/bin/mkdocs build --strict && .venv/bin/python bench/search.py [--site site]

Types every query of tests/searchkit.py (each defining signature's line as printed,
with a prefix, cut in half, and the short queries people type) into the header search
of the built site in real Chromium, and reads two rankings from the same dropdown:
"Matching failures" (find.js over search.json) and the theme's full-text results
below it (lunr, with the separator of mkdocs.yml). Prints, per kind of query, how
often the right entry is first and in the top 3. A measurement, not a test: the test
with its bar is tests/test_browser.py::test_header_search_puts_the_right_entry_first.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import re
import sys
import threading
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

CHROMIUM = "/usr/bin/chromium"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--site", default=str(REPO / "site"), help="the built site (default: site/)")
    ap.add_argument("--every", type=int, default=1,
                    help="measure every Nth query only (the theme's search needs ~1 s a query)")
    ap.add_argument("--kind", choices=("line", "prefixed", "half", "short"), help="only this kind of query")
    ap.add_argument("--find-only", action="store_true", help="measure find.js only (no wait for the theme)")
    ap.add_argument("--dev", action="store_true",
                    help="the development queries (tests/corpus/search-dev, from other public threads; may be "
                         "read): figures and every miss")
    ap.add_argument("--heldout", action="store_true",
                    help="the held-out queries (tests/corpus/search-heldout: what people typed in public "
                         "threads, never read to tune the search); prints figures only, never a query")
    ap.add_argument("--queries", help="a YAML file of queries in search-dev's form (e.g. a new batch not yet "
                                      "added to the development set): figures and every miss")
    args = ap.parse_args()
    from generator.validate import validate
    from searchkit import queries
    from playwright.sync_api import sync_playwright
    entries, problems = validate(REPO)
    if problems:
        raise SystemExit("entries do not validate: run faildex validate")
    rows = (heldout() if args.heldout else heldout(DEV) if args.dev
            else heldout(Path(args.queries)) if args.queries else queries(entries))
    rows = [r for r in rows if args.kind in (None, r[0])][::args.every]
    misses = []
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a):
            pass

    handler = functools.partial(Quiet, directory=args.site)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    score = defaultdict(lambda: defaultdict(int))   # (engine, kind) -> counts
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        pg = browser.new_page(viewport={"width": 1280, "height": 900})
        pg.goto(origin + "/errors/")
        pg.click("[data-md-component=search-query]")
        pg.wait_for_function("() => !/Initializing/.test(document.querySelector('.md-search-result__meta').textContent)",
                             timeout=60_000)
        for kind, query, want in rows:
            pg.fill("[data-md-component=search-query]", "")
            pg.press("[data-md-component=search-query]", "End")
            pg.fill("[data-md-component=search-query]", query)
            pg.press("[data-md-component=search-query]", "End")   # the theme reads key events
            pg.wait_for_function(
                "q => document.querySelector('[data-testid=find-header]').getAttribute('data-query') === q",
                arg=query, timeout=10_000)
            if not args.find_only:
                pg.wait_for_timeout(700)   # the theme's worker answers asynchronously
            ours = pg.locator("[data-testid=find-header] li").evaluate_all("els => els.map(e => e.dataset.entryId)")
            hrefs = pg.locator(".md-search-result__item > a").evaluate_all("els => els.map(e => e.href)")
            theirs = list(dict.fromkeys(m.group(1) for h in hrefs if (m := re.search(r"/entries/([a-z0-9-]+)/", h))))
            for engine, ranked in (("find.js", ours), ("material", theirs)):
                c = score[(engine, kind)]
                c["n"] += 1
                c["first"] += bool(ranked) and ranked[0] in want
                c["top3"] += bool(set(ranked[:3]) & set(want))
                if engine == "find.js" and not set(ranked[:3]) & set(want) and not args.heldout:
                    misses.append(f"  {kind:8} want {want[0]:<32} got {ranked[:3]}  {query[:120]!r}")
        browser.close()
    server.shutdown()
    print(f"{'engine':10} {'kind':9} {'n':>4} {'first':>7} {'top 3':>7}")
    for engine in ("find.js",) if args.find_only else ("find.js", "material"):
        total = defaultdict(int)
        for kind in KINDS:
            c = score[(engine, kind)]
            for k in ("n", "first", "top3"):
                total[k] += c[k]
            if c["n"]:
                print(f"{engine:10} {kind:9} {c['n']:4} {c['first'] / c['n']:7.1%} {c['top3'] / c['n']:7.1%}")
        print(f"{engine:10} {'all':9} {total['n']:4} {total['first'] / total['n']:7.1%} {total['top3'] / total['n']:7.1%}")
    if misses:
        print("find.js, right entry not in the top 3:\n" + "\n".join(misses))
    return 0


KINDS = ("line", "prefixed", "half", "short", "cut", "older", "typo", "question")
HELDOUT = REPO / "tests" / "corpus" / "search-heldout" / "queries.yaml"
DEV = REPO / "tests" / "corpus" / "search-dev" / "queries.yaml"


def heldout(path: Path = HELDOUT) -> list[tuple[str, str, tuple]]:
    """(kind, query, wanted entries) of a set of queries from public threads (the held-out
    set, else the given one); a query no entry answers (want: []) is left out: the header
    search always lists its nearest entries, so it has no right answer."""
    from ruamel.yaml import YAML
    items = YAML(typ="safe").load(path.read_text(encoding="utf-8"))
    return [(q["kind"], q["q"], tuple(q["want"])) for q in items if q["want"]]


if __name__ == "__main__":
    sys.exit(main())
