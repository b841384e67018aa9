"""Screenshots of entry pages on a phone and a laptop, with where the first move ends.

    .venv/bin/mkdocs build --strict && .venv/bin/python bench/shots.py [ENTRY ...] [--out DIR]

Serves the built site (site/) on 127.0.0.1, opens each entry page in Debian's Chromium
at 390x844 and 1280x800 (no service worker), saves the first screen as
DIR/<entry>-<width>.png and prints the page's height, the bottom of the first move
(`.fdx-first-move`) and whether the page scrolls sideways. Default entries: the three
that were longest in prose on 2026-12-05.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LONG = ["nccl-watchdog-timeout", "worker-sigterm-preemption", "collective-hang-one-rank-stuck"]
SIZES = [(390, 844), (1280, 800)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("entries", nargs="*", default=LONG)
    ap.add_argument("--site", default=str(REPO / "site"))
    ap.add_argument("--out", default="/tmp/faildex-shots")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=args.site))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        for w, h in SIZES:
            context = browser.new_context(viewport={"width": w, "height": h}, service_workers="block")
            page = context.new_page()
            for e in args.entries:
                page.goto(f"{origin}/entries/{e}/")
                page.wait_for_timeout(400)      # the theme lays the page out after load
                page.screenshot(path=str(out / f"{e}-{w}.png"))
                height = page.evaluate("document.scrollingElement.scrollHeight")
                move = page.evaluate("(() => { const m = document.querySelector('.fdx-first-move');"
                                     " return m ? Math.round(m.getBoundingClientRect().bottom) : null; })()")
                sideways = not page.evaluate("document.scrollingElement.scrollWidth <= innerWidth + 1")
                print(f"{e:36} {w:5} px wide: page {height} px tall, first move ends at {move} px "
                      f"(screen {h}), scrolls sideways: {sideways}")
            context.close()
        browser.close()
    server.shutdown()
    print(f"screenshots in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
