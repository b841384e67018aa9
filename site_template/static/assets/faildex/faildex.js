// The site's own behaviour, in a file (the CSP forbids inline scripts):
// - "paste an error, get the entry": the header search and the home page's paste box
//   rank entries with FaildexFinder (find.js) over assets/faildex/search.json;
// - filters for the tables of "All entries" (category, severity, system, text) and the
//   "Error index" (the same finder, so a whole error line with its prefixes matches).
// Without JavaScript every table is complete and the controls stay hidden.
// Also: accessible names, and the service worker that keeps the site usable offline.
(function () {
  "use strict";

  // The site root, from this script's own URL (pages sit at any depth).
  var script = document.currentScript;
  var ROOT = script ? script.src.replace(/assets\/faildex\/faildex\.js(?:\?.*)?$/, "") : "/";
  var finder = null;
  var loading = null;

  function loadFinder() {
    if (!loading) {
      loading = fetch(ROOT + "assets/faildex/search.json")
        .then(function (r) { if (!r.ok) throw new Error(r.status); return r.json(); })
        .then(function (data) { finder = new window.FaildexFinder(data); return finder; });
    }
    return loading;
  }

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text) e.textContent = text;
    return e;
  }

  // Hits as a list of links: the first one carries its summary.
  function renderHits(list, hits) {
    list.textContent = "";
    hits.forEach(function (h, i) {
      var li = el("li", { "data-entry-id": h.id, class: "fdx-find__hit" });
      var a = el("a", { href: ROOT + h.url }, h.title);
      li.appendChild(a);
      var meta = el("span", { class: "fdx-find__meta" }, h.category + (h.matched ? " · matches the line" : ""));
      li.appendChild(meta);
      if (i === 0) li.appendChild(el("p", { class: "fdx-find__summary" }, h.summary));
      list.appendChild(li);
    });
  }

  // The header search: our hits above mkdocs-material's full-text results.
  function setUpHeader() {
    var input = document.querySelector("[data-md-component=search-query]");
    var result = document.querySelector("[data-md-component=search-result]");
    if (!input || !result) return;
    var box = el("div", { class: "fdx-find fdx-find--header", "data-testid": "find-header", hidden: "" });
    box.appendChild(el("p", { class: "fdx-find__title" }, "Matching failures"));
    var list = el("ol", { class: "fdx-find__list" });
    box.appendChild(list);
    result.insertBefore(box, result.firstChild);
    var shown = "";
    function update() {
      loadFinder().then(function (f) {
        var q = input.value;
        var hits = q.trim() ? f.rank(q, 5) : [];
        renderHits(list, hits);
        box.hidden = !hits.length;
        shown = q;
        box.setAttribute("data-query", q);
      });
    }
    // One ranking of entries: the theme's full-text list below holds the other pages (guides,
    // categories); entry pages are left out of its index (site_template/pages/entry.md.j2).
    input.addEventListener("focus", loadFinder);
    input.addEventListener("input", update);
    // Enter opens the best match (before the theme opens its first full-text result).
    input.addEventListener("keydown", function (ev) {
      if (ev.key !== "Enter" || !finder || shown !== input.value) return;
      var first = list.querySelector("a");
      if (first) { ev.preventDefault(); ev.stopImmediatePropagation(); window.location.href = first.href; }
    }, true);
  }

  // The home page's paste box: the best entries for what was pasted, as it is pasted.
  function setUpPasteBox(box) {
    var area = box.querySelector("textarea");
    var list = box.querySelector("ol");
    var none = box.querySelector("[data-fdx-none]");
    function update() {
      loadFinder().then(function (f) {
        var hits = area.value.trim() ? f.rank(area.value, 3) : [];
        renderHits(list, hits);
        none.hidden = !(area.value.trim() && !hits.length);
        box.setAttribute("data-query", area.value);
      });
    }
    area.addEventListener("input", update);
    area.addEventListener("focus", loadFinder);
    // Enter opens the best match for the text shown; Shift+Enter is a new line.
    area.addEventListener("keydown", function (ev) {
      if (ev.key !== "Enter" || ev.shiftKey || box.getAttribute("data-query") !== area.value) return;
      var first = list.querySelector("a");
      if (first) { ev.preventDefault(); window.location.href = first.href; }
    });
    box.hidden = false;
    if (area.value) update();
  }

  function setUp(box) {
    var table = document.querySelector('table[data-fdx-table="' + box.dataset.fdxFilterFor + '"]');
    if (!table || !table.tBodies.length) return;
    var controls = Array.prototype.slice.call(box.querySelectorAll("[data-fdx-filter]"));
    var count = box.querySelector("[data-fdx-count]");
    var rows = Array.prototype.slice.call(table.tBodies[0].rows);
    var texts = rows.map(function (r) { return r.textContent.toLowerCase(); });
    var params = new URLSearchParams(window.location.search);
    controls.forEach(function (c) {
      var v = params.get(c.dataset.fdxFilter);
      if (v !== null) c.value = v;
    });

    function apply() {
      var want = {};
      controls.forEach(function (c) { want[c.dataset.fdxFilter] = c.value.trim(); });
      var text = (want.text || "").toLowerCase();
      // A whole error line (prefixes, numbers, paths) is no substring of a row: rows
      // of the entry the finder ranks first for it are shown too (one entry: a family
      // page has a row per message group, and three of them filled the table)
      var found = Object.create(null);
      if (text && finder) finder.rank(want.text, 1).forEach(function (h) { found[h.id] = true; });
      var shown = 0;
      rows.forEach(function (r, i) {
        var ok = (!want.category || r.dataset.category === want.category) &&
          (!want.severity || r.dataset.severity === want.severity) &&
          (!want.system || (" " + (r.dataset.systems || "") + " ").indexOf(" " + want.system + " ") >= 0) &&
          (!text || texts[i].indexOf(text) >= 0 || found[r.dataset.entry || r.dataset.id]);
        r.hidden = !ok;
        if (ok) shown += 1;
      });
      if (count) count.textContent = shown === rows.length ? String(rows.length) : shown + " of " + rows.length;
      var query = new URLSearchParams();
      controls.forEach(function (c) { if (c.value) query.set(c.dataset.fdxFilter, c.value); });
      var q = query.toString();
      window.history.replaceState(null, "", (q ? "?" + q : window.location.pathname) + window.location.hash);
    }

    controls.forEach(function (c) { c.addEventListener("input", apply); });
    box.hidden = false;
    apply();
    loadFinder().then(apply);
  }

  function init() {
    Array.prototype.forEach.call(document.querySelectorAll("[data-fdx-filter-for]"), setUp);
    Array.prototype.forEach.call(document.querySelectorAll("[data-fdx-paste]"), setUpPasteBox);
    setUpHeader();
    // the theme's search dialog has no accessible name
    var search = document.querySelector(".md-search[role=dialog]");
    if (search && !search.hasAttribute("aria-label")) search.setAttribute("aria-label", "Search the site");
  }

  // Offline after one visit: the service worker at the site's root caches every page and
  // the diagnoser (generator/diagnoser.py writes it with the list of files).
  if ("serviceWorker" in navigator && window.isSecureContext) {
    navigator.serviceWorker.register(new URL("../../sw.js", document.currentScript.src))
      .catch(function () { /* a host without sw.js: the site works online as before */ });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
