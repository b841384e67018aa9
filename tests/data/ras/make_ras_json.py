"""Make the NCCL RAS JSON documents of this folder with NCCL's own writer code.

    python tests/data/ras/make_ras_json.py NCCL_GIT_DIR

No GPU job here can run `ncclras -f json`, so the documents are printed by the JSON writer
functions of NCCL's src/ras/client_support.cc (jsonWriteHeader .. jsonWriteFooter), cut out
of the named release and compiled with gcc around a scenario whose state is set below:
the bytes are what that release prints for that state, including 2.28.7/2.28.9's missing
comma after a missing rank's "nvml_dev" (fixed in 2.29.2). ncclFuncToString and the
function enum are NCCL's too (src/collectives.cc, src/include/nccl_common.h).
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def show(git: str, tag: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", git, "show", f"{tag}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def writer(git: str, tag: str) -> str:
    src = show(git, tag, "src/ras/client_support.cc")
    start = src.index("// Writes the JSON document header")
    end = src.index("///", src.index("static void jsonWriteFooter", start))
    common = show(git, tag, "src/include/nccl_common.h")
    enum = re.search(r"typedef enum \{\s*ncclFuncBroadcast.*?\} ncclFunc_t;", common, re.S).group(0)
    names = show(git, tag, "src/collectives.cc")
    func = re.search(r"const char\* ncclFuncToString\(ncclFunc_t fn\) \{.*?\n\}", names, re.S).group(0)
    return ("#include <stdio.h>\n#include <stdbool.h>\n#define rasOutAppend printf\n"
            "#define NCCL_NUM_FUNCTIONS 5\n" + enum + "\n" + func + "\n" + src[start:end])


# (tag, file, the scenario's calls)
SCENARIOS = [
    # 8 ranks on two hosts; rank 5 has launched one AllReduce fewer than the others (its
    # Python thread stopped before the next step's all-reduce), the others wait in #1205
    ("v2.30.7-1", "ras-2.30.7-rank5-behind.json", """
  jsonWriteHeader("2.30.7", 13000, 13000, "2026-12-08 02:30:11", 1);
  jsonStartCommunicator(0x6a1f3c0de4b2a977UL, 0x2cd6d618b4a75a5aUL, 0xe6854f9ece96c663UL, 8, 8, 0, true);
  for (int r = 0; r < 8; r++) {
    unsigned long counts[5] = {1, 0, 2, 0, r == 5 ? 1204 : 1205};
    jsonWriteRankData(r, r < 4 ? "10.0.77.184" : "10.0.77.185", 8813 + r, r % 4, r % 4, 0, 0, false, false, false,
                      counts, r == 0);
  }
  jsonStartMissingRanks();
  jsonEndCommunicator();
  jsonWriteFooter(0.412, 0);
"""),
    # 4 ranks; RAS has no data from rank 3 (its process stopped answering), the others agree
    ("v2.28.9-1", "ras-2.28.9-rank3-missing.json", """
  jsonWriteHeader("2.28.9", 12090, 13000, "2026-12-08 02:31:40", 1);
  jsonStartCommunicator(0x514e98cf4e44862bUL, 0x2cd6d618b4a75a5aUL, 0xe6854f9ece96c663UL, 4, 3, 1, true);
  for (int r = 0; r < 3; r++) {
    unsigned long counts[5] = {1, 0, 0, 0, 311};
    jsonWriteRankData(r, "10.0.77.184", 9120 + r, r, r, 0, 0, false, false, false, counts, r == 0);
  }
  jsonStartMissingRanks();
  jsonWriteMissingRank(3, "10.0.77.186", 9123, 3, 3, true, false, true);
  jsonEndCommunicator();
  jsonWriteFooter(5.007, 1);
"""),
    # a healthy job: two communicators, every rank reporting, the same counts everywhere
    ("v2.29.7-1", "ras-2.29.7-healthy.json", """
  jsonWriteHeader("2.29.7", 13000, 13000, "2026-12-08 02:33:05", 2);
  for (int c = 0; c < 2; c++) {
    jsonStartCommunicator(c ? 0x1b2c3d4e5f607182UL : 0x7e3a9b1c2d4f5061UL, 0x2cd6d618b4a75a5aUL,
                          0xe6854f9ece96c663UL, 4, 4, 0, c == 0);
    for (int r = 0; r < 4; r++) {
      unsigned long counts[5] = {c ? 0 : 1, 0, c ? 88 : 0, c ? 88 : 0, c ? 0 : 2950};
      jsonWriteRankData(r, "10.0.77.184", 7001 + r, r, r, 0, 0, false, false, false, counts, r == 0);
    }
    jsonStartMissingRanks();
    jsonEndCommunicator();
  }
  jsonWriteFooter(0.208, 0);
"""),
]


def main(git: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for tag, name, calls in SCENARIOS:
            c = Path(tmp) / "ras.c"
            c.write_text(writer(git, tag) + "\nint main(void) {" + calls + "  return 0;\n}\n")
            exe = Path(tmp) / "ras"
            subprocess.run(["gcc", "-w", "-o", str(exe), str(c)], check=True)
            out = subprocess.run([str(exe)], check=True, capture_output=True).stdout
            (HERE / name).write_bytes(out)
            print(name, len(out), "bytes")


if __name__ == "__main__":
    main(sys.argv[1])
