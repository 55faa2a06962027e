"""Real MPI jobs through the launchers: the probe on both MPIs, and a hung job killed."""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from clustertune import kernels, runner
from clustertune.cluster import Cluster, Host, Site, local_cluster
from clustertune.launch import mpi
from clustertune.launch.base import Job
from clustertune.launch.launchers import launcher_for
from clustertune.launch.process import job_pids
from clustertune.levels.probe.run import probe_job
from clustertune.results import Store

MPIS = ("openmpi", "mpich")


def probe(cluster, store, mpi, np, **kwargs):
    return probe_job(cluster, store, np, mpi, timeout=90, **kwargs)


@pytest.mark.parametrize("mpi", MPIS)
def test_probe_on_localhost(store, mpi):
    record = probe(local_cluster(), store, mpi, 2)
    assert (record["status"], record["verification"]) == ("ok", "passed"), record["error"]
    assert sorted(s["rank"] for s in record["samples"]) == [0, 1]
    assert store.get(record["id"])["samples"] == record["samples"]


@pytest.mark.root
@pytest.mark.parametrize("mpi", MPIS)
def test_probe_across_namespaces(make_vcluster, store, mpi):
    cluster = make_vcluster(hosts=3, link_bps=10**9)
    record = probe(cluster, store, mpi, 6)
    assert (record["status"], record["verification"]) == ("ok", "passed"), record["error"]
    placement = {s["rank"]: s["host"] for s in record["samples"]}
    # round-robin by node: rank r on host r % 3, each in its own namespace and UTS name
    assert placement == {r: f"host{r % 3}" for r in range(6)}
    expected = "Open MPI" if mpi == "openmpi" else "MPICH"
    assert all(expected in s["library"] for s in record["samples"])


@pytest.mark.root
@pytest.mark.parametrize("mpi", MPIS)
def test_ranks_on_virtual_hosts_are_not_bound_to_one_core(make_vcluster, mpi):
    """Every virtual host is this machine: OpenMPI bound each host's one rank to its core
    0, so both ranks of a 2-host job shared one core."""
    cluster = make_vcluster(hosts=2)
    job = Job(Path("/bin/grep"), ["Cpus_allowed_list", "/proc/self/status"], 2, mpi, timeout=60)
    done = launcher_for(cluster).run_mpi(job)
    assert done.returncode == 0, done.stderr
    allowed = sorted(line.split()[-1] for line in done.stdout.splitlines())
    everything = f"0-{os.cpu_count() - 1}" if os.cpu_count() > 1 else "0"
    assert allowed == [everything, everything], allowed


@pytest.mark.root
def test_probe_on_chosen_hosts(make_vcluster, store):
    cluster = make_vcluster(hosts=4)
    record = probe(cluster, store, "openmpi", 2, hosts=["host3", "host1"])
    assert [s["host"] for s in sorted(record["samples"], key=lambda s: s["rank"])] == [
        "host3",
        "host1",
    ]


@pytest.mark.root
@pytest.mark.parametrize("mpi", MPIS)
def test_hung_job_is_killed_at_timeout_and_recorded_failed(make_vcluster, store, mpi):
    cluster = make_vcluster(hosts=2)
    start = time.monotonic()
    record = runner.run_kernel(
        cluster, store, level="probe", kernel="ct-probe", np=2, mpi=mpi, args=["--hang"], timeout=4
    )
    assert time.monotonic() - start < 20
    assert record["status"] == "failed"
    assert "timed out" in record["error"]
    assert store.get(record["id"])["status"] == "failed"
    time.sleep(0.5)
    assert [p for j in record["meta"]["job_ids"] for p in job_pids(j)] == [], (
        "processes of the killed job still run"
    )


def test_missing_mpi_is_a_clear_error(store):
    from clustertune.errors import UserError

    cluster = Cluster("solo", (Host("me"),), (Site("site0", "local"),), mpi=("openmpi",))
    with pytest.raises(UserError, match="does not offer MPI 'mpich'"):
        probe(cluster, store, "mpich", 1)


def test_command_lines_per_launcher(tmp_path):
    """The launch commands carry the traps' work-arounds; checked without running them."""
    kernel = kernels.kernel_path("ct-probe", "mpich")
    job = Job(kernel, [], 4, "mpich", env={"OPENBLAS_NUM_THREADS": "1"})
    hosts = (Host("n1", "192.0.2.1"), Host("n2", "192.0.2.2"))
    real = Cluster("lab", hosts, (Site("site0", "hostfile"),))
    argv = launcher_for(real).mpi_argv(job, tmp_path)
    assert argv[:3] == ["mpiexec.mpich", "-n", "4"]
    assert (tmp_path / "hostfile.mpich").read_text() == "192.0.2.1:1\n192.0.2.2:1\n"
    assert "LD_PRELOAD" not in argv  # the finalize shim is for UCX over pinned TCP only

    slurm = Cluster("lab", hosts, (Site("site0", "slurm", settings={"partition": "debug"}),))
    argv = launcher_for(slurm).mpi_argv(Job(kernel, ["-x"], 4, "openmpi"), tmp_path)
    assert argv[:4] == ["srun", "--kill-on-bad-exit=1", "--partition", "debug"]
    assert "--mpi=pmix" in argv and argv[-2:] == [str(kernel), "-x"]

    vc = Cluster("v", hosts, (Site("site0", "vcluster"),), extra={"agent": "/run/agent"})
    argv = launcher_for(vc).mpi_argv(job, tmp_path)
    assert argv[:2] == ["/run/agent", "n1"]  # started on the first host, through the agent
    inner = argv[2]
    for flag in (
        "-launcher-exec /run/agent",
        "UCX_TLS tcp,self",
        "UCX_NET_DEVICES eth0",
        "LD_PRELOAD",
    ):
        assert flag in inner
    openmpi = launcher_for(vc).mpi_argv(Job(kernel, [], 3, "openmpi"), tmp_path)[2]
    for flag in (
        "plm_rsh_agent /run/agent",
        "mpi_yield_when_idle 1",
        "btl_tcp_if_include eth0",
        "--bind-to none",
    ):
        assert flag in openmpi
    assert (tmp_path / "hostfile.openmpi").read_text() == "n1 slots=2\nn2 slots=2\n"
    real_openmpi = launcher_for(real).mpi_argv(Job(kernel, [], 4, "openmpi"), tmp_path)
    assert "--bind-to" not in real_openmpi  # real hosts keep OpenMPI's binding


