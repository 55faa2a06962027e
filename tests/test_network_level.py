"""The network level end to end: net pingpong (TCP, MPI) and net matrix on virtual clusters,
the JSON contract, bad input and faults. Pure helpers are checked without root."""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections import Counter
from itertools import combinations
from pathlib import Path
from types import SimpleNamespace

import pytest
from clirun import cli
from netclusters import SharedClusters, faulted, judged_matrix

from clustertune import kernels, netns, runner, vcluster
from clustertune.cluster import Cluster, Host, Site, local_cluster
from clustertune.errors import UserError
from clustertune.launch.base import Job
from clustertune.launch.process import Completed
from clustertune.levels import network
from clustertune.levels.network import (
    analysis,
    counters,
    matrix,
    matrix_output,
    pingpong,
    reach,
    schedule,
    section,
)
from clustertune.runner import Run
from clustertune.units import payload_rate_bps

MBIT = 10**6
CONTRACT = ("latency_us", "bandwidth_mbps", "saturation_point_bytes", "n_half_bytes", "dips")


def fake_vcluster(rate_bps: int | None, hosts: int = 2, wire: str = "tbf") -> Cluster:
    """A cluster description only (nothing built): enough for the choices made up front."""
    return Cluster(
        name="fake",
        sites=(Site("site0", "vcluster"),),
        hosts=tuple(Host(f"host{i}", f"10.0.0.{i}", link_bps=rate_bps) for i in range(hosts)),
        extra={"wire": wire},
    )


# --------------------------------------------------------------------------- no root


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8])
def test_rounds_cover_every_pair_once_in_disjoint_rounds(n):
    hosts = [f"h{i}" for i in range(n)]
    rounds = schedule.rounds(hosts)
    assert len(rounds) == n - 1 + n % 2
    seen = [frozenset(p) for r in rounds for p in r]
    assert sorted(map(sorted, seen)) == sorted(map(sorted, combinations(hosts, 2)))
    for r in rounds:
        used = [h for p in r for h in p]
        assert len(used) == len(set(used)), f"a host twice in round {r}"


def test_pairs_run_with_no_host_twice_at_once_and_at_most_the_slots(monkeypatch):
    hosts = [f"h{i}" for i in range(8)]
    cluster = Cluster("lab", tuple(Host(h, None, 1, "s") for h in hosts), (Site("s", "vcluster"),))
    running, seen, lock = set(), [], threading.Lock()

    def measure(run, a, b, runs, timeout, tag, streams):
        with lock:
            assert not {a, b} & {h for p in running for h in p}, f"{a}-{b} beside {running}"
            running.add((a, b))
            seen.append(len(running))
        time.sleep(0.01 if "h0" in (a, b) else 0.002)
        with lock:
            running.remove((a, b))
        return [{"pair": (a, b)}]

    monkeypatch.setattr(matrix, "_tcp_pair", measure)
    monkeypatch.setattr(schedule.os, "sched_getaffinity", lambda pid: {0, 1})
    pairs = [p for r in schedule.rounds(hosts) for p in r]
    found = matrix.tcp_pairs(SimpleNamespace(cluster=cluster), pairs, [], 1.0, {})
    assert sorted(found) == sorted(pairs) and all(v == [{"pair": p}] for p, v in found.items())
    assert max(seen) == 2 * schedule.PAIRS_PER_CPU  # 4 at once of a round's 4 pairs


def test_bandwidth_floor_follows_the_tbf_bucket():
    assert pingpong.bandwidth_min_size(fake_vcluster(100 * MBIT), "host0", "host1") == 256 * 1024
    assert pingpong.bandwidth_min_size(fake_vcluster(10**9), "host0", "host1") == 2_000_000
    assert pingpong.bandwidth_min_size(fake_vcluster(None), "host0", "host1") == 0
    # the paced wire never lets a message outrun it: every size counts, as on real links
    assert pingpong.bandwidth_min_size(fake_vcluster(10**9, wire="paced"), "host0", "host1") == 0
    here = local_cluster()
    assert pingpong.bandwidth_min_size(here, here.hosts[0].name, here.hosts[0].name) == 0


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"layer": "pvm", "mode": "bidir"}, "does not exist for --layer pvm"),
        ({"layer": "mpi", "mode": "stream"}, "does not exist for --layer mpi"),
        ({"layer": "tcp", "mode": "nonblocking"}, "does not exist for --layer tcp"),
        ({"max_size": 0}, "between 1 B and 1 GiB"),
        ({"max_size": 2 << 30}, "between 1 B and 1 GiB"),
        ({"max_size": 1 << 20}, "too short for this shaped virtual cluster"),
        ({"layer": "mpi", "sockbuf": 65536}, "use it with --layer tcp"),
        ({"layer": "mpi", "wait": "poll"}, "--wait applies to --layer tcp only"),
        ({"wait": "spin"}, "expected one of block, poll"),
        ({"b": "host9"}, "no host 'host9'"),
    ],
)
def test_validate_rejects_before_running(changes, message):
    spec = pingpong.PingpongSpec(**{"layer": "tcp", "a": "host0", "b": "host1", **changes})
    with pytest.raises(UserError, match=message):
        pingpong.validate(fake_vcluster(10**9), spec)


def test_pvm_without_its_kernel_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERTUNE_BUILD_DIR", str(tmp_path))
    spec = pingpong.PingpongSpec("pvm", "host0", "host1")
    with pytest.raises(UserError, match="PVM kernel not built"):
        pingpong.validate(fake_vcluster(10**9), spec)


