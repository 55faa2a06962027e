"""Grid level over GRAM (live, root): a virtual grid of two GRAM sites (a GCT GRAM5
gatekeeper on each site's head in front of the fork job manager, GSI with the grid's own
CA) and a Slurm site. The probe, a ping-pong and a small Linpack run across both GRAM
sites on both MPIs, the MPI daemons of each site started as GRAM jobs; the probe across a
GRAM and the Slurm site; jobs go through the one submission interface as RSL (count,
environment, directory, jobtype=mpi; exit status from the job's own file); an unmapped
subject (co-allocation then starts nothing) and a foreign CA's certificate are refused
with the gatekeeper's logged reason; an expired certificate is refused by GSI; a
gatekeeper killed mid-run ends the run within the heartbeat's bound, named, earlier
results kept; down leaves no process and no file outside the run directory."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import unique_name
from test_grid import kill_daemon_mid_sweep

from clustertune import security
from clustertune.errors import UserError
from clustertune.grid import gram, jobs, slurm, virtual
from clustertune.grid.source import cluster_from_grid
from clustertune.levels.grid import compare
from clustertune.levels.probe.run import probe_job

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(
        any(shutil.which(t) is None for t in (*gram.TOOLS, *slurm.TOOLS))
        or not gram.FORK_CONF.is_file(),
        reason="the Grid Community Toolkit's GRAM or Slurm is not installed (make apt)",
    ),
]
ACROSS = ("host1", "host2")  # neither is the origin: both sites start their daemons by GRAM


def _outside() -> dict:
    """What GRAM would write outside the run directory: must not change."""
    seen = {"fork.conf": hashlib.sha256(gram.FORK_CONF.read_bytes()).hexdigest()}
    for target in ("/root/.globus", "/var/lib/globus", "/var/log/globus"):
        p = Path(target)
        seen[target] = sorted(str(f) for f in p.rglob("*")) if p.is_dir() else None
    return seen


@pytest.fixture(scope="module")
def grid():
    before = _outside()
    name = unique_name("gr")
    cplan, state = virtual.plan(name, 3, 2, ["gram", "gram", "slurm"], 1_000_000_000, 100_000_000)
    try:
        yield virtual.up(cplan, state)
    finally:
        virtual.down(name)
        assert virtual.leftovers(name) == []
        assert _outside() == before


def _jobs_at(site: dict) -> int:
    """GRAM jobs the site's gatekeeper has handed to its job manager."""
    return (Path(site["dir"]) / "gram/log/gatekeeper.log").read_text().count("GRAM_SCRIPT_JOB_ID")


def test_gatekeeper_per_site_in_its_head(grid):
    for site in grid["sites"][:2]:
        pid = site["pids"]["gatekeeper"]
        head = next(h for h in site["hosts"] if h["name"] == site["head"])
        assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
        assert site["contact"] == (
            f"{head['address']}:2119:/C=JP/O=clustertune/OU=server/CN={head['name']}"
        )
        assert (Path(site["dir"]) / "gram/grid-mapfile").read_text() == (
            f'"{security.subject_of(gram.USER)}" root\n'
        )


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_probe_pingpong_linpack_across_two_gram_sites(grid, store, mpi):
    """One MPI_COMM_WORLD over host1 (site0) and host2 (site1), each site's MPI daemon a
    GRAM job of its gatekeeper; co-allocation's grant at a GRAM site is GSI's."""
    jobs_before = [_jobs_at(s) for s in grid["sites"][:2]]
    probe = probe_job(
        cluster_from_grid(grid), store, 2, mpi, hosts=list(ACROSS), params={}, timeout=90
    )
    assert probe["status"] == "ok", probe["error"]
    assert {s["host"]: s["site"] for s in probe["samples"]} == {"host1": "site0", "host2": "site1"}
    pingpong = compare.run_case(
        grid,
        store,
        compare.Case("pingpong", "across", "grid", mpi, max_size=512 << 10, hosts=ACROSS),
        timeout=90,
    )
    linpack = compare.run_case(
        grid,
        store,
        compare.Case("linpack", "across", "grid", mpi, n=240, nb=32, hosts=ACROSS),
        timeout=90,
    )
    assert pingpong["status"] == "ok", pingpong["error"]
    assert pingpong["figures"]["latency_us"] > 0
    assert linpack["status"] == "ok" and linpack["verification"] == "passed", linpack["error"]
    for site in linpack["meta"]["coalloc"]["sites"].values():
        assert site["scheduler"] == "gram" and site["allocation"] == "gsi"
    assert [_jobs_at(s) - n for s, n in zip(grid["sites"][:2], jobs_before, strict=True)] == [3, 3]


