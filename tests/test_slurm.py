"""The slurm launcher, live: a loopback Slurm (munged, slurmctld, slurmd n1 and n2, each in
its own UTS namespace) runs the probe through srun on both MPIs, kills a hung job, runs a
plain program on one node, and serves the CLI."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import slurm_loopback
from test_interrupt import assert_stopped_and_stored, start_hung_probe, wait_for_nothing_left

from clustertune.grid import slurm as grid_slurm
from clustertune.launch.launchers import launcher_for
from clustertune.levels.probe.run import probe_job
from clustertune.sources import resolve_cluster

pytestmark = pytest.mark.skipif(
    slurm_loopback.unavailable() is not None, reason=str(slurm_loopback.unavailable())
)

# Pseudo-nodes share one machine: keep Open MPI off shared memory (vader crashes when
# "different nodes" share a host) and on loopback TCP, whatever eth0 is doing.
MPI_ENV = {
    "openmpi": {"OMPI_MCA_btl": "self,tcp", "OMPI_MCA_btl_tcp_if_include": "lo"},
    "mpich": {},
}
LIBRARY = {"openmpi": "Open MPI", "mpich": "MPICH"}

CLUSTER_TOML = """\
name = "loop"
launcher = "slurm"
mpi = ["openmpi", "mpich"]

[slurm]
partition = "{partition}"

[[hosts]]
name = "n1"
cores = 2

[[hosts]]
name = "n2"
cores = 2
"""


def test_loopback_runs_the_grid_sites_slurm_conf(tmp_path):
    """The loopback Slurm these tests stand up is configured as a virtual grid's site is
    (a copy of the settings had drifted: SlurmdTimeout 30 here, 10 there); only where it
    runs differs: names, addresses, ports and paths."""
    site = {
        "name": "site0",
        "dir": str(tmp_path / "grid"),
        "head": "host0",
        "hosts": [{"name": "host0", "address": "10.213.0.10"}],
    }
    Path(site["dir"]).mkdir()
    grid_slurm.write_conf("g", site, 2)
    loop = slurm_loopback.SlurmLoopback(tmp_path / "loop")
    loop.munge.rmdir()  # only its slurm.conf is wanted here
    loop.dir.mkdir()
    loop.write_conf()

    def settings(path: Path) -> dict[str, str]:
        pairs = (line.split("=", 1) for line in path.read_text().splitlines())
        return {key: value for key, value in pairs if key not in PLACE}

    assert settings(loop.conf) == settings(grid_slurm.conf_path(site))


PLACE = {
    "ClusterName",
    "SlurmctldHost",
    "SlurmctldPort",
    "SlurmdPort",
    "AuthInfo",
    "StateSaveLocation",
    "SlurmdSpoolDir",
    "TmpFS",
    "SlurmctldPidFile",
    "SlurmdPidFile",
    "SlurmctldLogFile",
    "SlurmdLogFile",
    "NodeName",
    "PartitionName",
}


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    with slurm_loopback.slurm_loopback(tmp_path_factory.mktemp("slurm")) as cluster:
        yield cluster
    assert not cluster.marked(), "loopback Slurm processes left behind"


@pytest.fixture
def cluster_file(slurm, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_CONF", str(slurm.conf))
    path = tmp_path / "loop.toml"
    path.write_text(CLUSTER_TOML.format(partition=slurm.partition))
    return path


def command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "?"


@pytest.mark.parametrize("mpi", ("openmpi", "mpich"))
def test_probe_through_srun(slurm, cluster_file, store, mpi):
    cluster = resolve_cluster(str(cluster_file))
    record = probe_job(cluster, store, 4, mpi, env=MPI_ENV[mpi], timeout=30)
    assert (record["status"], record["verification"]) == ("ok", "passed"), record["error"]
    assert record["figures"]["ranks"] == 4
    assert record["meta"]["commands"][0][0] == "srun"
    # each slurmd has its node's UTS name: cyclic distribution puts rank r on n(r % 2 + 1)
    placement = {s["rank"]: s["host"] for s in record["samples"]}
    assert placement == {r: f"n{r % 2 + 1}" for r in range(4)}
    assert all(LIBRARY[mpi] in s["library"] for s in record["samples"])


@pytest.mark.parametrize("mpi", ("openmpi", "mpich"))
def test_hung_job_is_killed_and_leaves_nothing(slurm, cluster_file, store, mpi):
    cluster = resolve_cluster(str(cluster_file))
    begin = time.monotonic()
    record = probe_job(cluster, store, 4, mpi, args=["--hang"], env=MPI_ENV[mpi], timeout=5)
    assert time.monotonic() - begin < 15
    assert record["status"] == "failed" and "time" in (record["error"] or "").lower()
    assert store.get(record["id"])["status"] == "failed"
    # srun, on SIGTERM, cancels the step; slurmstepd lingers ~2 s (KillWait) and goes
    deadline = time.monotonic() + 10
    while True:
        queue = slurm.client("squeue", "-h", "-o", "%i %T").stdout.strip()
        strays = slurm.strays()
        if (not queue and not strays) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not queue, f"jobs still queued/running: {queue}"
    assert not strays, f"left behind: {[command(p) for p in strays]}"
    assert slurm.node_states() == dict.fromkeys(slurm.nodes, "idle")


def test_run_on_host_through_srun(slurm, cluster_file):
    launcher = launcher_for(resolve_cluster(str(cluster_file)))
    done = launcher.run_on_host("n2", ["hostname"], timeout=20)
    assert (done.returncode, done.stdout.strip()) == (0, "n2"), done.stderr


def test_cli_probe_on_slurm_cluster(slurm, cluster_file):
    argv = [
        sys.executable,
        "-m",
        "clustertune.cli",
        "probe",
        "--cluster",
        str(cluster_file),
        "--np",
        "2",
        "--mpi",
        "mpich",
        "--json",
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert (record["status"], record["verification"]) == ("ok", "passed")
    assert record["meta"]["cluster"]["launcher"] == "slurm"
    assert sorted((s["rank"], s["host"]) for s in record["samples"]) == [(0, "n1"), (1, "n2")]


def test_stopped_cli_stops_its_slurm_job(slurm, cluster_file, tmp_path):
    """SIGTERM to clustertune (what a supervisor sends): srun's step is cancelled, the run
    stored as interrupted; SIGKILL: the watchdog kills srun, and Slurm the step."""
    cli, tag = start_hung_probe(tmp_path, str(cluster_file), np=2)
    cli.send_signal(signal.SIGTERM)
    assert_stopped_and_stored(cli, tag, tmp_path, signal.SIGTERM)
    cli, tag = start_hung_probe(tmp_path, str(cluster_file), np=2)
    cli.kill()
    cli.communicate(timeout=30)
    assert wait_for_nothing_left(tag, 20) == [], "the job outlived a SIGKILLed clustertune"
    deadline = time.monotonic() + 15
    while slurm.client("squeue", "-h").stdout.strip() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not slurm.client("squeue", "-h").stdout.strip(), "the Slurm job is still queued"