def test_derive_of_a_cut_off_sweep_keeps_what_it_can():
    samples = [{"size": s, "t_min_s": 1e-5 + s / 1e8} for s in (1, 2, 4, 8, 64, 1024)]
    figures = pingpong.derive_for(0)(samples, None)
    assert figures["latency_us"] == pytest.approx(10.01, rel=1e-3)
    assert "bandwidth_mbps" in figures and figures["dips"] == []
    assert pingpong.derive_for(0)(samples[:1], None)["unavailable"].startswith("only one")


def test_cli_pingpong_json_contract_on_this_host(tmp_path):
    db = str(tmp_path / "r.db")
    out = cli("net", "pingpong", "--max-size", "64K", "--json", "--db", db, timeout=240)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)  # exactly one document
    for key in (*CONTRACT, "points", "run_id", "status"):
        assert key in doc, key
    assert doc["status"] == "ok" and isinstance(doc["dips"], list)
    assert {"size", "time_s", "throughput_mbps"} <= set(doc["points"][0])
    assert doc["points"][-1]["size"] == 65536
    listed = json.loads(cli("results", "show", str(doc["run_id"]), "--json", "--db", db).stdout)
    assert listed["level"] == "network" and listed["figures"]["latency_us"] == doc["latency_us"]
    assert len(listed["samples"]) == len(doc["points"])
    html_out = tmp_path / "r.html"
    assert cli("report", "--out", str(html_out), "--db", db).returncode == 0
    html = html_out.read_text()
    assert network.LEVEL.title in html and "Saturation graph" in html


def _record(run_id: int, layer: str, latency_s: float, wait=None, mpi=None) -> dict:
    """A stored ping-pong record as the report reads it: t = L + s / (1 Gbit/s)."""
    samples = [{"size": s, "t_min_s": latency_s + s * 8 / 1e9} for s in (1, 64, 1 << 20, 4 << 20)]
    return {
        "id": run_id,
        "status": "ok",
        "samples": samples,
        "params": {
            "command": "pingpong",
            "layer": layer,
            "mode": "pingpong",
            "mpi": mpi,
            "between": ["host0", "host1"],
            "sockbuf": None,
            "nagle": False,
            "wait": wait,
        },
        "meta": {"cluster": {"name": "lab", "link_bps": {}}, "hosts": ["host0", "host1"]},
        "figures": {"bandwidth_min_size_bytes": 0, "latency_us": latency_s * 1e6},
    }


def test_overhead_table_gives_both_tcp_baselines_and_names_the_like_for_like_one():
    records = [
        _record(1, "tcp", 30e-6, wait="block"),
        _record(2, "tcp", 6e-6, wait="poll"),
        _record(3, "mpi", 7.5e-6, mpi="mpich"),
    ]
    html = section._overhead(records)
    rows = [r for r in html.split("<tr>") if "MPI mpich" in r]
    assert len(rows) == 2, html
    blocking = next(r for r in rows if "blocking recv" in r)
    polling = next(r for r in rows if "busy-poll" in r)
    assert "0.25" in blocking and "like for like" not in blocking  # 7.5 / 30
    assert "1.25" in polling and "like for like" in polling  # 7.5 / 6
    # the baseline is the best TCP run of its kind, not the newest (a collapsed poll run)
    collapsed = _record(5, "tcp", 2000e-6, wait="poll")
    html = section._overhead([*records, collapsed])
    polling = next(r for r in html.split("<tr>") if "MPI mpich" in r and "busy-poll" in r)
    assert "1.25" in polling and "runs 3 / 2" in polling, polling
    # a run stored before --wait existed is the blocking baseline, alone
    old = _record(4, "tcp", 30e-6)
    del old["params"]["wait"]
    html = section._overhead([old, records[2]])
    rows = [r for r in html.split("<tr>") if "MPI mpich" in r]
    assert len(rows) == 1 and "blocking recv" in rows[0], html


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--between", "nohost,other"], "no host 'nohost'"),
        (["--max-size", "0"], "between 1 B and 1 GiB"),
    ],
)
def test_cli_bad_input_is_one_line(args, fragment):
    out = cli("net", "pingpong", *args, timeout=30)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], out.stderr


@pytest.mark.parametrize("launcher", ("vcluster", "grid"))
def test_a_pair_across_sites_is_held_to_the_wan_rate(launcher):
    """A 1 Gbit host pair in two sites joined by 100 Mbit: the WAN is the pair's rate, and
    shaped virtual hosts (cluster or grid) quote bandwidth only from the large sizes (a
    grid once read 202 Mbit/s over its 100 Mbit WAN)."""
    hosts = tuple(Host(f"h{i}", f"10.0.0.{i}", site=f"s{i // 2}", link_bps=10**9) for i in range(4))
    sites = tuple(Site(f"s{k}", launcher, 10**8) for k in range(2))
    cluster = Cluster("g", hosts, sites)
    assert pingpong.pair_rate_bps(cluster, "h0", "h1") == 10**9
    assert pingpong.pair_rate_bps(cluster, "h1", "h2") == 10**8
    assert pingpong.bandwidth_min_size(cluster, "h1", "h2") > 0


# --------------------------------------------------------------------------- virtual clusters


@pytest.fixture(scope="module")
def shared():
    """Virtual clusters kept for this module, for the tests that leave theirs as they
    found it (faults set with ``faulted`` are cleared after the test)."""
    clusters = SharedClusters()
    yield clusters
    clusters.down()


def sweep(cluster, store, layer: str, max_size: int, **kw) -> dict:
    spec = pingpong.PingpongSpec(layer, "host0", "host1", max_size=max_size, **kw)
    record = pingpong.run_pingpong(cluster, store, spec)
    assert record["status"] == "ok", record["error"]
    return record


# The base sizes only (no base +- 3 B): a third of a sweep's points, and the same figures
# for what these tests read (the latency plateau of sizes <= 64 B, the bandwidth of the
# largest sizes).
BASE_SIZES = ("--perturbation", "0")

