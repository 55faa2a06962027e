"""Grid level: the grid description (errors name file:line:field), the scheduler choice,
the job's checks; live (root): a virtual grid of two Slurm sites and an ssh site runs the
probe across sites on both MPIs through co-allocated Slurm allocations, jobs through the
one submission interface on every backend (environment, directory, count, exit status,
MPI), a co-allocation whose one site cannot start cancels the other and starts nothing,
the ssh site refuses a foreign key, a killed slurmd is reported, and down leaves no
process, namespace or file."""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import unique_name

import clustertune.levels.grid  # noqa: F401  (registers the grid sources)
from clustertune import kernels, runner
from clustertune.errors import ConfigError, UserError
from clustertune.grid import coalloc, daemons, heartbeat, jobs, slurm, ssh, staging, virtual
from clustertune.grid import info as grid_info
from clustertune.grid.coalloc import FAIL_SWITCH, coallocate_jobs
from clustertune.grid.jobs import NEVER_START
from clustertune.grid.source import cluster_from_grid
from clustertune.levels.grid import compare, section
from clustertune.levels.probe.run import probe_job
from clustertune.results import Store
from clustertune.sources import resolve_cluster
from clustertune.units import payload_rate_bps

GOOD = """\
name = "campuses"
mpi = ["openmpi", "mpich"]

[[sites]]
name = "hongo"
scheduler = "slurm"
contact = "login.hongo:6817"
link = "1gbit"
partition = "batch"

[[sites]]
name = "kashiwa"
scheduler = "ssh"
contact = "gw.kashiwa"
link = "100mbit"

[[hosts]]
name = "h1"
site = "hongo"
address = "192.0.2.1"
cores = 2

[[hosts]]
name = "k1"
site = "kashiwa"
address = "192.0.2.9"

[[links]]
sites = ["hongo", "kashiwa"]
rate = "100mbit"
delay_us = 500
"""


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "g.grid.toml"
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_description_loads_sites_hosts_links(tmp_path):
    cluster = resolve_cluster(write(tmp_path, GOOD))
    assert cluster.name == "campuses"
    assert [s.name for s in cluster.sites] == ["hongo", "kashiwa"]
    hongo, kashiwa = cluster.sites
    assert hongo.launcher == "slurm" and kashiwa.launcher == "hostfile"
    assert hongo.settings == {
        "partition": "batch",
        "scheduler": "slurm",
        "contact": "login.hongo:6817",
    }
    assert hongo.wan_bps == kashiwa.wan_bps == 100_000_000
    assert cluster.host("k1").link_bps == 100_000_000 and cluster.host("h1").cores == 2
    assert cluster.extra["links"] == [
        {"sites": ["hongo", "kashiwa"], "rate_bps": 100_000_000, "delay_us": 500}
    ]


@pytest.mark.parametrize(
    "old,new,line,field",
    [
        ('scheduler = "ssh"', 'scheduler = "condor"', 13, "sites[1].scheduler"),
        ('contact = "gw.kashiwa"', 'contakt = "gw"', 14, "sites[1].contakt"),
        ('contact = "gw.kashiwa"\n', "", 11, "sites[1].contact"),
        ('site = "kashiwa"', 'site = "osaka"', 25, "hosts[1].site"),
        ('sites = ["hongo", "kashiwa"]', 'sites = ["hongo", "hongo"]', 29, "links[0].sites"),
        ('rate = "100mbit"\ndelay', 'rate = "fast"\ndelay', 30, "links[0].rate"),
        ("delay_us = 500", "delay_us = -1", 31, "links[0].delay_us"),
        ("cores = 2", "cores = 0", 21, "hosts[0].cores"),
    ],
)
def test_description_errors_name_file_line_field(tmp_path, old, new, line, field):
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(ConfigError) as err:
        resolve_cluster(path)
    assert (err.value.path, err.value.line, err.value.field) == (path, line, field)
    assert str(err.value).startswith(f"{path}:{line}: {field}: ")


def test_description_gram_site(tmp_path):
    """A GRAM site: its contact (host:port:subject) kept, jobs submitted through it, MPI
    daemons started with the hostfile launcher."""
    contact = "gk.kashiwa:2119:/O=Grid/CN=host/gk.kashiwa"
    text = GOOD.replace('scheduler = "ssh"', 'scheduler = "gram"')
    cluster = resolve_cluster(write(tmp_path, text.replace('"gw.kashiwa"', f'"{contact}"')))
    kashiwa = cluster.sites[1]
    assert kashiwa.launcher == "hostfile"
    assert kashiwa.settings == {"scheduler": "gram", "contact": contact}
    with pytest.raises(ConfigError, match="a gram site needs its contact"):
        resolve_cluster(write(tmp_path, text.replace('contact = "gw.kashiwa"\n', "")))


def test_description_site_without_hosts(tmp_path):
    text = GOOD.replace('site = "kashiwa"', 'site = "hongo"')
    with pytest.raises(ConfigError, match="site 'kashiwa' has no"):
        resolve_cluster(write(tmp_path, text))


def test_schedulers_per_site():
    assert virtual.parse_schedulers("ssh", 3) == ["ssh"] * 3
    assert virtual.parse_schedulers("site1=ssh,site2=none", 3) == ["slurm", "ssh", "none"]
    for bad in ("pbs", "site3=ssh", "s1=ssh", "site0=pbs"):
        with pytest.raises(UserError, match="--scheduler"):
            virtual.parse_schedulers(bad, 3)