@pytest.mark.parametrize("mpi", ["openmpi", "mpich"])
def test_probe_across_a_gram_and_a_slurm_site(grid, store, mpi):
    """host1 (GRAM site0: its daemon a GRAM job) and host4 (Slurm site2: srun --jobid in
    its co-allocated allocation): one MPI_COMM_WORLD."""
    before = _jobs_at(grid["sites"][0])
    probe = probe_job(
        cluster_from_grid(grid), store, 2, mpi, hosts=["host1", "host4"], params={}, timeout=90
    )
    assert probe["status"] == "ok", probe["error"]
    assert {s["host"]: s["site"] for s in probe["samples"]} == {"host1": "site0", "host4": "site2"}
    assert _jobs_at(grid["sites"][0]) == before + 1


def test_submit_rsl_states_exit_status_and_output(grid):
    """A single job (count copies, environment, directory, a failing exit status GRAM does
    not return) and an MPI job (jobtype=mpi over the site's two hosts), through the
    gatekeeper's Slurm job manager when GCT's is installed."""
    backend = jobs.backend(grid, "site1")
    single = backend.submit(
        jobs.GridJob(
            "/bin/sh",
            ["-c", 'echo "$A" "$(pwd)"; exit 3'],
            count=2,
            environment={"A": "x y"},
            directory="/tmp",
        )
    )
    assert backend.poll(single) in ("pending", "active", "done", "failed")
    mpi = backend.submit(jobs.GridJob("/bin/hostname", count=2, jobtype="mpi", mpi="mpich"))
    result = jobs.wait(backend, single, 60)
    assert (result.state, result.exit_status) == ("failed", 3)
    assert result.stdout.splitlines() == ["x y /tmp", "x y /tmp"]
    request = (Path(single.dir) / "job.rsl").read_text()
    assert '(directory="/tmp")' in request and '(A "x y")' in request
    result = jobs.wait(backend, mpi, 60)
    assert (result.state, result.exit_status) == ("done", 0), result.stderr
    assert sorted(result.stdout.split()) == ["host2", "host3"]
    assert '(count=2)(jobtype="mpi")' in (Path(mpi.dir) / "job.rsl").read_text()
    if gram.fronts_slurm():  # through the gatekeeper's Slurm job manager: the site's Slurm
        shown = slurm.run_client(grid["sites"][1], ["scontrol", "-o", "show", "job"]).stdout
        assert f"StdOut={single.dir}/out" in shown and f"StdOut={mpi.dir}/out" in shown
        assert "(host_count=2)" in request


def on_host3_through_gram(grid: dict, command: str) -> subprocess.CompletedProcess:
    """The grid launcher's remote shell for host3 (of GRAM site1): grid/gramrun.py."""
    argv = [sys.executable, "-m", "clustertune.grid.gramrun", grid["name"], "site1", "host3"]
    return subprocess.run([*argv, command], capture_output=True, text=True, timeout=60)


def test_launchers_remote_shell_is_a_gram_job(grid):
    """The grid launcher's way onto a host of a GRAM site: a GRAM job whose output is
    passed on and whose exit status is the command's (globusrun -o gives neither)."""
    before = _jobs_at(grid["sites"][1])
    out = on_host3_through_gram(grid, "hostname; echo oops >&2; exit 4")
    assert (out.returncode, out.stdout, out.stderr) == (4, "host3\n", "oops\n")
    assert _jobs_at(grid["sites"][1]) == before + 1


def test_gram_jobs_see_the_accounts_home(grid):
    """The job manager's home is private to the site (it writes ~/.globus there), yet a
    checkout, venv or kernel under the real home stays visible to the jobs (a bind over
    the home hid a checkout in /root, and every kernel launched there failed)."""
    with tempfile.NamedTemporaryFile("w", dir=Path.home(), prefix=".ct-gram-") as mark:
        mark.write("seen\n")
        mark.flush()
        out = on_host3_through_gram(grid, f"cat {mark.name}")
    assert (out.returncode, out.stdout) == (0, "seen\n"), out.stderr