# Short TCP runs allowed to show the latency floor MPI is held to (a run is ~1 s).
TCP_FLOOR_RUNS = 8
# How far below TCP's busy-polling floor an MPI latency may read: MPICH's polling adds next
# to nothing to the kernel's path, so the two floors are equal within a run's noise (alone,
# MPICH/TCP read 1.00-1.04 in four runs; in two whole suites 0.947 and 0.944: 15.52/16.39
# and 15.57/16.49 µs at 1 Gbit). An MPI that did not cross the wire (shared memory between
# virtual hosts: ~1 µs) or a figure off by a factor still fails.
MPI_BELOW_TCP_NOISE = 0.10


@pytest.mark.root
@pytest.mark.parametrize("rate, max_size", [(100 * MBIT, 1 << 20), (10**9, 4 << 20)])
def test_bandwidth_near_nominal_and_mpi_latency_above_tcp(shared, store, rate, max_size):
    """Issue 3's done-when: bandwidth near the link's payload ceiling (issue 19: on the
    paced wire at most 1448/1538 of nominal, 1 % for clocks; at least 85 % of it, TCP's
    start and a loaded CPU), and MPI latency >= TCP latency on the same pair, for both
    MPIs, within MPI_BELOW_TCP_NOISE. Both MPI libraries busy-poll the socket (strace:
    MPICH/UCX epoll_wait(0), OpenMPI poll(0)), so the TCP latency they are held to is the
    kernel's busy-polling one (--wait poll): against the blocking-recv one, which pays a
    wake-up per message, MPICH comes out faster (docs/network.md). The TCP floor is the
    best of up to TCP_FLOOR_RUNS short busy-polling runs (sizes <= 64 B: all the latency
    reads; a whole sweep for it cost 17 s at 100 Mbit), stopping once it is at or below the
    faster MPI, so a slow TCP run on a busy machine cannot make MPI look good.

    No figure may exceed the ceiling, whatever the load. The floors (85 % of it, MPI above
    TCP) are judged as the product judges a run: not on a machine so loaded that its
    busy-polling ranks starve (``section.starved``, the CLI's "not judged" rule; at load
    14-17 on 2 CPUs the 1 Gbit case failed its floor). The TCP run falls under the same
    rule: its pacers and both ends share those CPUs, and a starved pacer slows the wire
    (docs/network.md, "A late wire"). Not judged, the test says so as a skip."""
    cluster = shared.get(hosts=2, link_bps=rate)
    tcp = sweep(cluster, store, "tcp", max_size, extra_args=BASE_SIZES)
    mpis = {
        name: sweep(cluster, store, "mpi", max_size, mpi=name, extra_args=BASE_SIZES)
        for name in ("openmpi", "mpich")
    }
    ceiling = payload_rate_bps(rate) / MBIT
    judged, runs = True, [tcp, *mpis.values()]
    for record in runs:
        figures = record["figures"]
        assert figures["bandwidth_mbps"] <= 1.01 * ceiling, (ceiling, figures)
        if section.starved(record) is None:
            assert 0.85 * ceiling <= figures["bandwidth_mbps"], (ceiling, figures)
        else:
            judged = False
    poll = pingpong.PingpongSpec("tcp", "host0", "host1", wait="poll")
    assert pingpong._sweep_args(poll)[-2:] == ["--wait", "poll"]  # net pingpong --wait poll
    fastest_mpi = min(record["figures"]["latency_us"] for record in mpis.values())
    best_poll = float("inf")
    for _ in range(TCP_FLOOR_RUNS):  # two spinning ends can share a core by chance
        with Run(cluster, store, level="network", kernel=pingpong.TCP_KERNEL) as run:
            again = pingpong.tcp_pair(
                run, "host0", "host1", ["--max-size", "64", "--wait", "poll"], 60
            )
        assert again.output.result["detail"]["wait"] == "poll"
        samples = analysis.curve_from_points(again.output.samples)
        best_poll = min(best_poll, analysis.latency_us(samples))
        if best_poll <= fastest_mpi:  # the floor is shown: more runs could only lower it
            break
    for name, record in mpis.items():
        latency = record["figures"]["latency_us"]
        floor = (1 - MPI_BELOW_TCP_NOISE) * best_poll
        assert not judged or latency >= floor, (name, latency, best_poll)
    if not judged:  # a green run must not hide that only the ceiling was checked
        pytest.skip("the floors: " + "; ".join(filter(None, map(section.starved, runs))))


@pytest.mark.root
def test_a_paced_wire_is_never_outrun(shared, store):
    """--wire paced: every host's pacer runs, and no message size of a ping-pong sweep gets
    through faster than the nominal rate (on the tbf wire mid sizes read up to twice it).
    An upper bound only: a busy machine slows the wire, it cannot speed it up."""
    cluster = shared.get(hosts=2, link_bps=100 * MBIT)
    assert cluster.extra["wire"] == "paced"  # the default wire
    assert sorted(vcluster.load_state(cluster.name)["delay_pids"]) == ["host0", "host1"]
    spec = pingpong.PingpongSpec(
        "tcp", "host0", "host1", max_size=1 << 20, extra_args=("--perturbation", "0")
    )
    record = pingpong.run_pingpong(cluster, store, spec)
    assert record["status"] == "ok", record["error"]
    curve = analysis.curve_from_points(record["samples"])
    assert len(curve.size) >= 10 and curve.throughput_mbps.max() <= 100, curve.throughput_mbps


