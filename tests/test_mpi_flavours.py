"""The MPI flavours (launch/mpi.py): the command lines and environments every launcher and
the grid's job back-ends build from them, for both MPIs, started by their own launcher
(fork) and by srun (Slurm). Checked without running anything."""

from pathlib import Path

import pytest

from clustertune import kernels
from clustertune.cluster import Cluster, Host, Site
from clustertune.errors import UserError
from clustertune.grid import jobs
from clustertune.launch import mpi
from clustertune.launch.base import Job
from clustertune.launch.launchers import launcher_for

SHIM = "/build/mpich/lib/libct_finalize_shim.so"


def locate(name: str, flavour: str) -> Path:
    assert (name, flavour) == ("libct_finalize_shim.so", "mpich")
    return Path(SHIM)


@pytest.fixture
def as_root(monkeypatch):
    monkeypatch.setattr(mpi.os, "geteuid", lambda: 0)


@pytest.fixture
def no_user_ucx(monkeypatch):
    monkeypatch.delenv("UCX_TLS", raising=False)
    monkeypatch.delenv("UCX_NET_DEVICES", raising=False)


def test_the_flavours_and_the_default():
    assert mpi.NAMES == ("openmpi", "mpich")
    assert mpi.DEFAULT is mpi.OPENMPI and mpi.flavour("mpich") is mpi.MPICH
    assert mpi.default_of(("mpich", "openmpi")) == "openmpi"
    assert mpi.default_of(("mpich",)) == "mpich"
    with pytest.raises(UserError, match=r"unknown MPI 'lam' \(known: openmpi, mpich\)"):
        mpi.flavour("lam")


# Open MPI's transport pinned, yield when idle (launch/mpi.py's traps)
OPENMPI_MCA = "--mca pml ob1 --mca btl self,vader,tcp --mca mpi_yield_when_idle 1"


def test_openmpi_command_lines():
    assert mpi.OPENMPI.argv(4, {"B": "2", "A": "1"}) == (
        f"mpirun.openmpi -np 4 {OPENMPI_MCA} --oversubscribe -x A -x B".split()
    )
    pinned = mpi.OPENMPI.argv(
        3, {}, hostfile=Path("/w/hf"), agent="/run/agent", interface="eth0", bind=False
    )
    assert (
        pinned
        == (
            # ranks on several hosts talk TCP: its event library ticked at every progress call
            f"mpirun.openmpi -np 3 {OPENMPI_MCA} --mca mpi_event_tick_rate 1 "
            "--mca btl_tcp_if_include eth0 "
            "--mca oob_tcp_if_include eth0 --bind-to none --hostfile /w/hf --map-by node "
            "--mca plm_rsh_agent /run/agent"
        ).split()
    )
    assert mpi.OPENMPI.hostfile(["n1", "n2"], 2) == "n1 slots=2\nn2 slots=2\n"


def test_mpich_command_lines(no_user_ucx):
    assert mpi.MPICH.argv(2, {"A": "1"}) == ["mpiexec.mpich", "-n", "2", "-genv", "A", "1"]
    argv = mpi.MPICH.argv(
        3,
        {"UCX_TLS": "tcp", "LD_PRELOAD": "/mine.so"},
        hostfile=Path("/w/hf"),
        agent="/run/agent",
        interface="eth0",
        locate=locate,
    )
    assert argv == [
        "mpiexec.mpich",
        "-n",
        "3",
        "-f",
        "/w/hf",
        "-launcher",
        "rsh",
        "-launcher-exec",
        "/run/agent",
        # the shim replaces a job's preload; a job's UCX setting wins over the default
        "-genv",
        "LD_PRELOAD",
        SHIM,
        "-genv",
        "UCX_NET_DEVICES",
        "eth0",
        "-genv",
        "UCX_TLS",
        "tcp",
    ]
    assert mpi.MPICH.hostfile(["n1", "n2"], 2) == "n1:1\nn2:1\n"
    with pytest.raises(ValueError, match="locate"):
        mpi.MPICH.argv(1, {}, interface="eth0")


def test_a_ucx_setting_the_user_exported_wins(monkeypatch):
    monkeypatch.setenv("UCX_TLS", "tcp,self,sm")
    assert mpi.MPICH.pinned_env("eth0", locate)["UCX_TLS"] == "tcp,self,sm"


def test_grid_slurm_mpich_jobs_take_the_users_ucx_setting_as_the_launchers_do(monkeypatch):
    """Review2 G2, decided: a UCX_TLS / UCX_NET_DEVICES the user exported wins for MPICH ranks
    on virtual hosts wherever they start (mpiexec's -genv since 67af505, the grid's srun
    since 95ac500, which used to force tcp,self), and the record's env knobs show it, so a
    run says what it used; unset, the ranks stay on TCP over the virtual NIC (docs/grid.md:
    sm or a device outside the namespace bypasses or misses the emulated wire)."""
    from clustertune import runner

    monkeypatch.setenv("UCX_TLS", "tcp")
    monkeypatch.setenv("UCX_NET_DEVICES", "eth0")
    _, env = jobs.srun_launch(jobs.GridJob("/k", count=2, jobtype="mpi", mpi="mpich"), None)
    assert (env["UCX_TLS"], env["UCX_NET_DEVICES"]) == ("tcp", "eth0")
    argv = mpi.MPICH.argv(2, {}, hostfile=Path("/w/hf"), interface="eth0", locate=locate)
    assert " -genv UCX_TLS tcp " in " ".join(argv) + " "
    assert runner.env_knobs()["UCX_TLS"] == "tcp"


