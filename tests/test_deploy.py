"""The Slurm epilog runs against a fake job folder; the Kubernetes examples parse."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from ruamel.yaml import YAML

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "pyodide_app" / "deploy"
OOM_LOG = ROOT / "entries" / "cuda" / "cuda-out-of-memory" / "deepspeed-rank3.log"


@pytest.fixture(scope="module")
def faildex_cmd(index, tmp_path_factory) -> tuple[str, str]:
    """The faildex command of this checkout, and the test's index for FAILDEX_INDEX."""
    exe = shutil.which("faildex", path=str(ROOT / ".venv" / "bin")) or shutil.which("faildex")
    assert exe, "faildex is not installed (make setup)"
    idx = tmp_path_factory.mktemp("idx") / "index.json"
    idx.write_text(json.dumps(index))
    return exe, str(idx)


def run_epilog(tmp_path, faildex_cmd, **env):
    base = {"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "4242", "SLURMD_NODENAME": "gpu-node07",
            "SLURM_JOB_NODELIST": "gpu-node07", "FAILDEX": faildex_cmd[0],
            "FAILDEX_INDEX": faildex_cmd[1],
            "FAILDEX_JOB_DIR": str(tmp_path / "runs" / "%j"),
            "FAILDEX_LINES_DIR": str(tmp_path / "lines")}
    base.update(env)
    return subprocess.run(["/bin/sh", str(DEPLOY / "slurm-epilog.sh")], env=base,
                          capture_output=True, text=True, timeout=300)


def test_slurm_epilog_writes_the_jobs_line(tmp_path, faildex_cmd):
    job = tmp_path / "runs" / "4242"
    job.mkdir(parents=True)
    (job / "slurm-4242.out").write_bytes(OOM_LOG.read_bytes())
    p = run_epilog(tmp_path, faildex_cmd)
    assert p.returncode == 0, p.stderr
    [out] = list((tmp_path / "lines").glob("*-gpu-node07.jsonl"))
    [line] = [json.loads(x) for x in out.read_text().splitlines()]
    assert line["job"] == "4242"
    assert line["primary"]["id"] == "cuda-out-of-memory"
    assert "gpu-node07" in line["hosts"]
    # requeued job, epilog again: no second line
    assert run_epilog(tmp_path, faildex_cmd).returncode == 0
    assert len(out.read_text().splitlines()) == 1


def test_slurm_epilog_keeps_the_node_list_when_scontrol_cannot_expand_it(tmp_path, faildex_cmd):
    # scontrol installed on a host without slurm.conf prints an error and no names: the
    # job's node list as Slurm gave it still names the hosts
    job = tmp_path / "runs" / "4242"
    job.mkdir(parents=True)
    (job / "slurm-4242.out").write_bytes(OOM_LOG.read_bytes())
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "scontrol").write_text("#!/bin/sh\necho 'scontrol: error: resolve_ctls_from_dns_srv: res_nsearch error' >&2\nexit 1\n")
    (fake / "scontrol").chmod(0o755)
    p = run_epilog(tmp_path, faildex_cmd, PATH=f"{fake}:/usr/bin:/bin")
    assert p.returncode == 0, p.stderr
    [out] = list((tmp_path / "lines").glob("*-gpu-node07.jsonl"))
    [line] = [json.loads(x) for x in out.read_text().splitlines()]
    assert line["primary"]["id"] == "cuda-out-of-memory" and "gpu-node07" in line["hosts"]


def test_slurm_epilog_never_fails_the_node(tmp_path, faildex_cmd):
    # no logs at all, and a faildex that fails: exit 0 both times (Slurm would drain)
    assert run_epilog(tmp_path, faildex_cmd).returncode == 0
    (tmp_path / "runs" / "4242").mkdir(parents=True)
    (tmp_path / "runs" / "4242" / "x.log").write_text("hello\n")
    p = run_epilog(tmp_path, faildex_cmd, FAILDEX="/bin/false")
    assert p.returncode == 0
    assert "did not finish" in p.stderr


def test_kubernetes_examples_run_faildex_triage():
    docs = {p.name: list(YAML(typ="safe").load_all(p.read_text())) for p in DEPLOY.glob("k8s-*.yaml")}
    assert docs["k8s-cronjob.yaml"][0]["kind"] == "CronJob"
    assert docs["k8s-job-sidecar.yaml"][0]["kind"] == "Job"
    for name, [doc] in docs.items():
        assert "faildex triage" in json.dumps(doc), name