@pytest.mark.parametrize(
    "job,field",
    [
        (jobs.GridJob(""), "executable"),
        (jobs.GridJob("/bin/true", count=0), "count"),
        (jobs.GridJob("/bin/true", jobtype="batch"), "jobtype"),
        (jobs.GridJob("/bin/true", mpi="lam"), "mpi"),
        (jobs.GridJob("/bin/true", environment={"A B": "1"}), "environment"),
    ],
)
def test_job_checks_name_the_field(job, field):
    with pytest.raises(UserError, match=f"^job: {field}: "):
        job.check()


def test_bad_grid_up_is_one_line_before_anything(capsys):
    from clustertune.cli import main

    code = main(["grid", "up", "--name", "Bad!", "--sites", "2", "--wan-link", "100mbit"])
    assert code == 2
    assert "bad cluster name" in capsys.readouterr().err


def _record(rid, kernel, placement, figures=None, samples=None, coalloc=None, status="ok"):
    meta = {
        "hosts": ["host0", "host2" if placement == "across" else "host1"],
        "mpi": {"flavour": "openmpi"},
    }
    if coalloc:
        meta["coalloc"] = coalloc
    grid = {
        "name": "g",
        "wan_bps": 100_000_000,
        "link_bps": 10**9,
        "sites": [
            {
                "name": "site0",
                "scheduler": "slurm",
                "contact": "host0:6817",
                "hosts": ["host0", "host1"],
            },
            {
                "name": "site1",
                "scheduler": "ssh",
                "contact": "host2:22",
                "hosts": ["host2", "host3"],
            },
        ],
    }
    params = {
        "comparison": kernel,
        "placement": placement,
        "grid": grid,
        "n": 1000,
        "path": "grid" if placement == "across" else "plain",
    }
    if kernel == "pingpong":
        params["mode"] = "pingpong"
    return {
        "id": rid,
        "kernel": "ct-linpack" if kernel == "linpack" else "ct-mpi-pingpong",
        "status": status,
        "params": params,
        "meta": meta,
        "figures": figures or {},
        "samples": samples or [],
    }


def test_section_sets_within_and_across_side_by_side():
    """The latest ok record per placement fills the row; a failed run does not; the
    co-allocation timeline is shown from the first request."""
    lu = [
        _record(1, "linpack", "within", samples=[{"gflops": 8.0, "passed": True}]),
        _record(2, "linpack", "across", samples=[{"gflops": 2.0, "passed": True}]),
        _record(3, "linpack", "across", samples=[{"gflops": 9.9, "passed": True}], status="failed"),
    ]
    pp = [
        _record(4, "pingpong", "within", {"latency_us": 20.0, "bandwidth_mbps": 900.0}),
        _record(
            5,
            "pingpong",
            "across",
            {"latency_us": 50.0, "bandwidth_mbps": 90.0},
            coalloc={
                "sites": {
                    "site0": {
                        "requested": 100.0,
                        "granted": 100.25,
                        "started": 100.5,
                        "ended": 103.0,
                        "allocation": "7",
                        "hosts": ["host0"],
                        "scheduler": "slurm",
                    }
                },
                "heartbeat": "site0: slurmd-host0 (pid 1) is not running",
            },
        ),
    ]
    rows = compare.pairs(lu + pp)
    assert [(r["kernel"], r.get("within_gflops"), r.get("across_gflops")) for r in rows[:1]] == [
        ("linpack", 8.0, 2.0)
    ]
    assert rows[1]["within_bandwidth_mbps"] == 900.0 and rows[1]["across_latency_us"] == 50.0
    html = section.render(lu + pp)
    assert "<td>8.000 Gflops</td><td>2.000 Gflops</td><td>0.25</td>" in html
    assert "<td>900.0 Mbit/s</td><td>90.0 Mbit/s</td><td>0.10</td>" in html
    assert "<td>+0.25</td><td>+0.50</td><td>+3.00</td>" in html
    assert "slurmd-host0 (pid 1) is not running" in html
    assert "<td>site1</td><td>ssh</td><td>host2:22</td>" in html


def test_coalloc_report_and_timeline_figures():
    stderr = (
        'noise\nclustertune-coalloc: {"sites": {"a": {"requested": 1.0, "granted": 1.5, '
        '"started": 2.0, "ended": 5.0}, "b": {"requested": 1.2, "granted": 1.25, '
        '"started": 2.0, "ended": 5.5}}, "started": true, "error": null}\nmore\n'
    )
    report = compare.coalloc_report(stderr)
    assert report["started"] is True and sorted(report["sites"]) == ["a", "b"]
    assert compare.timeline_figures(report) == {"allocation_s": 0.5, "job_s": 3.5}
    assert compare.coalloc_report("no report\n") is None


def test_heartbeat_watches_the_jobs_daemons_only():
    grid = {
        "name": "nogrid",
        "sites": [
            {
                "name": "site0",
                "hosts": [],
                "pids": {"munged": 1, "slurmctld": 2, "slurmd-host0": 3, "slurmd-host1": 4},
            },
            {"name": "site1", "hosts": [], "pids": {"sshd-host2": 5, "sshd-host3": 6}},
            {"name": "site2", "hosts": [], "pids": {"munged": 7}},
        ],
    }
    beat = heartbeat.Heartbeat(grid, {"site0": ["host1"], "site1": ["host2"]})
    assert beat.daemons() == [
        ("site0", "munged", 1),
        ("site0", "slurmctld", 2),
        ("site0", "slurmd-host1", 4),
        ("site1", "sshd-host2", 5),
    ]


