"""The third option for "paste an error, get the entry": Pagefind (npm), measured once.

    mkdir /tmp/pf && (cd /tmp/pf && npm install pagefind@1)     # not a project dependency
    cp -r site /tmp/pf-site && /tmp/pf/node_modules/.bin/pagefind --site /tmp/pf-site --glob "entries/**/*.html"
    .venv/bin/python bench/search_pagefind.py --site /tmp/pf-site

Runs Pagefind's own search API (pagefind.js, in Chromium, from a page without the
site's CSP) for every query of tests/searchkit.py and prints how often the right entry
is first and in the top 3, in the same table as bench/search.py.
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

PAGE = """<!doctype html><meta charset="utf-8"><title>pagefind</title>
<script type="module">
import * as pagefind from "/pagefind/pagefind.js";
await pagefind.init();
window.pf = pagefind;
</script>
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--site", required=True, help="a copy of the built site indexed by pagefind")
    args = ap.parse_args()
    from generator.validate import validate
    from playwright.sync_api import sync_playwright
    from searchkit import queries
    site = Path(args.site)
    if not (site / "pagefind" / "pagefind.js").is_file():
        raise SystemExit(f"{site}/pagefind/pagefind.js is missing: run pagefind --site {site} first")
    (site / "pagefind-bench.html").write_text(PAGE, encoding="utf-8")
    entries, _ = validate(REPO)
    rows = queries(entries)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                          ".js": "text/javascript", ".wasm": "application/wasm"}

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    score = defaultdict(lambda: defaultdict(int))
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        pg = browser.new_page()
        pg.goto(origin + "/pagefind-bench.html")
        pg.wait_for_function("() => window.pf !== undefined", timeout=60_000)
        for kind, query, want in rows:
            urls = pg.evaluate("""async q => { const r = await window.pf.search(q);
                const d = await Promise.all(r.results.slice(0, 3).map(x => x.data()));
                return d.map(x => x.url); }""", query)
            ids = [m.group(1) for u in urls if (m := re.search(r"/entries/([a-z0-9-]+)/", u))]
            for k in (kind, "all"):
                c = score[k]
                c["n"] += 1
                c["first"] += bool(ids) and ids[0] in want
                c["top3"] += bool(set(ids[:3]) & set(want))
        browser.close()
    server.shutdown()
    for k in ("line", "prefixed", "half", "short", "all"):
        c = score[k]
        print(f"{'pagefind':10} {k:9} {c['n']:4} {c['first'] / c['n']:7.1%} {c['top3'] / c['n']:7.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