@pytest.mark.root
def test_matrix_flags_the_slow_host_and_no_other(shared, store):
    """host2's 1 Gbit link carrying 50 Mbit (a rate fault; a host whose nominal link is
    slower is judged against that, see the test below): its 1 MiB messages take 0.17 s
    each, where at 10 Mbit (the test's first rate) they took 0.84 s, over its pairs' three
    measurements (matrix, re-test, loss re-test): 64 s then. The size stays 1 MiB: at
    256 KiB tbf's bucket makes healthy pairs read 1.3-1.6 Gbit/s, jagged enough to flag one."""
    with faulted(
        shared.get(hosts=4, link_bps=10**9), {"host2": {"rate_bps": 50 * MBIT}}
    ) as cluster:
        record, doc = judged_matrix(lambda: matrix.run_matrix(cluster, store, layer="tcp"))
    assert record["status"] == "ok", record["error"]
    bw = doc["bandwidth_mbps"]
    assert [bw[i][i] for i in range(4)] == [None] * 4
    assert all(bw[2][j] < 55 for j in (0, 1, 3)), bw
    flagged = doc["flagged"]
    # host2 and nothing else; its bandwidth always, its latency too when a slow link's
    # serialisation lifts it past twice the others' (a true finding, not a false one)
    assert all(f.get("host") == "host2" for f in flagged), flagged
    assert flagged[0]["figure"] == "bandwidth_mbps" and "host2" in flagged[0]["reason"]
    assert {f["figure"] for f in flagged} <= {"bandwidth_mbps", "latency_us"}, flagged
    assert store.get(record["id"])["figures"]["flagged"] == flagged
    pairs = {(s["host_a"], s["host_b"]) for s in record["samples"] if not s["retest"]}
    assert len(pairs) == 6  # every pair measured once in the rounds
    # both ends' TCP counters, for every pair (a count, not necessarily 0 on a shaped link)
    rtx = doc["retransmissions"]
    assert all(isinstance(rtx[i][j], int) for i in range(4) for j in range(4) if i != j), rtx


@pytest.mark.root
def test_matrix_judges_a_slower_nominal_link_against_its_own_rate(make_vcluster, store):
    """Three hosts, host2's nominal link 100 Mbit among 1 Gbit ones (`vcluster up
    --host-link host2=100mbit`), nothing wrong: judged against the 1 Gbit hosts' links,
    host2 was named ("suspect host2's NIC"); against its own rate, nothing is."""
    cluster = make_vcluster(hosts=3, link_bps=10**9, host_links={"host2": 100 * MBIT})
    record = matrix.run_matrix(cluster, store, layer="tcp")
    assert record["status"] == "ok", record["error"]
    doc = matrix_output.matrix_json(record)
    bw = doc["bandwidth_mbps"]
    assert all(bw[2][j] < 101 for j in (0, 1)) and bw[0][1] > 300, bw  # the rates did differ
    assert doc["flagged"] == [], doc["flagged"]
    # nor held back only because the wire was late: no note of a host2 bandwidth finding
    assert not any("host2: bandwidth" in n for n in doc["notes"]), doc["notes"]


@pytest.mark.root
def test_unreachable_host_is_a_user_error_in_bounded_time(make_vcluster, tmp_path):
    cluster = make_vcluster(hosts=2, link_bps=10**9)
    netns.run("ip", "-n", cluster.host("host1").namespace, "link", "set", "eth0", "down")
    start = time.monotonic()
    out = cli(
        "net",
        "pingpong",
        "--cluster",
        cluster.name,
        "--between",
        "host0,host1",
        "--max-size",
        "4M",
        "--db",
        str(tmp_path / "r.db"),
        timeout=120,
    )
    assert time.monotonic() - start < 60
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "host1 is unreachable from host0" in lines[0], out.stderr


@pytest.mark.root
@pytest.mark.skipif(
    not (kernels.build_dir() / "serial" / "bin" / pingpong.PVM_KERNEL).is_file(),
    reason="ct-pvm-pingpong not built (needs pvm-dev)",
)
def test_pvm_pingpong_across_two_virtual_hosts_leaves_no_daemon(shared, store):
    cluster = shared.get(hosts=2)
    record = pingpong.run_pingpong(
        cluster, store, pingpong.PingpongSpec("pvm", "host0", "host1", max_size=1 << 20)
    )
    assert record["status"] == "ok", record["error"]
    assert record["kernel"] == pingpong.PVM_KERNEL and record["verification"] == "passed"
    assert record["figures"]["latency_us"] > 0 and record["figures"]["bandwidth_mbps"] > 0
    faulty = pingpong.PingpongSpec(
        "pvm", "host0", "host1", max_size=64 << 10, extra_args=("--inject-fault",)
    )
    failed = pingpong.run_pingpong(cluster, store, faulty)
    assert (failed["status"], failed["verification"]) == ("failed", "failed")
    for host in ("host0", "host1"):
        assert not _pids_in_netns(cluster.host(host).namespace, "pvmd"), "a pvmd was left running"
    # each machine's work directory, named in its pvmd's command, is gone; only these two are
    # checked: another run on this machine (a second clone's suite, make demo) may hold its own
    workdirs = {
        Path(found)
        for r in (record, failed)
        for argv in r["meta"]["commands"]
        for found in re.findall(r"/tmp/clustertune-pvm-[^/\s'\"]+", " ".join(argv))
    }
    assert len(workdirs) == 2, workdirs
    assert not [d for d in workdirs if d.exists()]


def _pids_in_netns(namespace: str, needle: str) -> list[int]:
    target = os.stat(f"/run/netns/{namespace}").st_ino
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or (entry / "ns/net").stat().st_ino != target:
                continue
            if needle in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


