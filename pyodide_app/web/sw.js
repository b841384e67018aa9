// faildex service worker (site root: its scope is the whole site). The build puts
// VERSION and FILES (every page and asset of this build) above this line.
//
// Install: cache every file of FILES, so that after one visit the pages, the search
// index and the diagnoser (Pyodide, the engine, its index) work with the network off.
// Fetch: same-origin GETs come from that cache when they are in it, else from the
// network. A new build has a new VERSION: its worker fills a new cache, takes over,
// and deletes the old one. Nothing is ever fetched from another origin.
const CACHE = `faildex-${VERSION}`;
const SCOPE = new URL(self.registration.scope);

self.addEventListener("install", (event) => {
  event.waitUntil((async () => {
    const cache = await caches.open(CACHE);
    // One file at a time: a slow link still makes progress, and a missing file (a host
    // that dropped it) does not stop the rest.
    for (const f of FILES) {
      const url = new URL(f, SCOPE).href;
      if (await cache.match(url)) continue;
      try {
        const res = await fetch(url, { cache: "no-cache" });
        if (res.ok) await cache.put(url, res);
      } catch { /* offline during install: what is cached so far stays */ }
    }
    await self.skipWaiting();
  })());
});

self.addEventListener("activate", (event) => {
  event.waitUntil((async () => {
    for (const key of await caches.keys()) {
      if (key.startsWith("faildex-") && key !== CACHE) await caches.delete(key);
    }
    await self.clients.claim();
  })());
});

self.addEventListener("fetch", (event) => {
  const req = event.request;
  const url = new URL(req.url);
  if (req.method !== "GET" || url.origin !== SCOPE.origin) return;
  event.respondWith((async () => {
    const cache = await caches.open(CACHE);
    // ?text=... filters a page in the browser: the page itself is the same file
    const hit = await cache.match(req, { ignoreSearch: req.mode === "navigate" });
    if (hit) return hit;
    try {
      return await fetch(req);
    } catch (err) {
      // a directory URL typed without its slash
      const again = req.mode === "navigate" && await cache.match(url.pathname + "/");
      if (again) return again;
      throw err;
    }
  })());
});