def under_the_shim(*options: str) -> list[str]:
    """mpiexec.mpich starting 2 ranks as the launchers do on a pinned interface: under
    the finalize shim, over UCX's TCP; ``options`` (hydra's own) first."""
    shim = kernels.kernel_path(*mpi.MPICH.shims, "mpich")
    head = mpi.MPICH.argv(2, {"LD_PRELOAD": str(shim), "UCX_TLS": "tcp,self"})
    return [head[0], *options, *head[1:]]


def test_finalize_shim_tells_the_process_manager_before_it_leaves(tmp_path):
    """Every rank under the shim sends PMI finalize before its socket closes: hydra takes
    a PMI socket closed without it for a dead rank and kills the job (a verified run then
    failed with "BAD TERMINATION ... EXIT CODE: 1" under load, across GRAM sites). The
    ranks' stdout goes to files of their own: on hydra's stdout its -verbose lines once cut
    the probe's JSON line in two."""
    argv = under_the_shim("-verbose", "-outfile-pattern", str(tmp_path / "out.%r"))
    argv.append(str(kernels.kernel_path("ct-probe", "mpich")))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    said = done.stdout + done.stderr
    assert said.count("PMI response: cmd=finalize_ack") == 2, said[-3000:]
    rank0 = (tmp_path / "out.0").read_text()
    assert '"rank_sum":1' in rank0, rank0  # the ranks got through MPI_Init and the probe


@pytest.mark.parametrize("inject_fault", [False, True])
def test_finalize_shim_keeps_the_exit_status_main_returned(inject_fault):
    """A rank's exit status under the shim is what main returned: it once left with
    _exit(0) inside MPI_Finalize, so a failed verification (ct-gemm returns 1) exited 0."""
    argv = under_the_shim() + [str(kernels.kernel_path("ct-gemm", "mpich")), "-N", "200"]
    done = subprocess.run(
        argv + ["--inject-fault"] * inject_fault, capture_output=True, text=True, timeout=60
    )
    assert '"verification":"' + ("failed" if inject_fault else "passed") in done.stdout
    assert done.returncode == (1 if inject_fault else 0), done.stdout[-2000:] + done.stderr


@pytest.mark.root
@pytest.mark.parametrize("mpi", MPIS)
def test_failed_verification_fails_the_job_on_a_virtual_cluster(make_vcluster, mpi, capsys):
    """clustertune npb ... --inject-fault on a virtual cluster: the job's own exit status
    says failed (MPICH runs there under the finalize shim), beside the kernel's verdict; the
    healthy run exits 0 with no error."""
    from clustertune.cli import main

    cluster = make_vcluster(hosts=2, link_bps=10**9)
    line = [
        "npb",
        "lu",
        "--class",
        "S",
        "--np",
        "2",
        "--mpi",
        mpi,
        "--cluster",
        cluster.name,
        "--json",
    ]
    assert main(line) == 0
    healthy = json.loads(capsys.readouterr().out)
    assert (healthy["status"], healthy["error"]) == ("ok", None)
    assert main(line + ["--inject-fault"]) == 1
    record = json.loads(capsys.readouterr().out)
    assert (record["status"], record["verification"]) == ("failed", "failed")
    assert "exit status 1" in record["error"], record["error"]  # the job itself failed
    stored = Store(os.environ["CLUSTERTUNE_DB"]).get(record["id"])
    assert stored["status"] == "failed" and "exit status 1" in stored["error"]


def test_environment_knobs_are_recorded(store, monkeypatch):
    monkeypatch.setenv("OPENBLAS_CORETYPE", os.environ.get("OPENBLAS_CORETYPE", "Haswell"))
    record = probe(local_cluster(), store, "openmpi", 1, env={"OPENBLAS_NUM_THREADS": "1"})
    assert record["meta"]["env"]["OPENBLAS_NUM_THREADS"] == "1"
    assert "OPENBLAS_CORETYPE" in record["meta"]["env"]


@pytest.mark.root
def test_probe_across_two_sites_records_each_ranks_site(make_vcluster, store):
    cluster = make_vcluster(hosts=2, link_bps=10**9, sites=2, wan_bps=10**8)
    record = probe(cluster, store, "openmpi", 2)
    assert record["status"] == "ok", record["error"]
    assert {s["host"]: s["site"] for s in record["samples"]} == {"host0": "site0", "host1": "site1"}
    assert record["meta"]["cluster"]["site_of"] == {"host0": "site0", "host1": "site1"}