@pytest.mark.root
def test_peer_killed_mid_sweep_keeps_the_points(shared, store):
    cluster = shared.get(hosts=2, link_bps=100 * MBIT)
    namespace = cluster.host("host1").namespace
    killed: list[int] = []

    def kill_server_after_some_points() -> None:
        time.sleep(3.0)
        for pid in _pids_in_netns(namespace, "ct-tcp-pingpong --server"):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    killer = threading.Thread(target=kill_server_after_some_points)
    killer.start()
    spec = pingpong.PingpongSpec("tcp", "host0", "host1", max_size=8 << 20)
    record = pingpong.run_pingpong(cluster, store, spec)
    killer.join()
    assert killed, "the server was not found to kill"
    stored = store.get(record["id"])
    assert stored["status"] == "incomplete", stored["error"]
    assert stored["samples"] and stored["samples"][-1]["size"] < 8 << 20
    assert "latency_us" in stored["figures"]
    assert "closed by peer" in stored["error"] or "reset" in stored["error"]


@pytest.mark.root
def test_corrupted_payload_is_stored_failed_by_pingpong_and_matrix(shared, store, monkeypatch):
    """A run whose payload check failed is failed, whatever it measured, however it ran."""
    cluster = shared.get(hosts=2)  # unshaped: no bandwidth floor on the sizes
    spec = pingpong.PingpongSpec(
        "mpi", "host0", "host1", max_size=64 << 10, extra_args=("--inject-fault",)
    )
    record = store.get(pingpong.run_pingpong(cluster, store, spec)["id"])
    assert (record["status"], record["verification"]) == ("failed", "failed")
    assert record["error"].startswith("verification failed")

    def faulty_job(**kw):  # the matrix's all-pairs job, with rank 1 corrupting its data
        return Job(**{**kw, "args": [*kw["args"], "--inject-fault"]})

    monkeypatch.setattr(runner, "Job", faulty_job)
    record = store.get(matrix.run_matrix(cluster, store, layer="mpi", size=64 << 10)["id"])
    assert (record["status"], record["verification"]) == ("failed", "failed")
    assert record["error"].startswith("verification failed")


@pytest.mark.parametrize(
    "broken, left_out, wording",
    [
        ({"h2"}, ["h2"], "no TCP connection with h0, h1, h3, left out of the matrix"),
        ({"h0"}, ["h0"], "suspect h0's NIC or cable, or h0 is down"),  # the first host too
        (
            {"h1", "h3"},
            ["h3", "h1"],
            "no TCP connection with h0, h2, h3, left out of the "
            "matrix — suspect h1's NIC or cable, or h1 is down",
        ),
        (
            {("h1", "h3")},
            ["h3"],
            "no TCP connection with h1, left out of the matrix — "
            "suspect the route between them (h3 reaches the other hosts)",
        ),
    ],
)
def test_reachability_leaves_out_what_cannot_be_reached(monkeypatch, broken, left_out, wording):
    """A dead host fails its check with every other host and is left out, named; of a pair
    that fails while both reach the others (a cable), the later host is left out.
    ``wording`` is looked for in the last flag."""
    checked = []

    def check(launcher, a, b):
        checked.append({a, b})
        if {a, b} & broken or (a, b) in broken or (b, a) in broken:
            raise UserError(f"{b} is unreachable from {a}: no route")

    monkeypatch.setattr(reach, "reachable", check)
    hosts = ["h0", "h1", "h2", "h3"]
    live, flags = reach.reachability(None, hosts)
    once = sorted(map(sorted, combinations(hosts, 2)))
    failed = [p for p in once if set(p) & broken or tuple(p) in broken or tuple(p[::-1]) in broken]
    assert sorted(map(sorted, checked)) == sorted(once + failed)  # a failed check is repeated
    assert live == [h for h in hosts if h not in left_out]
    assert [f["host"] for f in flags] == left_out and wording in flags[-1]["reason"]
    assert all("no route" in f["reason"] for f in flags)


@pytest.mark.parametrize(
    "flaky, flagged",
    [
        ({"h2"}, [("h2", None)]),  # h2's link was down during the first checks
        ({("h1", "h3")}, [(None, ["h1", "h3"])]),
    ],  # one cable
)
def test_reachability_names_a_link_that_fails_then_passes_and_leaves_nobody_out(
    monkeypatch, flaky, flagged
):
    seen = Counter()

    def check(launcher, a, b):
        seen[a, b] += 1
        if seen[a, b] == 1 and ({a, b} & flaky or {(a, b), (b, a)} & flaky):
            raise UserError(f"{b} is unreachable from {a}: no route")

    monkeypatch.setattr(reach, "reachable", check)
    live, flags = reach.reachability(None, ["h0", "h1", "h2", "h3"])
    assert live == ["h0", "h1", "h2", "h3"]
    assert [(f.get("host"), f.get("pair") and sorted(f["pair"])) for f in flags] == flagged
    assert all(f["figure"] == "flapping" and "then passed" in f["reason"] for f in flags)


def test_a_host_whose_pairs_fail_after_the_check_is_named_unstable():
    measured = [{"pair": ["h1", "h0"]}, {"pair": ["h0", "h3"]}, {"pair": ["h1", "h3"]}]
    flags = reach.unstable(["h0", "h1", "h2", "h3"], measured)
    assert [f["host"] for f in flags] == ["h2"] and "h0, h1, h3" in flags[0]["reason"]
    assert (
        reach.unstable(["h0", "h1", "h2"], [{"pair": ["h0", "h1"]}, {"pair": ["h0", "h2"]}]) == []
    )


def test_reachability_of_two_hosts_that_cannot_talk_is_a_user_error(monkeypatch):
    def check(launcher, a, b):
        raise UserError(f"{b} is unreachable from {a}: no route")

    monkeypatch.setattr(reach, "reachable", check)
    with pytest.raises(UserError, match="no two of h0, h1 reach each other over TCP: h1 is"):
        reach.reachability(None, ["h0", "h1"])


