// mkdocs-material defines these helpers in an inline <script>, which the site's
// Content-Security-Policy (script-src 'self') blocks. The same helpers, from a file,
// loaded before the theme's bundle. This file lives at <site>/assets/faildex/.
(function () {
  var scope = new URL("../../", document.currentScript.src);
  window.__md_scope = scope;
  window.__md_hash = function (text) {
    return Array.from(text).reduce(function (h, c) { return (h << 5) - h + c.charCodeAt(0); }, 0);
  };
  window.__md_get = function (key, storage, at) {
    storage = storage || localStorage;
    at = at || window.__md_scope;
    return JSON.parse(storage.getItem(at.pathname + "." + key));
  };
  window.__md_set = function (key, value, storage, at) {
    storage = storage || localStorage;
    at = at || window.__md_scope;
    try { storage.setItem(at.pathname + "." + key, JSON.stringify(value)); } catch (e) { /* full or denied */ }
  };
})();