def test_root_needs_openmpis_variables_only(as_root):
    env = {"A": "1"}
    assert mpi.OPENMPI.launcher_env(env) == {
        "A": "1",
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    }
    assert mpi.MPICH.launcher_env(env) == env
    assert env == {"A": "1"}  # the job's own is left alone


def test_no_root_variables_for_a_user(monkeypatch):
    monkeypatch.setattr(mpi.os, "geteuid", lambda: 1000)
    assert mpi.OPENMPI.launcher_env({"A": "1"}) == {"A": "1"}


def test_slurm_pmi_plugins_and_tcp_buffers():
    assert (mpi.OPENMPI.srun_flags(), mpi.MPICH.srun_flags()) == (["--mpi=pmix"], ["--mpi=pmi2"])
    assert mpi.OPENMPI.tcp_buffer_env(65536) == {
        "OMPI_MCA_btl_tcp_sndbuf": "65536",
        "OMPI_MCA_btl_tcp_rcvbuf": "65536",
    }
    assert mpi.MPICH.tcp_buffer_env(4096) == {"UCX_TCP_SNDBUF": "4096", "UCX_TCP_RCVBUF": "4096"}


@pytest.mark.parametrize("flavour", mpi.FLAVOURS.values(), ids=mpi.NAMES)
def test_slurm_launcher_starts_ranks_through_the_pmi_plugin(flavour, tmp_path):
    hosts = (Host("n1"), Host("n2"))
    cluster = Cluster("lab", hosts, (Site("site0", "slurm", settings={"partition": "debug"}),))
    job = Job(Path("/k"), ["-x"], 3, flavour.name, env={"A": "1"})
    assert launcher_for(cluster).mpi_argv(job, tmp_path) == [
        "srun",
        "--kill-on-bad-exit=1",
        "--partition",
        "debug",
        "--ntasks",
        "3",
        "--distribution",
        "cyclic",
        "--nodelist",
        "n1,n2",
        f"--mpi={flavour.pmi_plugin}",
        "--export",
        "ALL,A",
        "/k",
        "-x",
    ]


def test_grid_slurm_jobs_keep_the_ranks_on_the_virtual_nic(no_user_ucx):
    """The grid's Slurm back-end: the same srun line, the flavour's variables in place of
    its launcher's flags (Open MPI without shared memory between pseudo-nodes)."""
    job = jobs.GridJob("/k", count=2, jobtype="mpi", mpi="openmpi")
    line, env = jobs.srun_launch(job, ["host1", "host2"])
    assert line == [
        "srun",
        "--kill-on-bad-exit=1",
        "--ntasks",
        "2",
        "--distribution",
        "cyclic",
        "--nodelist",
        "host1,host2",
        "--mpi=pmix",
    ]
    assert env == {
        "OMPI_MCA_pml": "ob1",
        "OMPI_MCA_btl": "self,tcp",
        "OMPI_MCA_mpi_yield_when_idle": "1",
        "OMPI_MCA_mpi_event_tick_rate": "1",
        "OMPI_MCA_btl_tcp_if_include": "eth0",
        "OMPI_MCA_oob_tcp_if_include": "eth0",
    }
    job.mpi = "mpich"
    line, env = jobs.srun_launch(job, None)
    assert "--nodelist" not in line and line[-1] == "--mpi=pmi2"
    shim = kernels.kernel_path("libct_finalize_shim.so", "mpich")
    assert env == {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "eth0", "LD_PRELOAD": str(shim)}
    job.jobtype = "single"  # plain copies: no MPI
    assert jobs.srun_launch(job, None) == (line[:-1], {})


def _ssh_site(tmp_path):
    hosts = [
        {"name": f"host{i}", "address": f"10.9.0.{i + 1}", "namespace": f"ns{i}"} for i in range(3)
    ]
    grid = {"name": "g", "dir": str(tmp_path)}
    site = {"name": "site0", "scheduler": "ssh", "hosts": hosts, "head": "host0"}
    return jobs.SshBackend(grid, site)


@pytest.mark.parametrize("flavour", mpi.FLAVOURS.values(), ids=mpi.NAMES)
def test_grid_fork_jobs_start_ranks_as_the_virtual_cluster_launcher_does(
    flavour, tmp_path, as_root, no_user_ucx
):
    """The grid's shell back-ends (ssh, none, GRAM's fork) start an MPI job with the
    virtual cluster's launcher over the site's hosts, through the site's remote shell."""
    backend = _ssh_site(tmp_path)
    job = jobs.GridJob("/k", ["-v"], count=3, jobtype="mpi", mpi=flavour.name)
    job.environment = {"A": "1"}
    line, env = backend.launch(job, tmp_path, ["host1", "host2"])
    agent = str(tmp_path / "ssh" / "ssh")
    hostfile = tmp_path / f"hostfile.{flavour.name}"
    expected = flavour.argv(
        3,
        {"A": "1"},
        hostfile=hostfile,
        agent=agent,
        interface="eth0",
        bind=False,
        locate=kernels.kernel_path,
    )
    assert line == expected and "/k" not in line  # the program is the script's to add
    assert hostfile.read_text() == flavour.hostfile(["host1", "host2"], 2)
    # beside the job's own variables, the script exports only what running as root needs
    assert env == {k: "1" for k in flavour.root_vars}
    flag = "plm_rsh_agent" if flavour is mpi.OPENMPI else "-launcher-exec"
    assert line[line.index(flag) + 1] == agent