@pytest.mark.root
def test_mpi_matrix_leaves_an_unreachable_host_out_in_bounded_time(make_vcluster, tmp_path):
    """One host's link down: the MPI matrix checks every pair over TCP first (a failed check
    takes ~4 s, and is repeated), measures the other hosts and names the dead one, in under
    40 s on each MPI (~15 s at load 8; 30 s each before the check's bound was cut). Without the check MPICH's job waited for its whole timeout (181 s) and OpenMPI's
    failed at once, naming no host."""
    cluster = make_vcluster(hosts=3, link_bps=10**9)
    netns.run("ip", "-n", cluster.host("host2").namespace, "link", "set", "eth0", "down")
    for mpi in ("openmpi", "mpich"):
        start = time.monotonic()
        out = cli(
            "net",
            "matrix",
            "--cluster",
            cluster.name,
            "--layer",
            "mpi",
            "--mpi",
            mpi,
            "--json",
            "--db",
            str(tmp_path / "r.db"),
            timeout=180,
        )
        assert time.monotonic() - start < 40, mpi
        assert out.returncode == 1, out.stderr
        doc = json.loads(out.stdout)
        # the error leads with host2, unless the live hosts' job also had a problem of its
        # own (CI once saw its launcher exit 1 after the pair was measured)
        assert doc["status"] == "incomplete", doc
        assert "host2: no TCP connection with host0, host1, left out" in doc["error"], doc
        assert [f.get("host") for f in doc["flagged"] if f["figure"] == "reachable"] == ["host2"], (
            doc["flagged"]
        )
        assert "left out of the matrix" in doc["flagged"][0]["reason"]
        bw = doc["bandwidth_mbps"]
        assert bw[0][1] > 0 and bw[0][2] is None and bw[1][2] is None, bw
        assert "not measured: host0-host2, host1-host2" in doc["notes"]


def test_retransmissions_count_both_ends_and_fill_a_symmetric_grid():
    detail = {"tcp_info": {"total_retrans": 3}, "server_tcp_info": {"total_retrans": 4}}
    assert pingpong.both_ends(detail, "total_retrans") == 7
    assert pingpong.both_ends({"server_tcp_info": None}, "total_retrans") is None  # old server
    detail["tcp_info"]["dsack_dups"] = 2  # two were resent though they had arrived
    assert counters.lost_and_resent(detail) == 5 and counters.lost_and_resent({}) is None
    grid = counters.retransmission_grid(
        ["a", "b", "c"],
        [{"pair": ["a", "c"], "retransmissions": 5}, {"pair": ["b", "a"], "retransmissions": 0}],
    )
    assert grid == [[None, 0, 5], [0, None, None], [5, None, None]]


def test_each_pair_runs_one_byte_a_mid_size_sweep_and_the_bandwidth_size():
    one_byte, top = schedule.Sweep(1, 1), schedule.Sweep(1 << 20, 1 << 20)
    assert schedule.sweeps(1 << 20) == [
        one_byte,
        (1024, 256 * 1024, schedule.SWEEP_ARGS, None),
        top,
    ]
    assert schedule.sweeps(64 * 1024)[1][:2] == (1024, 32 * 1024)  # below the bandwidth size
    assert schedule.sweeps(2048) == [one_byte, (2048, 2048, (), None)]  # no room for a sweep
    # a re-test on a real cluster: the one byte twice (the scheduler places the ends
    # afresh each time), no sweep; on shared CPUs see test_network_diagnosis.py
    assert schedule.sweeps(1 << 20, mid_sizes=False, retest=True) == [one_byte, one_byte, top]
    # a run's TCP counters sit on its first sample: a sweep's are counted once
    samples = [{"size": 1, "retrans": 1, "data_segs": 10}, {"size": 1024, "sweep": True,
               "retrans": 3, "data_segs": 50}, {"size": 2048, "sweep": True}]  # fmt: skip
    assert counters.tcp_counters(samples) == {"retransmissions": 4, "data_segments": 60}
    # latency and bandwidth come from the two sizes, the shape from the sweep
    samples += [{"size": 4096, "sweep": True, "t_min_s": 1e-4}, {"size": 1 << 20, "t_min_s": 0.01}]
    samples[0]["t_min_s"], samples[1]["t_min_s"], samples[2]["t_min_s"] = 5e-5, 1e-5, 3e-5
    m = matrix.measurement("a", "b", samples)
    assert m["latency_us"] == pytest.approx(50) and m["bandwidth_mbps"] == pytest.approx(
        838.9, abs=0.1
    )
    curves = matrix.sweep_curves({("b", "a"): samples})
    assert list(curves) == [("a", "b")] and list(curves["a", "b"].size) == [1024, 2048, 4096]


# DELAY: 2 ms, +1 ms one way. At 500 µs the pacer holding the delayed packets wakes late
# from its long sleeps; inside fresh-clone suites the wire's p99 lateness reached 229-721 µs
# and the late-wire rule let it explain +250 µs: "not judged" in 3 matrices of 3 (host
# delay, a6ec2d5). The fault is the same kind; its size is beyond what the wire can explain.
LOSS, DELAY = {"loss": 0.001}, {"delay_us": 2000}
FAULTS = {  # one fault on four 1 Gbit hosts: on host2, or on the link host1-host2 only
    "host loss 0.1%": ({"host_faults": {"host2": LOSS}}, ("host2", None, "retransmissions")),
    "host rate 100 Mbit": (
        {"host_faults": {"host2": {"rate_bps": 10**8}}}, ("host2", None, "bandwidth_mbps")
    ),
    "host delay 2 ms": ({"host_faults": {"host2": DELAY}}, ("host2", None, "latency_us")),
    # a bad route between two hosts: that pair is named, neither host
    "link loss 0.1%": (
        {"link_faults": {"host2-host1": LOSS}}, (None, ["host1", "host2"], "retransmissions")
    ),
    "link delay 2 ms": (
        {"link_faults": {"host2-host1": DELAY}}, (None, ["host1", "host2"], "latency_us")
    ),
}  # fmt: skip


