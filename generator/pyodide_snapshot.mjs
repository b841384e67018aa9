// node generator/pyodide_snapshot.mjs PYODIDE_DIR WHEEL OUT
//
// Writes OUT: a gzip-compressed memory snapshot of Pyodide (makeMemorySnapshot) taken
// after every module of the faildex wheel was imported. The diagnoser's workers start
// from it (loadPyodide's _loadSnapshot) instead of running Python's bootstrap and the
// imports: measured under node on 2026-12-04, 0.4 s against 4.5 s, and 0.4 s less for
// the imports. The wheel's files are not in the snapshot (Pyodide's file system lives
// in JavaScript), so the modules are imported here, all of them, and nothing in the
// package is read from disk at run time. Called by generator/diagnoser.py at build time.
import { readFileSync, writeFileSync } from "fs";
import { gzipSync } from "zlib";

const [pyodideDir, wheel, out] = process.argv.slice(2);
const { loadPyodide } = await import(new URL(`file://${pyodideDir}/pyodide.mjs`).href);
// (Not reproducible byte for byte: it holds addresses and times; the build keeps one per wheel.)
const py = await loadPyodide({ indexURL: `${pyodideDir}/`, _makeSnapshot: true });
py.FS.writeFile("/tmp/faildex.whl", readFileSync(wheel));
py.runPython(`
import importlib, pkgutil, sys, zipfile
zipfile.ZipFile("/tmp/faildex.whl").extractall("/tmp/faildex-wheel")
sys.path.insert(0, "/tmp/faildex-wheel")
import faildex
for m in pkgutil.walk_packages(faildex.__path__, "faildex."):
    if m.name != "faildex.__main__":
        importlib.import_module(m.name)
import json, pickle  # faildex.browser, the worker's API, uses them
sys.path.remove("/tmp/faildex-wheel")
`);
writeFileSync(out, gzipSync(py.makeMemorySnapshot(), { level: 6 }));