def test_abort_at_the_barrier_writes_the_exit_file_whole(tmp_path):
    """A subjob told to abort at the start barrier leaves exit status 98, written aside
    and renamed; a reader of an exit file caught empty or partial sees no status (the
    race that once raised in the middle of a co-allocation's clean-up and left the
    other site's job held)."""
    barrier, d = tmp_path / "barrier", tmp_path / "job"
    barrier.mkdir(), d.mkdir()
    (barrier / "abort").touch()
    job = jobs.GridJob("/bin/true")
    job.barrier = str(barrier)
    grid = {"dir": str(tmp_path), "sites": []}
    script = jobs.Backend(grid, {"name": "s", "hosts": []}).script(job, d, ["/bin/true"], {})
    assert "> " + str(d / "exit") + ";" not in script  # never written in place
    ran = subprocess.run(["sh", "-c", script], capture_output=True, timeout=10)
    assert ran.returncode == 98 and (d / "exit").read_text().strip() == "98"
    assert not (d / "exit.tmp").exists() and (barrier / f"ready.{d.name}").exists()
    assert jobs.exit_status(d) == 98 and jobs.exit_state(d) == "failed"
    for partial in ("", "9\n8x"):
        (d / "exit").write_text(partial)
        assert jobs.exit_status(d) is None and jobs.exit_state(d) == "failed"
    (d / "exit").write_text("0\n")
    assert jobs.exit_status(d) == 0 and jobs.exit_state(d) == "done"


def test_info_free_cpus():
    probe = grid_info._parse_probe(
        "cores 4\nmodel name\t: CPU X\nMemTotal: 1024 kB\nload 1.6 1.0 0.5\n"
    )
    assert probe == {"cores": 4, "cpu": "CPU X", "memory_bytes": 1 << 20, "load": [1.6, 1.0, 0.5]}
    assert grid_info.free_cpus({"head": probe, "hosts": ["a", "b"]}) == 4  # (4 - 2) x 2
    nodes = {"a": {"state": "idle", "cpus_idle": 2}, "b": {"state": "mix", "cpus_idle": 1},
             "c": {"state": "down", "cpus_idle": 2}}  # fmt: skip
    assert grid_info.free_cpus({"batch": {"answering": True, "nodes": nodes}}) == 3
    assert grid_info.free_cpus({"batch": {"answering": False}}) == 0


# --------------------------------------------------------------------------- live


def _tools() -> bool:
    import shutil

    return all(shutil.which(t) for t in slurm.TOOLS) and Path(ssh.SSHD).is_file()


needs_tools = pytest.mark.skipif(not _tools(), reason="Slurm, munge or openssh-server missing")


@pytest.fixture(scope="module")
def grid():
    name = unique_name("g")
    cplan, state = virtual.plan(name, 3, 2, ["slurm", "slurm", "ssh"], 1_000_000_000, 100_000_000)
    try:
        state = virtual.up(cplan, state)
        yield state
    finally:
        virtual.down(name)
        assert virtual.leftovers(name) == []


@pytest.mark.root
@needs_tools
@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_probe_across_two_slurm_sites(grid, store, mpi):
    cluster = cluster_from_grid(grid)
    hosts = ["host0", "host1", "host2", "host3"]
    record = probe_job(cluster, store, 4, mpi, hosts=hosts, params={}, timeout=60)
    assert record["status"] == "ok", record["error"]
    assert sorted(s["host"] for s in record["samples"]) == hosts
    site_of = {h.name: h.site for h in cluster.hosts}
    assert {s["rank"]: site_of[s["host"]] for s in record["samples"]} == {
        0: "site0",
        1: "site0",
        2: "site1",
        3: "site1",
    }
    assert all(s["site"] == site_of[s["host"]] for s in record["samples"])  # the rank's site
    assert "clustertune.grid.coalloc" in record["meta"]["commands"][0]
    for site in grid["sites"][:2]:  # allocations released
        assert slurm.run_client(site, ["squeue", "-h"]).stdout.strip() == ""


@pytest.mark.root
@needs_tools
def test_probe_across_slurm_and_ssh_sites(grid, store):
    cluster = cluster_from_grid(grid)
    record = probe_job(
        cluster, store, 2, "openmpi", hosts=["host1", "host5"], params={}, timeout=60
    )
    assert record["status"] == "ok", record["error"]
    assert sorted(s["host"] for s in record["samples"]) == ["host1", "host5"]


@pytest.mark.root
@needs_tools
def test_coallocation_all_or_none(grid, store, monkeypatch):
    """site1's allocation cannot be granted: site0's is cancelled, no rank starts."""
    monkeypatch.setenv(FAIL_SWITCH, "site1")
    cluster = cluster_from_grid(grid)
    record = probe_job(
        cluster,
        store,
        4,
        "openmpi",
        hosts=["host0", "host1", "host2", "host3"],
        params={},
        timeout=60,
    )
    assert record["status"] == "failed"
    assert record["samples"] == []
    assert "co-allocation failed, nothing started: site1: allocation refused" in record["error"]
    site0 = grid["sites"][0]
    states = slurm.run_client(site0, ["scontrol", "-o", "show", "job"]).stdout
    last = [line for line in states.splitlines() if "JobName=ct-" in line][-1]
    assert "JobState=CANCELLED" in last or "JobState=COMPLETED" in last  # released
    assert slurm.run_client(site0, ["squeue", "-h"]).stdout.strip() == ""


@pytest.mark.root
@needs_tools
@pytest.mark.parametrize("site", ["site0", "site2"])
def test_submit_single_env_directory_count_and_exit(grid, site):
    backend = jobs.backend(grid, site)
    job = jobs.GridJob(
        "/bin/sh",
        ["-c", 'echo "A=$A pwd=$(pwd) on $(hostname)"'],
        count=2,
        environment={"A": "x y"},
        directory="/tmp",
    )
    result = jobs.wait(backend, backend.submit(job), 60)
    assert (result.state, result.exit_status) == ("done", 0), result.stderr
    lines = sorted(result.stdout.split("\n")[:-1])
    assert len(lines) == 2 and all(line.startswith("A=x y pwd=/tmp on host") for line in lines)
    failing = jobs.wait(backend, backend.submit(jobs.GridJob("/bin/sh", ["-c", "exit 3"])), 60)
    assert (failing.state, failing.exit_status) == ("failed", 3)