def _proxy(grid: dict, name: str, days: int, tmp_path: Path) -> Path:
    creds = security.issue(Path(grid["dir"]) / "gsi" / "ca", name, rsa=True, days=days)
    gram.make_proxy(creds, tmp_path / f"{name}.proxy")  # an expired one says so, writes it
    return tmp_path / f"{name}.proxy"


def test_unmapped_subject_refused_with_the_logged_reason(grid, store, tmp_path, monkeypatch):
    """A certificate of the grid's CA whose subject no grid-mapfile maps: the gatekeeper
    refuses the job and logs why; a run across the sites is not started at all."""
    monkeypatch.setenv("X509_USER_PROXY", str(_proxy(grid, "stranger", 30, tmp_path)))
    with pytest.raises(UserError) as err:
        jobs.backend(grid, "site1").submit(jobs.GridJob("/bin/true"))
    assert "authentication with the remote server failed" in str(err.value)
    assert "gatekeeper log: globus_gss_assist_gridmap() failed authorization" in str(err.value)
    assert "Could not map /C=JP/O=clustertune/OU=user/CN=stranger" in str(err.value)
    r = compare.run_case(
        grid,
        store,
        compare.Case("linpack", "across", "grid", n=240, nb=32, hosts=ACROSS),
        timeout=60,
    )
    assert r["status"] == "failed"
    assert "co-allocation failed, nothing started" in r["error"]
    assert "GRAM authentication refused" in r["error"] and "Could not map" in r["error"]


def test_foreign_certificate_refused_with_the_logged_reason(grid, tmp_path, monkeypatch):
    """The mapped subject, but certified by another CA: the gatekeeper cannot verify it."""
    security.init_ca(tmp_path / "ca", rsa=True)
    creds = security.issue(tmp_path / "ca", gram.USER, rsa=True)
    assert gram.make_proxy(creds, tmp_path / "foreign.proxy").returncode == 0
    monkeypatch.setenv("X509_USER_PROXY", str(tmp_path / "foreign.proxy"))
    with pytest.raises(UserError) as err:
        jobs.backend(grid, "site0").submit(jobs.GridJob("/bin/true"))
    assert "gatekeeper log: GSS failed" in str(err.value)
    assert "Cannot find trusted CA certificate" in str(err.value)


def test_expired_certificate_refused(grid, tmp_path, monkeypatch):
    """GSI refuses an expired certificate's proxy (its lifetime is the chain's shortest)
    before anything reaches the site: no job at the gatekeeper."""
    monkeypatch.setenv("X509_USER_PROXY", str(_proxy(grid, "expired", -1, tmp_path)))
    site = grid["sites"][1]
    before = _jobs_at(site)
    with pytest.raises(UserError, match="expired 1440 minutes ago"):
        jobs.backend(grid, "site1").submit(jobs.GridJob("/bin/true"))
    assert _jobs_at(site) == before


def test_gatekeeper_killed_mid_run_is_named_and_earlier_results_kept(grid, store):
    """Last but one (site1 keeps a dead gatekeeper): a full ping-pong sweep across the
    sites; once its ranks run, site1's gatekeeper is killed: the heartbeat names it, the
    run ends within its bound, failed with that reason and the sizes measured before;
    the store keeps the run before it."""
    earlier = compare.run_case(
        grid,
        store,
        compare.Case("linpack", "across", "grid", n=240, nb=32, hosts=ACROSS),
        timeout=90,
    )
    assert earlier["status"] == "ok", earlier["error"]
    kill_daemon_mid_sweep(grid, store, 1, "gatekeeper")
    kept = store.get(earlier["id"])
    assert kept["status"] == "ok" and kept["samples"] == earlier["samples"]


def test_down_leaves_nothing_behind(grid):
    """Last: the job managers outlived their jobs (and site1's gatekeeper); down stops
    every process of the gatekeepers' mount namespaces and removes every file."""
    assert any(gram.stray(s) for s in grid["sites"])
    assert virtual.down(grid["name"])
    assert virtual.leftovers(grid["name"]) == []
    assert [gram.stray(s) for s in grid["sites"]] == [[], [], []]
