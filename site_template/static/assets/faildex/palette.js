// Light or dark before the page paints: the reader's saved choice (the theme stores it
// as "__palette" when the header toggle is used), else what the system prefers. Loaded
// from the header, right after the toggle's inputs (partials/javascripts/palette.html).
(function () {
  var saved = window.__md_get && window.__md_get("__palette");
  var color = saved && saved.color;
  if (!color) {
    var dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
    var input = document.querySelector("[data-md-color-media='(prefers-color-scheme: " + (dark ? "dark" : "light") + ")']");
    if (!input) return;
    color = { scheme: input.getAttribute("data-md-color-scheme"),
              primary: input.getAttribute("data-md-color-primary"),
              accent: input.getAttribute("data-md-color-accent") };
  }
  Object.keys(color).forEach(function (key) {
    if (key !== "media") document.body.setAttribute("data-md-color-" + key, color[key]);
  });
})();