@pytest.mark.root
@needs_tools
@pytest.mark.parametrize("site,mpi", [("site0", "openmpi"), ("site2", "mpich")])
def test_submit_mpi_job(grid, site, mpi):
    backend = jobs.backend(grid, site)
    job = jobs.GridJob(str(kernels.kernel_path("ct-probe", mpi)), count=4, jobtype="mpi", mpi=mpi)
    result = jobs.wait(backend, backend.submit(job), 60)
    assert result.state == "done", result.stderr
    assert '"verification":"passed"' in result.stdout and '"ranks":4' in result.stdout


@pytest.mark.root
@needs_tools
@pytest.mark.parametrize("site,mpi", [("site0", "mpich"), ("site2", "mpich"), ("site0", "openmpi")])
def test_failed_verification_fails_the_submitted_job(grid, site, mpi, capsys):
    """grid submit of an MPI kernel whose verification fails: the job fails with the
    kernel's exit status and is stored failed (under MPICH the finalize shim once made
    every rank exit 0, and such a job was reported done); the healthy job is done."""
    import json

    from clustertune.cli import main

    line = [
        "grid",
        "submit",
        "--name",
        grid["name"],
        "--site",
        site,
        "--jobtype",
        "mpi",
        "--mpi",
        mpi,
        "--count",
        "2",
        "--json",
        str(kernels.kernel_path("ct-npb-lu", mpi)),
        "--class",
        "S",
    ]
    store = Store(os.environ["CLUSTERTUNE_DB"])
    for fault in (False, True):
        code = main(line + ["--inject-fault"] * fault)
        payload = json.loads(capsys.readouterr().out)
        if fault:  # the kernel's 1, or srun's status for a task that exited 1
            assert (code, payload["state"]) == (1, "failed") and payload["exit_status"], payload
        else:
            assert (code, payload["state"], payload["exit_status"]) == (0, "done", 0), payload
        assert store.get(payload["run_id"])["status"] == ("failed" if fault else "ok")


@pytest.mark.root
@needs_tools
def test_failed_verification_fails_the_coallocated_run(grid, store):
    """The co-allocated grid launcher (mpirun across a Slurm and an ssh site, MPICH under
    the finalize shim): the job's own exit status fails the run, beside the verdict."""
    from clustertune.levels.npb.run import run_npb

    record = run_npb(
        cluster_from_grid(grid),
        store,
        "lu",
        "S",
        2,
        "mpich",
        hosts=["host0", "host4"],
        inject_fault=True,
        timeout=60,
    )
    assert (record["status"], record["verification"]) == ("failed", "failed")
    assert "exit status 1" in record["error"], record["error"]


@pytest.mark.root
@needs_tools
def test_cancel_active_job(grid):
    backend = jobs.backend(grid, "site1")
    handle = backend.submit(jobs.GridJob("/bin/sleep", ["60"]))
    deadline = time.monotonic() + 20
    while backend.poll(handle) != "active" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert backend.poll(handle) == "active"
    backend.cancel(handle)
    result = jobs.wait(backend, handle, 20)
    assert result.state == "failed"