@pytest.mark.root
@pytest.mark.parametrize("kind", FAULTS)
def test_matrix_names_the_faulty_host_or_link_and_no_other(shared, store, kind):
    faults, named = FAULTS[kind]
    with faulted(shared.get(hosts=4, link_bps=10**9), **faults) as cluster:
        _, doc = judged_matrix(lambda: matrix.run_matrix(cluster, store, layer="tcp"))
    flagged = [(f.get("host"), f.get("pair"), f["figure"]) for f in doc["flagged"]]
    evidence = {k: doc[k] for k in ("flagged", "not_judged", "wire_late_us", "latency_us", "notes")}
    assert named in flagged, evidence
    # nothing else is blamed; a link's faults go through a daemon hop of their own, which
    # adds ~10 us, so an idle machine may also flag that pair's latency
    assert {(h, tuple(p or ())) for h, p, _ in flagged} == {(named[0], tuple(named[1] or ()))}


@pytest.mark.root
def test_one_packet_as_late_as_tcps_timeout_does_not_hide_a_lossy_host(shared, store, monkeypatch):
    """Review F21: host2 losing 1 % retransmits hundreds of segments in its links' loss
    re-test; the pacers late (p99 850 µs) with one packet released 300 ms late explain
    one retransmission, not those: host2's loss stands, whatever else is withheld.
    Three hosts of the shared four."""
    monkeypatch.setattr(matrix, "worst_late_us", lambda b, a: {"p99_us": 850.0, "max_us": 3e5})
    monkeypatch.setattr(matrix, "rto_late_packets", lambda before, after: 1)
    hosts = ["host0", "host1", "host2"]
    with faulted(shared.get(hosts=4, link_bps=10**9), {"host2": {"loss": 0.01}}) as cluster:
        record = matrix.run_matrix(cluster, store, layer="tcp", hosts=hosts)
    doc = matrix_output.matrix_json(record)
    lossy = [f for f in doc["flagged"] if f["figure"] == "retransmissions"]
    assert [f.get("host") for f in lossy] == ["host2"], doc["flagged"]
    assert lossy[0]["value"] > 10, lossy
    assert not any(n.startswith("withheld") and "retransmissions" in n for n in doc["notes"])


@pytest.mark.root
def test_matrix_names_a_flapping_host_and_no_other(shared, store):
    """host2's port down 300 ms of every second: host2 is named flapping, on its NIC's
    carrier counter, and nothing else; what its links met (a check that failed, pairs that
    retransmitted or could not be measured) are notes. Its traffic alone missed it once in
    two idle suites: the matrix's runs can fall between the down windows. A connect into a
    down window sends a new SYN within a second (it waited out the client's 10 s: the
    kernel's own resends, 1 s and 3 s later, met down windows too)."""
    flap = {"flap": {"down_ms": 300, "period_ms": 1000}}
    with faulted(shared.get(hosts=4, link_bps=10**9), {"host2": flap}) as cluster:
        record = matrix.run_matrix(cluster, store, layer="tcp")
    doc = matrix_output.matrix_json(record)
    flagged = doc["flagged"]
    assert [(f.get("host"), f["figure"]) for f in flagged] == [("host2", "flapping")], flagged
    assert "carrier changes: eth0" in flagged[0]["reason"], flagged
    assert flagged[0]["value"] >= 4  # two downs and ups at least: the matrix takes > 2 s
    # its counter had moved by the end of the first round: none of its links is measured
    # again (each re-test waited out the flap's timeouts: 20-35 s of a 45-65 s matrix)
    retested = {(s["host_a"], s["host_b"]) for s in record["samples"] if s["retest"]}
    assert not [p for p in retested if "host2" in p], retested


class FakeHostLauncher:
    """run_on_host answers with each host's canned ``sh`` output (None: the host is gone)."""

    def __init__(self, outputs: dict, interface: str | None = None):
        self.outputs, self.interface = outputs, interface

    def run_on_host(self, host, argv, timeout):
        out = self.outputs[host]
        return Completed(argv, 255 if out is None else 0, out or "", "", 0.0)


def test_carrier_counters_of_the_traffic_nic_name_the_host_whose_link_went_down():
    before = {
        "h0": "eth0 2 -\nlo 0 -\n",
        "h1": "eth0 2 -\nlo 0 -\n",
        "h2": "eth0 2 -\nlo 0 -\n",
        "h3": None,  # unreadable: no evidence either way
    }
    after = {**before, "h1": "eth0 8 -\nlo 0 -\n", "h3": "eth0 9 -\n"}
    read = [counters.carrier_changes(FakeHostLauncher(o, "eth0"), list(o)) for o in (before, after)]
    assert read[0] == {"h0": {"eth0": 2}, "h1": {"eth0": 2}, "h2": {"eth0": 2}}
    flags = counters.carrier_flags(*read)
    assert [(f["host"], f["figure"], f["value"]) for f in flags] == [("h1", "flapping", 6)]
    assert "carrier changes: eth0 6" in flags[0]["reason"]
    # without an interface named, only devices count: a bridge or veth coming and going
    # on a real host is not its link
    real = FakeHostLauncher({"h0": "docker0 7 -\neno1 3 nic\nib0 1 nic\n"})
    assert counters.carrier_changes(real, ["h0"]) == {"h0": {"eno1": 3, "ib0": 1}}
    assert counters.carrier_flags(read[0], read[0]) == []


