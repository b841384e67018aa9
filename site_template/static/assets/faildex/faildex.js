// Every page. Filters for the tables of "All entries" (category, severity, system, text) and the
// "Error index" (text). A file, not an inline script: the site's CSP forbids those.
// Without JavaScript the tables are complete and the filter controls stay hidden.
(function () {
  "use strict";

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
      var shown = 0;
      rows.forEach(function (r, i) {
        var ok = (!want.category || r.dataset.category === want.category) &&
          (!want.severity || r.dataset.severity === want.severity) &&
          (!want.system || (" " + (r.dataset.systems || "") + " ").indexOf(" " + want.system + " ") >= 0) &&
          (!text || texts[i].indexOf(text) >= 0);
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
  }

  function init() {
    Array.prototype.forEach.call(document.querySelectorAll("[data-fdx-filter-for]"), setUp);
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