@pytest.mark.root
@needs_tools
def test_ssh_site_accepts_only_its_key(grid, tmp_path):
    site = grid["sites"][2]
    ns = site["hosts"][0]["namespace"]
    wrapper = Path(grid["dir"]) / "ssh" / "ssh"
    ok = subprocess.run(
        ssh.argv_on(Path(grid["dir"]), ns, "host5", "echo yes"),
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert ok.stdout.strip() == "yes", ok.stderr
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    text = wrapper.read_text().replace(str(Path(grid["dir"]) / "ssh" / "id_ed25519"), str(other))
    foreign = tmp_path / "ssh-foreign"
    foreign.write_text(text)
    foreign.chmod(0o755)
    refused = subprocess.run(
        ["ip", "netns", "exec", ns, str(foreign), "host5", "echo yes"],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert refused.returncode == 255 and "yes" not in refused.stdout
    assert "Permission denied" in refused.stderr


def _echo(tag: str) -> jobs.GridJob:
    return jobs.GridJob(
        "/bin/sh",
        ["-c", f"echo {tag} buf=$CT_SOCKBUF if=$CT_IFACE"],
        environment={"CT_SOCKBUF": "65536" if tag == "a" else "262144", "CT_IFACE": "eth0"},
    )


@pytest.mark.root
@needs_tools
def test_coallocated_subjobs_start_together_with_their_own_environment(grid):
    out = coallocate_jobs(grid, [("site0", _echo("a")), ("site2", _echo("b"))], 20, 60)
    assert out["started"] and out["error"] is None
    a, b = out["subjobs"]
    assert a["result"]["stdout"] == "a buf=65536 if=eth0\n"
    assert b["result"]["stdout"] == "b buf=262144 if=eth0\n"
    assert a["started"] == b["started"] and a["result"]["state"] == b["result"]["state"] == "done"


@pytest.mark.root
@needs_tools
def test_subjob_never_starting_cancels_the_others(grid, monkeypatch):
    monkeypatch.setenv(NEVER_START, "site1")
    out = coallocate_jobs(grid, [("site0", _echo("a")), ("site1", _echo("b"))], 3, 60)
    assert not out["started"]
    assert out["error"] == "site1: not started within the 3 s start barrier"
    for sub in out["subjobs"]:  # nothing ran past the barrier
        assert sub["result"]["state"] == "failed" and sub["result"]["stdout"] == ""
        assert "started" not in sub
    for site in grid["sites"][:2]:
        assert slurm.run_client(site, ["squeue", "-h"]).stdout.strip() == ""


@pytest.mark.root
@needs_tools
def test_subjob_refused_cancels_the_others(grid):
    bad = jobs.GridJob("/bin/true", hosts=["host0"])  # host0 is not a host of site2
    out = coallocate_jobs(grid, [("site0", _echo("a")), ("site2", bad)], 10, 60)
    assert not out["started"] and out["error"].startswith("site2: submission refused: job: hosts")
    assert out["subjobs"][0]["result"]["state"] == "failed"
    assert out["subjobs"][0]["result"]["stdout"] == ""


@pytest.mark.root
@needs_tools
def test_subjobs_under_the_heartbeat_are_cancelled_when_the_wan_is_cut(grid):
    """Co-allocated subjobs on site0 (Slurm) and site2 (ssh) run under the heartbeat; the
    WAN of site2 is cut: both are cancelled long before their end, and the result says
    what died."""
    sleeper = [
        ("site0", jobs.GridJob("/bin/sleep", ["30"], hosts=["host0"])),
        ("site2", jobs.GridJob("/bin/sleep", ["30"])),
    ]
    out: dict = {}
    worker = threading.Thread(target=lambda: out.update(coallocate_jobs(grid, sleeper, 20, 60)))
    worker.start()
    time.sleep(1)
    try:
        virtual.set_wan(grid["name"], "site2", up=False)
        worker.join(timeout=60)
    finally:
        virtual.set_wan(grid["name"], "site2", up=True)
    assert out["started"] and out["heartbeat"] == "WAN: site2's link to the WAN is DOWN"
    assert out["error"].startswith("heartbeat: WAN: site2")
    for sub in out["subjobs"]:
        assert sub["result"]["state"] == "failed" and "(cancelled: WAN" in sub["result"]["stderr"]
        assert sub["ended"] - sub["started"] < 30
    for site in grid["sites"][:1]:
        assert slurm.run_client(site, ["squeue", "-h"]).stdout.strip() == ""


@pytest.mark.root
@needs_tools
@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_linpack_within_one_site_and_across_two(grid, store, mpi):
    """seeds/000: the same LU on 2 ranks inside site0 (plain launcher) and over site0 and
    site1 (grid stack): both pass the residual check, only the second is co-allocated
    (an allocation granted on each site, released after), and the report section sets
    the two rates side by side as the records hold them."""
    within, across = [
        compare.run_case(
            grid, store, compare.Case("linpack", placement, path, mpi, n=480, nb=32), timeout=60
        )
        for placement, path in (("within", "plain"), ("across", "grid"))
    ]
    for r in (within, across):
        assert r["status"] == "ok" and r["verification"] == "passed", r["error"]
        assert r["level"] == "grid" and r["samples"][0]["passed"] is True
    assert within["meta"]["hosts"] == ["host0", "host1"] and "coalloc" not in within["meta"]
    assert across["meta"]["hosts"] == ["host0", "host2"]
    sites = across["meta"]["coalloc"]["sites"]
    assert sorted(sites) == ["site0", "site1"]
    assert [sites[s]["hosts"] for s in ("site0", "site1")] == [["host0"], ["host2"]]
    for s in sites.values():
        assert s["requested"] <= s["granted"] <= s["started"] <= s["ended"]
        assert s["allocation"].isdigit() and "released" in s
    assert across["figures"]["allocation_s"] >= 0 and across["figures"]["job_s"] > 0
    for site in grid["sites"][:2]:
        assert slurm.run_client(site, ["squeue", "-h"]).stdout.strip() == ""
    html = section.render([within, across])
    rates = [f"{r['samples'][0]['gflops']:.3f} Gflops" for r in (within, across)]
    row = html[html.index("Linpack N=480") :].split("</tr>")[0]
    assert rates[0] in row and rates[1] in row and row.index(rates[0]) < row.index(rates[1])
    for site in grid["sites"]:
        assert f"<td>{site['name']}</td><td>{site['scheduler']}</td>" in html
    assert f"<td>{sites['site1']['allocation']}</td>" in html  # the jobs' timeline


@pytest.mark.root
@needs_tools
def test_linpack_across_a_slurm_and_an_ssh_site(grid, store):
    """The LU over site0 (Slurm: srun --jobid) and site2 (ssh with the grid's key): only
    the Slurm site is allocated, the ssh site is reached directly."""
    r = compare.run_case(
        grid,
        store,
        compare.Case("linpack", "across", "grid", "mpich", n=480, nb=32, hosts=("host1", "host4")),
        timeout=60,
    )
    assert r["status"] == "ok" and r["verification"] == "passed", r["error"]
    sites = r["meta"]["coalloc"]["sites"]
    assert sites["site0"]["allocation"].isdigit() and "allocation" not in sites["site2"]
    assert sites["site2"]["scheduler"] == "ssh" and sites["site2"]["hosts"] == ["host4"]


@pytest.mark.root
@needs_tools
def test_pingpong_across_sites_is_held_to_the_wan(grid, store):
    """The MPI ping-pong over the WAN: on the paced wire its bandwidth is read from every
    size and stays under the WAN's payload rate, unlike inside a site."""
    within, across = [  # the largest message: a few of each path's bandwidth floor
        compare.run_case(
            grid, store, compare.Case("pingpong", placement, path, max_size=size), timeout=120
        )
        for placement, path, size in (("within", "plain", 4 << 20), ("across", "grid", 1 << 20))
    ]
    for r in (within, across):
        assert r["status"] == "ok", r["error"]
    assert {s["site"] for s in across["samples"] if "site" in s} <= {"site0", "site1"}
    wan = grid["wan_bps"] / 1e6
    # the paced wire's WAN pacers: never above the WAN's TCP payload rate
    assert across["figures"]["bandwidth_mbps"] <= payload_rate_bps(grid["wan_bps"]) / 1e6
    assert within["figures"]["bandwidth_mbps"] > wan
    # the paced wire: bandwidth from every size on both paths, as the network level reads it
    assert across["params"]["bandwidth_min_size"] == within["params"]["bandwidth_min_size"] == 0
    assert across["figures"]["latency_us"] > 0


@pytest.mark.root
@needs_tools
@pytest.mark.parametrize("site,job", [("site0", True), ("site2", False)])
def test_staging_in_job_and_out_verified(grid, site, job, tmp_path):
    """GASS's role: an input reaches the site's run directory through its access path
    (Slurm login node, ssh), a job there reads it and writes results (site0), files come
    back; every transfer's SHA-256 is the file's."""
    data = os.urandom(300_000)
    src = tmp_path / "input.bin"
    src.write_bytes(data)
    target, sent = staging.stage_in(grid, site, [src])
    assert target.startswith(grid["sites"][int(site[-1])]["dir"])
    assert [(t.name, t.direction, t.bytes) for t in sent] == [("input.bin", "in", len(data))]
    assert sent[0].sha256 == hashlib.sha256(data).hexdigest()
    if job:
        backend = jobs.backend(grid, site)
        script = "sha256sum input.bin > sum.txt && cat input.bin input.bin > out.bin"
        result = jobs.wait(
            backend, backend.submit(jobs.GridJob("/bin/sh", ["-c", script], directory=target)), 60
        )
        assert result.state == "done", result.stderr
        back = staging.stage_out(grid, site, target, ["sum.txt", "out.bin"], tmp_path / "back")
        assert [t.name for t in back] == ["sum.txt", "out.bin"]
        assert (tmp_path / "back" / "sum.txt").read_text().split()[0] == sent[0].sha256
        out = (tmp_path / "back" / "out.bin").read_bytes()
        assert out == data + data and back[1].sha256 == hashlib.sha256(out).hexdigest()
    else:
        back = staging.stage_out(grid, site, target, ["input.bin"], tmp_path / "back")
        assert (tmp_path / "back" / "input.bin").read_bytes() == data
        assert back[0].sha256 == sent[0].sha256
    staging.remove(grid, site, target)
    assert not Path(target).exists()


@pytest.mark.root
@needs_tools
def test_corrupted_transfers_name_the_file(grid, tmp_path, monkeypatch):
    """A byte flipped in transit: staging in fails naming the file and leaves no copy on
    the site; staging out fails naming the file and writes nothing locally."""
    (tmp_path / "good.dat").write_bytes(b"g" * 5000)
    (tmp_path / "hpl.dat").write_bytes(b"HPL input\n" * 500)
    monkeypatch.setenv(staging.CORRUPT_SWITCH, "hpl.dat")
    with pytest.raises(staging.StagingError) as err:
        staging.stage_in(grid, "site0", [tmp_path / "good.dat", tmp_path / "hpl.dat"], "t1")
    assert "site0: hpl.dat: checksum mismatch after the transfer in" in str(err.value)
    target = staging.run_dir(grid["sites"][0], "t1")
    assert sorted(p.name for p in Path(target).iterdir()) == ["good.dat"]
    monkeypatch.setenv(staging.CORRUPT_SWITCH, "good.dat")
    with pytest.raises(staging.StagingError) as err:
        staging.stage_out(grid, "site0", target, ["good.dat"], tmp_path / "back")
    assert "site0: good.dat: checksum mismatch after the transfer out" in str(err.value)
    assert list((tmp_path / "back").iterdir()) == []
    staging.remove(grid, "site0", target)


@pytest.mark.root
@needs_tools
def test_info_per_site_cached_and_used_to_pick_a_site(grid):
    """MDS's role: per site the head's CPU, cores, memory, load and the scheduler's node
    and queue state; a cached answer says its age; a job filling site1 makes site1 show
    no free CPU and the submission layer pick another site."""
    fresh = grid_info.info(grid, max_age=0)
    assert not fresh["cached"] and [s["name"] for s in fresh["sites"]] == [
        "site0",
        "site1",
        "site2",
    ]
    for s in fresh["sites"]:
        assert s["head"]["cores"] == os.cpu_count() and s["head"]["memory_bytes"] > 0
        assert len(s["head"]["load"]) == 3
    site1 = fresh["sites"][1]
    assert sorted(site1["batch"]["nodes"]) == ["host2", "host3"]
    total = sum(n["cpus"] for n in site1["batch"]["nodes"].values())
    assert "batch" not in fresh["sites"][2]  # the ssh site has no batch system
    again = grid_info.info(grid, max_age=3600)
    assert again["cached"] and again["gathered"] == fresh["gathered"] and again["age_s"] >= 0
    backend = jobs.backend(grid, "site1")
    handle = backend.submit(jobs.GridJob("/bin/sleep", ["60"], count=total))
    try:
        deadline = time.monotonic() + 20
        while backend.poll(handle) != "active" and time.monotonic() < deadline:
            time.sleep(0.2)
        busy = grid_info.info(grid, max_age=0)
        batch = busy["sites"][1]["batch"]
        assert batch["jobs_running"] == 1 and grid_info.free_cpus(busy["sites"][1]) == 0
        picked, _ = grid_info.pick_site(grid, 1, max_age=0)
        assert picked != "site1"
        with pytest.raises(UserError, match="no site can start .* site1: 0"):
            grid_info.pick_site(grid, 10_000, max_age=60)
    finally:
        backend.cancel(handle)
        jobs.wait(backend, handle, 20)


@pytest.mark.root
@needs_tools
def test_heartbeat_check_names_a_host_whose_link_is_down(grid):
    beat = heartbeat.Heartbeat(grid, {"site2": ["host5"], "site1": ["host2"]})
    assert beat.check() is None
    ns = grid["sites"][2]["hosts"][1]["namespace"]  # host5
    subprocess.run(["ip", "-n", ns, "link", "set", "eth0", "down"], check=True)
    try:
        assert beat.check() == "site2: host host5: its link is DOWN"
    finally:
        subprocess.run(["ip", "-n", ns, "link", "set", "eth0", "up"], check=True)
    assert beat.check() is None


@pytest.mark.root
@needs_tools
def test_cli_submit_stages_and_stores_the_job(grid, tmp_path, capsys):
    """grid submit --stage-in/--stage-out: the job reads its input in its run directory,
    the result comes back verified, the job is a record of the grid level that the
    report section lists with its site and exit status."""
    import json

    from clustertune.cli import main

    (tmp_path / "in.txt").write_text("hello grid\n")
    code = main(
        [
            "grid",
            "submit",
            "--name",
            grid["name"],
            "--site",
            "site1",
            "--json",
            "--stage-in",
            str(tmp_path / "in.txt"),
            "--stage-out",
            "out.txt",
            "--results",
            str(tmp_path / "back"),
            "/bin/sh",
            "-c",
            "tr a-z A-Z < in.txt > out.txt",
        ]
    )
    payload = json.loads(capsys.readouterr().out)
    assert code == 0 and payload["state"] == "done", payload
    assert (tmp_path / "back" / "out.txt").read_text() == "HELLO GRID\n"
    assert [(t["name"], t["direction"]) for t in payload["staged"]] == [
        ("in.txt", "in"),
        ("out.txt", "out"),
    ]
    record = Store(os.environ["CLUSTERTUNE_DB"]).get(payload["run_id"])
    assert (record["level"], record["kernel"], record["status"]) == ("grid", "grid-job", "ok")
    assert record["figures"]["exit_status"] == 0 and record["params"]["site"] == "site1"
    timeline = record["meta"]["coalloc"]["sites"]["site1"]
    assert timeline["requested"] <= timeline["started"] <= timeline["ended"]
    # what the run's own fields mean (review2 G6, docs/grid.md): it spans the request to
    # the result; the site's scheduler launched the job (no command of this process); the
    # load at both ends and the wire's lateness are those of the job's time
    assert record["started"] == runner.iso(timeline["requested"])
    assert record["elapsed_s"] >= timeline["ended"] - timeline["requested"] - 1
    assert record["meta"]["commands"] == []
    assert record["meta"]["load"]["start"] and record["meta"]["load"]["end"]
    assert "wire_late" in record["meta"]  # a virtual grid's paced wire
    html = section.render([record])
    assert f"<td>{record['id']}</td><td>grid-job</td><td>submitted</td><td>site1</td>" in html


@pytest.mark.root
@needs_tools
def test_stage_binary_only_where_it_can_run(grid, tmp_path):
    """A kernel binary reaches a site checksummed and executable; a binary whose
    shared library the site lacks is refused, naming the library, and not left there."""
    import shutil

    probe = kernels.kernel_path("ct-probe", "openmpi")
    target, sent = staging.stage_binary(grid, "site0", probe)
    copy = Path(target) / probe.name
    assert sent.sha256 == hashlib.sha256(probe.read_bytes()).hexdigest()
    assert os.access(copy, os.X_OK)
    staging.remove(grid, "site0", target)
    if shutil.which("cc") is None:
        pytest.skip("no C compiler for the binary with a missing library")
    (tmp_path / "gone.c").write_text("int gone(void) { return 7; }\n")
    (tmp_path / "main.c").write_text("int gone(void);\nint main(void) { return gone(); }\n")
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-o", str(tmp_path / "libctgone.so"), str(tmp_path / "gone.c")],
        check=True,
    )
    subprocess.run(
        [
            "cc",
            "-o",
            str(tmp_path / "needsgone"),
            str(tmp_path / "main.c"),
            f"-L{tmp_path}",
            "-lctgone",
        ],
        check=True,
    )
    with pytest.raises(
        staging.StagingError, match="needsgone cannot run there: libctgone.so not found on the site"
    ):
        staging.stage_binary(grid, "site0", tmp_path / "needsgone", "t-bin")
    assert not (Path(staging.run_dir(grid["sites"][0], "t-bin")) / "needsgone").exists()
    staging.remove(grid, "site0", staging.run_dir(grid["sites"][0], "t-bin"))


def _kernel_pids(ns: str, kernel: str) -> list[int]:
    """The processes of namespace ``ns`` that run ``kernel`` (by their argv[0])."""
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    pids = []
    for pid in out.split():
        with contextlib.suppress(OSError):
            argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
            if Path(argv0).name == kernel:
                pids.append(int(pid))
    return pids


def _kernel_running(ns: str, kernel: str) -> bool:
    return bool(_kernel_pids(ns, kernel))


def _run_in_thread(grid, store, case) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def run() -> None:  # a store of its own: SQLite objects stay in their thread
        mine = Store(store.path)
        out["r"] = compare.run_case(grid, mine, case)
        mine.close()

    worker = threading.Thread(target=run)
    worker.start()
    return worker, out


def _wait_for_kernel(ns: str, kernel: str) -> None:
    deadline = time.monotonic() + 60
    while not _kernel_running(ns, kernel) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _kernel_running(ns, kernel), f"{kernel} never started"
    time.sleep(2.0)  # a few sizes measured


@pytest.mark.root
@needs_tools
def test_heartbeat_names_a_cut_wan_and_stops_the_job(grid, store):
    """The WAN between the sites is cut during a ping-pong across them: the heartbeat
    names it, the hung job is stopped, the record is failed with that reason and keeps
    the sizes measured before; the WAN restored, a job across the sites runs again."""
    case = compare.Case("pingpong", "across", "grid", max_size=8 << 20, quick=False)
    worker, out = _run_in_thread(grid, store, case)
    _wait_for_kernel(grid["sites"][1]["hosts"][0]["namespace"], "ct-mpi-pingpong")
    try:
        virtual.set_wan(grid["name"], "site1", up=False)
        cut = time.monotonic()
        worker.join(timeout=120)
        stopped_s = time.monotonic() - cut
    finally:
        virtual.set_wan(grid["name"], "site1", up=True)
    record = out["r"]
    assert record["status"] == "failed"
    assert "heartbeat: WAN: site1's link to the WAN is DOWN" in record["error"]
    assert record["samples"] and max(s["size"] for s in record["samples"]) < case.max_size
    assert stopped_s < heartbeat.INTERVAL_S + coalloc.STOP_GRACE_S + 10
    again = compare.run_case(
        grid, store, compare.Case("linpack", "across", "grid", n=240, nb=32), timeout=60
    )
    assert again["status"] == "ok", again["error"]


def kill_daemon_mid_sweep(grid: dict, store, site: int, daemon: str) -> dict:
    """A full ping-pong sweep across host1 and host2; once its ranks run, ``daemon`` of
    site ``site`` is killed: the heartbeat names it while the job runs, the job is stopped
    long before its sweep would end, the record is failed with that reason and keeps the
    sizes measured before. The record."""
    case = compare.Case(
        "pingpong", "across", "grid", max_size=8 << 20, quick=False, hosts=("host1", "host2")
    )
    worker, out = _run_in_thread(grid, store, case)
    _wait_for_kernel(grid["sites"][1]["hosts"][0]["namespace"], "ct-mpi-pingpong")  # host2
    pid = grid["sites"][site]["pids"][daemon]
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    worker.join(timeout=120)
    stopped_s = time.monotonic() - killed
    record = out["r"]
    assert record["status"] == "failed"
    said = f"{grid['sites'][site]['name']}: {daemon} (pid {pid}) is not running"
    assert f"heartbeat: {said}" in record["error"]
    assert record["meta"]["coalloc"]["heartbeat"] == said
    assert record["samples"] and all(s["t_min_s"] > 0 for s in record["samples"])
    assert max(s["size"] for s in record["samples"]) < case.max_size  # cut short
    assert stopped_s < heartbeat.INTERVAL_S + coalloc.STOP_GRACE_S + 10
    return record


@pytest.mark.root
@needs_tools
def test_a_rank_killed_mid_run_is_named_and_the_samples_kept(grid, store):
    """A rank of a ping-pong across the sites dies (SIGKILL, on host2 of site1): the job
    ends within its bound, the record is not ok and names the dead rank and its host in
    the launcher's words, and keeps the sizes measured before."""
    case = compare.Case(
        "pingpong", "across", "grid", max_size=8 << 20, quick=False, hosts=("host1", "host2")
    )
    worker, out = _run_in_thread(grid, store, case)
    ns = grid["sites"][1]["hosts"][0]["namespace"]
    _wait_for_kernel(ns, "ct-mpi-pingpong")
    os.kill(_kernel_pids(ns, "ct-mpi-pingpong")[0], signal.SIGKILL)
    killed = time.monotonic()
    worker.join(timeout=120)
    stopped_s = time.monotonic() - killed
    record = out["r"]
    assert record["status"] == "incomplete"  # the runner's word for samples without a result
    said = "rank 1 with PID", "on node host2 exited on signal 9"  # OpenMPI's mpirun
    assert all(words in record["error"] for words in said), record["error"]
    assert record["samples"] and max(s["size"] for s in record["samples"]) < case.max_size
    assert stopped_s < heartbeat.INTERVAL_S + coalloc.STOP_GRACE_S + 10


@pytest.mark.root
@needs_tools
def test_heartbeat_names_a_daemon_killed_mid_run_and_keeps_the_samples(grid, store):
    """HBM's role: a full ping-pong sweep across site0 (host1) and site1 (host2); once its
    ranks run, site0's slurmd on host1 is killed: the heartbeat names it while the job
    runs, the job is stopped long before its sweep would end, the record is failed with
    that reason, and the sizes measured before stay in it. Last but one: host1 keeps a
    dead slurmd."""
    kill_daemon_mid_sweep(grid, store, 0, "slurmd-host1")
    assert slurm.run_client(grid["sites"][1], ["squeue", "-h"]).stdout.strip() == ""
    left = slurm.run_client(grid["sites"][0], ["squeue", "-h", "-o", "%t %N"]).stdout.split("\n")
    assert all(line in ("", "CG host1") for line in left), left  # released; host1 cannot answer


@pytest.mark.root
@needs_tools
def test_killed_slurmd_is_reported(grid):
    site = grid["sites"][1]
    pid = site["pids"]["slurmd-host3"]
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while daemons.alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert virtual.healthy(virtual.load(grid["name"]))["site1"] == [
        "slurmd-host3"
    ]  # last: site1 keeps a dead node