@pytest.mark.root
def test_a_healthy_cluster_comes_out_clean_run_after_run(shared, store):
    """Three matrices at 1 Gbit, two at 100 Mbit (~8 s each there, twice a 1 Gbit one);
    the 1 Gbit cluster is the one the fault tests above set and cleared their faults on:
    clearing leaves it healthy. A regression guard, not the false-alarm rate: that is
    bench/network_diagnosis.py's (0 of 20 + 0 of 20 idle). The rules are read relative to
    each cluster's own links and nominal rate, so a rule gone wrong flags healthy runs at
    both rates: one that flags half the runs passes 5 runs 1 time in 32, as it passed
    5 + 5 1 time in 1024; test_network_diagnosis.py adds 3 healthy 3-host runs per layer."""
    for link, runs in ((10**9, 3), (10**8, 2)):
        cluster = shared.get(hosts=4, link_bps=link)
        for _ in range(runs):
            doc = matrix_output.matrix_json(matrix.run_matrix(cluster, store, layer="tcp"))
            assert doc["status"] == "ok" and doc["flagged"] == [], doc["flagged"]


def test_the_mpi_retest_pins_each_rank_and_swaps_their_cpus(monkeypatch):
    """On hosts that share CPUs the MPI matrix re-tests a pair as the TCP one does: under
    each placement, the changed one first (once: a job measures both sizes); one CPU per
    rank (busy-polling ranks on one CPU pay a scheduler tick a message), through the
    virtual cluster's agent."""
    jobs = []

    def job(run, hosts, mpi, size, timeout, tag):
        pins = {k: v for k, v in run.env.items() if k.startswith(vcluster.CPU_ENV_PREFIX)}
        jobs.append((tuple(hosts), pins, tag))
        return {tuple(hosts): [{"size": 1, "t_min_s": 1e-5}, {"size": size, "t_min_s": 1e-3}]}

    monkeypatch.setattr(matrix, "mpi_round_robin", job)
    monkeypatch.setattr(schedule.os, "sched_getaffinity", lambda pid: {0, 1})
    cluster = fake_vcluster(10**9, hosts=3)
    places = schedule.placements(cluster, ["host0", "host1", "host2"], apart=True)
    assert places == [("0", "1"), ("1", "0")]
    run = SimpleNamespace(env={"OMPI_MCA_btl": "tcp,self"})
    found = matrix.mpi_retest(run, [("host0", "host2")], "openmpi", 1 << 20, None, places)
    cpu = vcluster.CPU_ENV_PREFIX
    swapped, first = (
        {cpu + "host0": "1", cpu + "host2": "0"},
        {cpu + "host0": "0", cpu + "host2": "1"},
    )
    assert [pins for _, pins, _ in jobs] == [swapped, first]
    assert {(hosts, tag["retest"]) for hosts, _, tag in jobs} == {(("host0", "host2"), True)}
    assert run.env == {"OMPI_MCA_btl": "tcp,self"}  # the pins are the re-test's alone
    assert len(found["host0", "host2"]) == 4  # both jobs' points: the latency keeps the best
    # a real cluster: the scheduler places the ranks, one job per pair as before
    jobs.clear()
    matrix.mpi_retest(run, [("host0", "host2")], "openmpi", 1 << 20, None, [None])
    assert [pins for _, pins, _ in jobs] == [{}]


@pytest.mark.root
def test_mpi_matrix_on_shared_cpus_is_clean_and_still_names_a_slow_host(shared, store):
    """Issue 19 item 3 for the MPI matrix: on a virtual cluster a latency suspect is
    re-tested with its ranks pinned one CPU each, then swapped, against control links:
    no healthy link is flagged for its latency, and host2 delayed (DELAY) is named by the
    median rule, on four hosts as the TCP matrix's fault cases (three hosts, where host2's
    two links are the median, go through the per-host rule: its own test). Above the
    product's load rule (``section.starved``: busy-polling ranks starve) the bandwidths
    are not judged (a healthy pair read 714 of 941 Mbit/s at load 22), and neither is
    whether host2 is found; no latency flag may name a healthy link at any load."""
    cluster = shared.get(hosts=4, link_bps=10**9)

    def mpi_matrix(cluster) -> tuple[dict, bool]:
        record = matrix.run_matrix(cluster, store, layer="mpi")
        return matrix_output.matrix_json(record), section.starved(record) is None

    doc, healthy_judged = mpi_matrix(cluster)
    assert doc["status"] == "ok", doc["error"]
    assert not [f for f in doc["flagged"] if f["figure"] == "latency_us"], doc["flagged"]
    assert not healthy_judged or doc["flagged"] == [], doc["flagged"]
    with faulted(cluster, {"host2": DELAY}) as slow:
        doc, judged = mpi_matrix(slow)
        if judged and doc["not_judged"] is not None:  # an honest "the wire was late"
            doc, judged = mpi_matrix(slow)
    latency = [f for f in doc["flagged"] if f["figure"] == "latency_us"]
    assert all(f.get("host") == "host2" for f in latency), doc["flagged"]
    if not (healthy_judged and judged):  # a green run must not hide what was not checked
        pytest.skip("healthy-clean or host2-named not judged: the MPI ranks starved")
    # host2 alone; by its latency, or its bandwidth (the ping-pong pays the delay)
    flagged = {(f.get("host"), f["figure"]) for f in doc["flagged"]}
    assert flagged and {h for h, _ in flagged} == {"host2"}, (doc["flagged"], doc["notes"])
    assert {fig for _, fig in flagged} <= {"latency_us", "bandwidth_mbps"}, doc["flagged"]
