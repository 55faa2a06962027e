"""A stopped clustertune stops its job: SIGINT (a terminal's Ctrl-C, sent to the CLI's
process group), SIGTERM and SIGHUP (a batch system or a supervisor) kill every process of
the job, wherever the launcher put it, and store the run as interrupted; SIGKILL leaves
no time for that, and the watchdog kills the job instead. Orphaned ranks would falsify
every later measurement on the same cores. The Slurm launcher's case is in test_slurm.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from clustertune.launch.process import marked_pids
from clustertune.results import Store

TAG = "CT_TEST_INTERRUPT"  # inherited by the CLI's every descendant, ranks included


def start_hung_probe(tmp_path, cluster: str | None, np: int, extra_env=None):
    """The CLI running a probe whose rank 0 never ends; returns it and its tag once every
    rank is up (the job's processes carry the tag through the launcher)."""
    tag = uuid.uuid4().hex
    argv = [
        sys.executable,
        "-m",
        "clustertune.cli",
        "probe",
        "--hang",
        "--np",
        str(np),
        "--timeout",
        "120",
        "--db",
        str(tmp_path / "r.db"),
    ]
    argv += ["--cluster", cluster] if cluster else []
    env = {**os.environ, TAG: tag, **(extra_env or {})}
    cli = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while len(ranks(tag)) < np:
        assert cli.poll() is None, cli.communicate()
        assert time.monotonic() < deadline, "the ranks never started"
        time.sleep(0.2)
    time.sleep(1.0)  # rank 0 reaches its wait
    return cli, tag


def ranks(tag: str) -> list[int]:
    found = []
    for pid in marked_pids(TAG, tag):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"ct-probe" in f.read().split(b"\0")[0]:
                    found.append(pid)
        except OSError:
            continue
    return found


def wait_for_nothing_left(tag: str, within_s: float) -> list[int]:
    """Every process carrying the tag (the watchdog too) must end within ``within_s``."""
    deadline = time.monotonic() + within_s
    while (left := marked_pids(TAG, tag)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def assert_stopped_and_stored(cli, tag, tmp_path, sig) -> None:
    out, err = cli.communicate(timeout=30)
    assert cli.returncode == 128 + sig, err
    assert "interrupted" in err and "Traceback" not in err, err
    assert wait_for_nothing_left(tag, 15) == [], "processes of the stopped job still run"
    (record,) = Store(tmp_path / "r.db").list()
    assert record["status"] == "interrupted", record
    assert record["error"].startswith("interrupted by the user")


CASES = [
    pytest.param(None, id="local"),
    pytest.param("vcluster", id="vcluster", marks=pytest.mark.root),
]


@pytest.fixture
def cluster_name(request, make_vcluster):
    if request.param is None:
        return None
    return make_vcluster(hosts=2).name


@pytest.mark.parametrize("cluster_name", CASES, indirect=True)
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=str)
def test_stop_signal_stops_the_job_and_stores_it(tmp_path, cluster_name, sig):
    cli, tag = start_hung_probe(tmp_path, cluster_name, np=2)
    if sig == signal.SIGINT:
        os.killpg(cli.pid, sig)  # what a terminal does on Ctrl-C
    else:
        cli.send_signal(sig)
    assert_stopped_and_stored(cli, tag, tmp_path, sig)


@pytest.mark.parametrize("cluster_name", CASES, indirect=True)
def test_killed_cli_leaves_no_job_behind(tmp_path, cluster_name):
    cli, tag = start_hung_probe(tmp_path, cluster_name, np=2)
    cli.kill()
    cli.communicate(timeout=30)
    assert wait_for_nothing_left(tag, 15) == [], "the job outlived a SIGKILLed clustertune"


@pytest.mark.root
def test_ctrl_c_stops_a_matrix_whose_pairs_run_in_threads(tmp_path, make_vcluster):
    """The TCP matrix measures a round's pairs from worker threads: after Ctrl-C none of
    them may start its next launch, and the run is stored with what it had."""
    cluster = make_vcluster(hosts=4, link_bps=10**8)
    tag = uuid.uuid4().hex
    argv = [
        sys.executable,
        "-m",
        "clustertune.cli",
        "net",
        "matrix",
        "--cluster",
        cluster.name,
        "--size",
        "64M",
        "--db",
        str(tmp_path / "r.db"),
    ]
    cli = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, TAG: tag},
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while len(busy_clients(tag)) < 2:  # both pairs of the first round are measuring
        assert cli.poll() is None and time.monotonic() < deadline, cli.communicate()
        time.sleep(0.2)
    stopped = time.monotonic()
    os.killpg(cli.pid, signal.SIGINT)
    assert_stopped_and_stored(cli, tag, tmp_path, signal.SIGINT)
    assert time.monotonic() - stopped < 20  # a 64 MB pair at 100 Mbit alone takes 5 s


def busy_clients(tag: str) -> list[int]:
    """The TCP clients measuring the big message (a pair measures 1 B first)."""
    found = []
    for pid in marked_pids(TAG, tag):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if b"--connect" in args and str(64 << 20).encode() in args:
            found.append(pid)
    return found
