// Sortable tables on the fleet pages (faildex fleet report), from a file: the pages' CSP
// allows scripts from their own folder only, never inline. A column header becomes a
// button; pressing it sorts the rows by that column (numbers as numbers, "12 %" and
// "3 (2 named)" by their first number, text as text), again to reverse. Without script
// the tables keep the order the report wrote them in.
(function () {
  "use strict";
  var NUMBER = /^\s*(-?\d+(?:\.\d+)?)/;

  function key(cell) {
    var text = (cell.getAttribute("data-sort") || cell.textContent || "").trim();
    var m = NUMBER.exec(text);
    return m && /^[-\d.]/.test(text) ? { n: parseFloat(m[1]), t: text } : { n: null, t: text.toLowerCase() };
  }

  function sortBy(table, col, th) {
    var body = table.tBodies[0];
    var asc = th.getAttribute("aria-sort") !== "ascending";
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (c) { c.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", asc ? "ascending" : "descending");
    var rows = Array.prototype.slice.call(body.rows).map(function (r, i) {
      return { r: r, i: i, k: r.cells[col] ? key(r.cells[col]) : { n: null, t: "" } };
    });
    rows.sort(function (a, b) {
      var d;
      if (a.k.n !== null && b.k.n !== null) d = a.k.n - b.k.n;
      else if (a.k.n !== null || b.k.n !== null) d = a.k.n !== null ? -1 : 1;   // numbers first
      else d = a.k.t < b.k.t ? -1 : a.k.t > b.k.t ? 1 : 0;
      return (asc ? d : -d) || a.i - b.i;
    });
    rows.forEach(function (x) { body.appendChild(x.r); });
  }

  Array.prototype.forEach.call(document.querySelectorAll("table"), function (table) {
    if (!table.tHead || !table.tBodies.length || table.tBodies[0].rows.length < 2) return;
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, col) {
      if (th.querySelector("a")) return;        // a header that is a link stays a link
      var b = document.createElement("button");
      b.type = "button";
      b.className = "fdx-sort";
      b.textContent = th.textContent;
      b.setAttribute("aria-label", "Sort by " + th.textContent);
      b.addEventListener("click", function () { sortBy(table, col, th); });
      th.textContent = "";
      th.appendChild(b);
    });
  });
})();
