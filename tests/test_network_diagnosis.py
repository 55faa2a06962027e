"""Diagnoses of the network level: MPI overhead out of line with its like-for-like TCP
baseline (report and ``net pingpong``), and a link slow in one direction (``net matrix``'s
one-way streams)."""

import importlib.util
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from netclusters import SharedClusters, faulted, judged_matrix

from clustertune import vcluster
from clustertune.cluster import Cluster, Host, Site, load_cluster_file
from clustertune.errors import ConfigError
from clustertune.levels.network import cli, matrix, matrix_output, pingpong, schedule, section
from clustertune.levels.network.diagnosis import asymmetry

SIZES = [s for p in range(23) for s in (2**p - 3, 2**p, 2**p + 3) if s >= 1]


def record(run_id, layer, latency_us, mbps, *, mpi=None, wait=None, env=None, floor_us=None):
    """A stored ping-pong record: t = L + 8 s / B, and one 1-byte point at ``floor_us``
    (a loaded run's one fast small message) if given."""
    samples = [{"size": s, "t_min_s": latency_us * 1e-6 + 8 * s / (mbps * 1e6)} for s in SIZES]
    if floor_us is not None:
        samples[0]["t_min_s"] = floor_us * 1e-6
    params = {
        "command": "pingpong",
        "layer": layer,
        "mode": "pingpong",
        "mpi": mpi,
        "between": ["host0", "host1"],
        "sockbuf": None,
        "nagle": False,
        "wait": wait,
    }
    return {
        "id": run_id,
        "status": "ok",
        "error": None,
        "samples": samples,
        "params": params,
        "meta": {
            "cluster": {"name": "lab", "link_bps": {"host0": 10**9, "host1": 10**9}},
            "hosts": ["host0", "host1"],
            "env": env or {},
        },
        "figures": pingpong.derive_for(0)(samples, None),
    }


TCP_POLL = record(1, "tcp", 6.0, 994.0, wait="poll")
TCP_BLOCK = record(2, "tcp", 30.0, 1009.0, wait="block")


@pytest.mark.parametrize(
    "latency_us, mbps",
    [
        (6.0 * 1.8, 994.0 * 0.92),  # seeds/002: 1.8x, 8 %
        (6.0 * 3.3, 994.0),  # healthy OpenMPI's worst ratio here (docs/network.md)
        (6.0 * 1.1, 994.0 * 0.79),  # MPICH at load 5: 782.9 of 989.2 Mbit/s
        (6.0 * 4.9, 994.0 * 0.61),  # just inside both thresholds
    ],
)
def test_healthy_mpi_overheads_are_not_flagged(latency_us, mbps):
    mpi = record(3, "mpi", latency_us, mbps, mpi="openmpi")
    html = section._overhead([TCP_POLL, TCP_BLOCK, mpi])
    assert "MPI openmpi" in html and "Out of line" not in html
    summary, flags = section.overhead_check([mpi], [TCP_POLL, TCP_BLOCK, mpi])
    assert flags == [] and summary.endswith(": in line"), summary


def test_tiny_socket_buffers_are_flagged_naming_pair_mpi_figures_and_ratio():
    # OpenMPI with OMPI_MCA_btl_tcp_sndbuf/rcvbuf=4096 (docs/network.md), a default run
    # beside it: the misconfigured configuration is its own row, not hidden by the best run
    env = {"OMPI_MCA_btl_tcp_sndbuf": "4096", "OMPI_MCA_btl_tcp_rcvbuf": "4096"}
    tiny = record(4, "mpi", 16.0, 200.0, mpi="openmpi", env=env)
    default = record(3, "mpi", 16.0, 990.0, mpi="openmpi")
    html = section._overhead([TCP_POLL, TCP_BLOCK, default, tiny])
    out_of_line = html.split("Out of line:")[1].split("</ul>")[0]
    assert out_of_line.count("<li>") == 1, out_of_line
    assert (
        "MPI openmpi OMPI_MCA_btl_tcp_rcvbuf=4096 OMPI_MCA_btl_tcp_sndbuf=4096 on "
        "host0-host1 (lab, 1gbit): MPI overhead out of line with TCP (busy-poll): "
        "bandwidth 200.0 vs 993.8 Mbit/s, 0.20×, 80 % lost"
    ) in out_of_line
    # only the like-for-like baseline flags: against blocking TCP alone nothing is said
    assert "Out of line" not in section._overhead([TCP_BLOCK, tiny])
    summary, flags = section.overhead_check([tiny], [TCP_POLL, TCP_BLOCK, default, tiny])
    assert len(flags) == 1 and "80 % lost" in flags[0] and "in line" not in summary


def test_latency_is_judged_on_the_floor_of_each_side():
    # a loaded OpenMPI run: 201 µs plateau, one 19 µs message (measured at load 15)
    loaded = record(5, "mpi", 201.0, 990.0, mpi="openmpi", floor_us=19.0)
    tcp = record(1, "tcp", 11.9, 994.0, wait="poll", floor_us=9.3)
    assert section.overhead_check([loaded], [tcp])[1] == []
    row = section._overhead([tcp, loaded]).split("<tbody>")[1]
    assert "<td>16.89</td><td>2.04</td>" in row  # 201 / 11.9 figures, 19 / 9.3 floors
    slow = record(6, "mpi", 60.0, 990.0, mpi="mpich")  # every message 10x TCP's
    (flag,) = section.overhead_check([slow], [TCP_POLL])[1]
    assert "MPI mpich on host0-host1" in flag and "latency 60.0 vs 6.0 µs" in flag, flag
    assert "10.0×" in flag


def test_no_like_for_like_baseline_says_how_to_make_one():
    mpi = record(3, "mpi", 16.0, 990.0, mpi="openmpi")
    summary, flags = section.overhead_check([mpi], [TCP_BLOCK, mpi])
    assert flags == [] and "no TCP poll run on host0-host1 (lab)" in summary
    assert "--between host0,host1 --layer tcp --wait poll" in summary
    assert section.overhead_check([TCP_POLL], [TCP_POLL]) is None  # TCP has no baseline
    failed = {**mpi, "status": "failed"}
    assert section.overhead_check([failed], [TCP_POLL]) is None


class FakeStore:
    def __init__(self, records):
        self.records = records

    def list(self, level):
        return self.records


LAB = ["n1", "n2", "n3", "n4"]
TWO_CPUS = ("0", "0"), ("1", "1")


def lab(launcher="hostfile", shared_cpus=False):
    hosts = tuple(Host(h, f"192.0.2.{i + 1}", 2, "site0") for i, h in enumerate(LAB))
    return Cluster("lab", hosts, (Site("site0", launcher),), shared_cpus=shared_cpus)


VIRTUAL = lab("vcluster")


@pytest.mark.parametrize("retest_mbps, flagged", [(990.0, False), (210.0, True)])
def test_an_out_of_line_run_is_re_tested_before_blaming(monkeypatch, retest_mbps, flagged):
    slow = record(3, "mpi", 16.0, 200.0, mpi="openmpi")
    retest = record(4, "mpi", 16.0, retest_mbps, mpi="openmpi")
    store = FakeStore([TCP_POLL, slow])
    calls = []

    def run_pingpong(cluster, store_, spec):
        calls.append(spec)
        store.records.append(retest)
        return retest

    monkeypatch.setattr(pingpong, "run_pingpong", run_pingpong)
    monkeypatch.setattr(cli.os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    over = cli._over_tcp(VIRTUAL, store, "spec", slow)
    assert calls == ["spec"] and over["runs"] == [3, 4] and over["retest"] == [retest]
    assert bool(over["flags"]) is flagged, over
    assert "best of run(s) 3, 4" in over["summary"]
    if not flagged:  # a run in line at once is not re-tested
        calls.clear()
        over = cli._over_tcp(VIRTUAL, FakeStore([TCP_POLL, retest]), "spec", retest)
        assert calls == [] and over["runs"] == [4] and over["flags"] == []


def test_on_a_starved_machine_a_virtual_cluster_is_not_judged(monkeypatch):
    slow = record(3, "mpi", 16.0, 264.0, mpi="mpich")  # healthy MPICH at load 25
    monkeypatch.setattr(cli.os, "getloadavg", lambda: (25.0, 20.0, 15.0))
    monkeypatch.setattr(cli.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(pingpong, "run_pingpong", lambda *a: pytest.fail("re-tested"))
    over = cli._over_tcp(VIRTUAL, FakeStore([TCP_POLL, slow]), "spec", slow)
    assert over["flags"] == [] and over["runs"] == [3]
    assert "73.4 %" in over["summary"] and "not judged: load 25.0 on the 2 CPUs" in over["summary"]
    # hosts of their own (ssh, a batch system) are not starved by this machine's load
    real = lab("hostfile")
    monkeypatch.setattr(pingpong, "run_pingpong", lambda *a: slow)
    over = cli._over_tcp(real, FakeStore([TCP_POLL, slow]), "spec", slow)
    assert len(over["flags"]) == 1 and "73 % lost" in over["flags"][0]


def test_net_pingpong_prints_the_flag_under_the_mpi_run_and_puts_it_in_its_json(monkeypatch):
    env = {"OMPI_MCA_btl_tcp_sndbuf": "4096", "OMPI_MCA_btl_tcp_rcvbuf": "4096"}
    runs = iter(
        [
            record(3, "mpi", 16.0, 91.0, mpi="openmpi", env=env),
            record(4, "mpi", 16.0, 81.0, mpi="openmpi", env=env),
        ]
    )
    store = FakeStore([TCP_POLL])

    def run_pingpong(cluster, store_, spec):
        store.records.append(r := next(runs))
        return r

    monkeypatch.setattr(cli, "cluster_of", lambda args: VIRTUAL)
    monkeypatch.setattr(cli, "open_store", lambda args: store)
    monkeypatch.setattr(pingpong, "parse_between", lambda cluster, text: ("host0", "host1"))
    monkeypatch.setattr(pingpong, "run_pingpongs", lambda c, s, spec, b: [run_pingpong(c, s, spec)])
    monkeypatch.setattr(pingpong, "run_pingpong", run_pingpong)
    monkeypatch.setattr(cli.os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    args = SimpleNamespace(
        between=None,
        layer="mpi",
        mode="pingpong",
        mpi="openmpi",
        max_size="4M",
        nagle=False,
        timeout=None,
        wait="block",
        sockbuf=None,
    )
    out = cli.cmd_pingpong(args)
    lines = out.text.splitlines()
    assert lines[0].startswith("run 3: mpi (openmpi)") and "run 4: mpi (openmpi)" in out.text
    assert lines[-2].startswith("  over TCP poll    latency floor ")
    assert "bandwidth loss 90.8 % (best of run(s) 3, 4 / of 1 TCP poll run(s))" in lines[-2]
    assert lines[-1].startswith("  FLAG: MPI openmpi OMPI_MCA_btl_tcp_rcvbuf=4096")
    assert out.status == 0 and out.payload["run_id"] == 3
    assert out.payload["over_tcp"]["runs"] == [3, 4] and len(out.payload["over_tcp"]["flags"]) == 1


# --------------------------------------------------------------------------- asymmetry

HOSTS = ["host0", "host1", "host2", "host3"]


def streams(rate, hosts=HOSTS):
    """The matrix's measurements with one-way streams only: rate(src, dst) in Mbit/s."""
    return [
        {"pair": [a, b], "one_way_mbps": {f"{a}>{b}": rate(a, b), f"{b}>{a}": rate(b, a)}}
        for i, a in enumerate(hosts)
        for b in hosts[i + 1 :]
    ]


def retest_with(rate):
    asked = []

    def remeasure(pairs):
        asked.append(sorted(pairs))
        return [m for m in streams(rate) if tuple(m["pair"]) in set(pairs)]

    return remeasure, asked


@pytest.mark.parametrize("end, side", [(0, "transmit"), (1, "receive")])
def test_a_host_slow_one_way_is_named_with_its_side(end, side):
    def rate(src, dst):  # host2's transmit (end 0) or receive (end 1) side at 100 Mbit
        return 96.0 if (src, dst)[end] == "host2" else 940.0

    remeasure, asked = retest_with(rate)
    (flag,) = asymmetry.diagnose_asymmetry(HOSTS, streams(rate), remeasure)
    assert flag["host"] == "host2" and flag["figure"] == "asymmetric", flag
    assert flag["reason"].startswith("host2: asymmetric: ")
    one = (
        "host2->host0 96.0, host0->host2 940.0"
        if end == 0
        else "host0->host2 96.0, host2->host0 940.0"
    )
    assert one + " Mbit/s" in flag["reason"]
    assert f"host2's {side} side is slow on 3 of its 3 links" in flag["reason"]
    assert asked == [[("host0", "host2"), ("host1", "host2"), ("host2", "host3")]]


def test_healthy_streams_and_a_slow_direction_that_does_not_repeat_flag_nothing():
    def noisy(src, dst):  # the worst healthy ratio seen at load 24: 0.62
        return 512.0 if (src, dst) == ("host1", "host3") else 823.0

    remeasure, asked = retest_with(noisy)
    assert asymmetry.diagnose_asymmetry(HOSTS, streams(noisy), remeasure) == [] and asked == []

    def once(src, dst):  # host1->host3 slow in the matrix only (a loaded moment)
        return 200.0 if (src, dst) == ("host1", "host3") else 900.0

    remeasure, asked = retest_with(lambda src, dst: 900.0)
    assert asymmetry.diagnose_asymmetry(HOSTS, streams(once), remeasure) == []
    assert asked == [[("host1", "host3")]]


def test_one_slow_direction_of_one_link_is_flagged_on_the_pair():
    def rate(src, dst):
        return 90.0 if (src, dst) == ("host3", "host1") else 900.0

    remeasure, _ = retest_with(rate)
    (flag,) = asymmetry.diagnose_asymmetry(HOSTS, streams(rate), remeasure)
    assert flag["pair"] == ["host1", "host3"]
    assert flag["reason"].startswith("asymmetric: host3->host1 90.0, host1->host3 900.0 Mbit/s")
    assert "host3's transmit or host1's receive side" in flag["reason"]


def test_one_way_grid_is_row_sending_to_column():
    grid = asymmetry.one_way_grid(
        ["h0", "h1"], [{"pair": ["h0", "h1"], "one_way_mbps": {"h0>h1": 1.0, "h1>h0": 2.0}}]
    )
    assert grid == [[None, 1.0], [2.0, None]]
    assert asymmetry.one_way_grid(["h0", "h1"], [{"pair": ["h0", "h1"]}]) is None  # MPI: none


@pytest.fixture(scope="module")
def shared():
    """Virtual clusters kept for this module (tests/netclusters.py)."""
    clusters = SharedClusters()
    yield clusters
    clusters.down()


@pytest.mark.root
def test_matrix_names_the_host_whose_one_direction_is_slow(shared, store):
    slow_tx = {"host2": {"tx_rate_bps": 10**8}}
    with faulted(shared.get(hosts=4, link_bps=10**9), slow_tx) as cluster:
        for side, faults in (("transmit", None), ("receive", ["tx-rate=off", "rx-rate=100mbit"])):
            if faults:
                vcluster.set_faults(cluster.name, "host2", faults)
            record, _ = judged_matrix(lambda: matrix.run_matrix(cluster, store, layer="tcp"))
            check_one_way_slow(record, side)


def check_one_way_slow(record: dict, side: str) -> None:
    """host2 named for its slow ``side``, and nobody else named."""
    doc = matrix_output.matrix_json(record)
    asym = [f for f in doc["flagged"] if f["figure"] == "asymmetric"]
    assert [f.get("host") for f in asym] == ["host2"], doc["flagged"]
    assert f"host2's {side} side is slow on 3 of its 3 links" in asym[0]["reason"]
    # the rest is host2's slow links, seen by the ping-pong: nothing on another host
    assert {f.get("host") for f in doc["flagged"]} == {"host2"}, doc["flagged"]
    grid = doc["one_way_mbps"]
    slow = [grid[2][j] if side == "transmit" else grid[j][2] for j in (0, 1, 3)]
    assert max(slow) < 110, grid


def test_a_pairs_streams_are_its_one_way_figures_not_its_bandwidth():
    samples = [{"size": 1, "t_min_s": 5e-5}, {"size": 1 << 20, "t_min_s": 0.01},
               {"size": 1 << 20, "t_min_s": 0.0084, "one_way": "a>b"},
               {"size": 1 << 20, "t_min_s": 0.084, "one_way": "b>a"}]  # fmt: skip
    m = matrix.measurement("a", "b", samples)
    assert m["bandwidth_mbps"] == pytest.approx(838.9, abs=0.1)  # the ping-pong's
    assert m["one_way_mbps"] == pytest.approx({"a>b": 998.6, "b>a": 99.9}, abs=0.1)
    assert "one_way_mbps" not in matrix.measurement("a", "b", samples[:2])


def test_a_retest_keeps_each_latency_runs_figure_beside_the_best():
    samples = [{"size": 1, "t_min_s": t} for t in (9e-5, 3.6e-5, 8e-5)]
    samples.append({"size": 1 << 20, "t_min_s": 0.01})
    m = matrix.measurement("a", "b", samples)
    best = matrix.measurement("a", "b", [samples[1], samples[3]])["latency_us"]
    assert m["latency_us"] == best and m["latency_runs_us"][1] == best
    assert m["latency_runs_us"][0] == pytest.approx(2.5 * best, rel=1e-3)
    assert "latency_runs_us" not in matrix.measurement("a", "b", samples[2:])  # one run


# --------------------------------------------------------------------------- shared CPUs


def test_where_hosts_share_cpus_every_pair_runs_on_the_same_cpu(monkeypatch):
    monkeypatch.setattr(schedule.os, "sched_getaffinity", lambda pid: {1, 0})
    assert schedule.placements(lab(shared_cpus=True), LAB) == list(TWO_CPUS)
    assert schedule.placements(lab("vcluster"), LAB) == list(TWO_CPUS)
    assert schedule.placements(lab(), LAB) == [None]  # a real cluster: today's rules
    monkeypatch.setattr(schedule.os, "sched_getaffinity", lambda pid: {0})
    assert schedule.placements(lab(shared_cpus=True), LAB) == [None]  # one CPU: nothing to place


def test_the_latency_runs_are_pinned_and_the_retest_changes_the_placement():
    def latency_cpus(runs):
        return [r.cpus for r in runs if r.lo == r.hi == schedule.LATENCY_SIZE]

    assert latency_cpus(schedule.sweeps(1 << 20, places=TWO_CPUS)) == [("0", "0")]
    again = schedule.sweeps(1 << 20, mid_sizes=False, retest=True, places=TWO_CPUS)
    assert latency_cpus(again) == [("1", "1"), ("0", "0")] * 2  # the changed one first
    assert [r.cpus for r in again if r.lo > 1] == [None]  # the bandwidth size: unpinned
    # a real cluster: one byte twice, wherever the scheduler puts the ends
    assert latency_cpus(schedule.sweeps(1 << 20, retest=True)) == [None, None]
    assert pingpong.pinned(["ct"], "1") == ["taskset", "-c", "1", "ct"]


def test_a_round_on_shared_cpus_runs_two_pairs_per_cpu_a_real_one_every_pair(monkeypatch):
    monkeypatch.setattr(schedule.os, "sched_getaffinity", lambda pid: {0, 1})
    pairs = [("n1", "n2"), ("n3", "n4")] * 4
    assert schedule.parallel_pairs(lab(shared_cpus=True), pairs) == 4
    assert schedule.parallel_pairs(lab(shared_cpus=True), pairs[:1]) == 1
    assert schedule.parallel_pairs(lab(), pairs) == 8


def test_on_shared_cpus_a_retest_runs_its_pairs_one_at_a_time(monkeypatch):
    """A healthy 32-host matrix's own parallel pairs drove the load to 14, some healthy
    mid-size curves dipped, and their shape re-test, run 4 pairs at once again, confirmed
    4 false `dips` flags (issue 19). On hosts that share CPUs every re-test (shape, loss,
    one-way, latency and bandwidth) runs one pair at a time; the first round keeps
    PAIRS_PER_CPU per CPU, and a real cluster runs a re-test's disjoint pairs at once."""
    running, seen, lock = set(), [], threading.Lock()

    def measure(run, a, b, runs, timeout, tag, streams):
        with lock:
            running.add((a, b))
            seen.append(len(running))
        time.sleep(0.01)
        with lock:
            running.remove((a, b))
        return [{"size": 1}]

    monkeypatch.setattr(matrix, "_tcp_pair", measure)
    monkeypatch.setattr(schedule.os, "sched_getaffinity", lambda pid: {0, 1})
    hosts = [f"n{i}" for i in range(8)]
    pairs = [p for r in schedule.rounds(hosts) for p in r]  # 4 disjoint pairs a round

    def most_at_once(launcher: str, retest: str | bool) -> int:
        cluster = Cluster(
            "lab", tuple(Host(h, None, 1, "s") for h in hosts), (Site("s", launcher),)
        )
        seen.clear()
        run = SimpleNamespace(cluster=cluster)
        assert sorted(matrix.tcp_pairs(run, pairs, [], 1.0, {"retest": retest})) == sorted(pairs)
        return max(seen)

    # matrix.retest's kinds, and True: net matrix's latency and bandwidth re-test
    for retest in ("shape", "loss", "one-way", True):
        assert most_at_once("vcluster", retest) == 1, retest
    assert most_at_once("vcluster", False) == 4  # the first round
    assert most_at_once("hostfile", "shape") == 4


def test_a_cluster_file_says_whether_its_hosts_share_cpus(tmp_path):
    path = tmp_path / "lab.toml"
    body = '[[hosts]]\nname = "n1"\naddress = "192.0.2.1"\n'
    path.write_text(body)
    assert not load_cluster_file(path, ["hostfile"]).shared_cpus
    path.write_text("shared_cpus = true\n" + body)
    assert load_cluster_file(path, ["hostfile"]).shared_cpus
    path.write_text('shared_cpus = "yes"\n' + body)
    with pytest.raises(ConfigError, match=r"lab.toml:1: shared_cpus: expected true or false"):
        load_cluster_file(path, ["hostfile"])


# --------------------------------------------------------------------------- three hosts


# host2's delay on three hosts: 2 ms (+1 ms one way). At 500 µs the pacer that holds
# host2's packets (host2@sw) wakes late from its long sleeps (p50 45 µs against the other
# pacers' 9-15 µs, idle); inside fresh-clone suites the wire's p99 lateness reached
# 229-721 µs, and the late-wire rule lets it explain host2's +250 µs: "not judged" in 3
# matrices of 3 (b53fe92). The host is the same; the finding is beyond the wire's lateness.
THREE_HOSTS_DELAY_US = 2000


@pytest.mark.root
@pytest.mark.parametrize("layer", ["tcp", "mpi"])
def test_of_three_hosts_a_slow_host_is_named_and_a_healthy_cluster_is_clean(shared, store, layer):
    """Issue 19: on three hosts a slow host's two links are two of the three, the median
    every link was judged against, and host2 delayed 500 µs was flagged by neither matrix
    (an idle MPI run at 463d31b; the delay is now THREE_HOSTS_DELAY_US). Each host's links
    are now also judged against the links that do not touch it (diagnosis/links.py,
    _slow_hosts). Healthy: clean 3 runs in a
    row; host2 delayed: host2 alone. MPI above THREE_MPI_HOSTS_LOAD_PER_CPU (below):
    only that no host but host2 is named on the delayed cluster."""
    cluster = shared.get(hosts=3, link_bps=10**9)
    judged = True

    def run_matrix(cluster) -> dict:
        nonlocal judged
        record = matrix.run_matrix(cluster, store, layer=layer)
        starved = section.starved(record, THREE_MPI_HOSTS_LOAD_PER_CPU)
        judged = judged and (layer == "tcp" or starved is None)
        assert record["status"] == "ok", record["error"]
        return record

    for _ in range(3):
        doc = matrix_output.matrix_json(run_matrix(cluster))
        assert not judged or doc["flagged"] == [], doc["flagged"]
    with faulted(cluster, {"host2": {"delay_us": THREE_HOSTS_DELAY_US}}) as slow:
        _, doc = judged_matrix(lambda: run_matrix(slow))
    flagged = {(f.get("host"), f["figure"]) for f in doc["flagged"]}
    assert {h for h, _ in flagged} <= {"host2"}, (doc["flagged"], doc["notes"])
    if not judged:  # a green run must not hide what was not checked
        pytest.skip(
            "healthy-clean or host2-named not judged: load above "
            f"{THREE_MPI_HOSTS_LOAD_PER_CPU:g} per CPU for three MPI hosts"
        )
    # host2 by its latency; MPI's ping-pong also pays the delay in its bandwidth
    assert ("host2", "latency_us") in flagged, (doc["flagged"], doc["notes"])
    assert {fig for _, fig in flagged} <= {"latency_us", "bandwidth_mbps"}, doc["flagged"]


# On three hosts the MPI matrix has one control link per suspect, and at load 7-9 on 2 CPUs
# the healthy first-round latencies spread 87-605 µs: 3 of 7 such runs flagged a healthy
# cluster (review4 I5; 2 of the 3 by a latency flag), 0 of 5 at load 5. Judged below this
# load per CPU; above it the test still requires that no host but host2 is named.
THREE_MPI_HOSTS_LOAD_PER_CPU = 2.5


# --------------------------------------------------------------------------- late wire


@pytest.mark.root
def test_a_late_wire_is_re_tested_and_then_not_judged(shared, store, monkeypatch):
    """host2 delayed 500 µs, found on re-test: with the pacers later than that excess all
    along, the matrix says the wire was late instead of naming host2 (text, JSON,
    record); on time, host2."""
    with faulted(shared.get(hosts=4, link_bps=10**9), {"host2": {"delay_us": 500}}) as cluster:
        late_then_on_time(cluster, store, monkeypatch)


def late_then_on_time(cluster, store, monkeypatch) -> None:
    retested = []
    measure = matrix.tcp_pairs

    def tcp_pairs(run, pairs, runs, timeout, tag, streams=0):
        retested.extend(pairs if tag.get("retest") else [])
        return measure(run, pairs, runs, timeout, tag, streams)

    monkeypatch.setattr(matrix, "tcp_pairs", tcp_pairs)
    late = {"p99_us": 850.0, "max_us": 3000.0}  # more than host2's excess, ~270 µs
    monkeypatch.setattr(matrix, "worst_late_us", lambda before, after: late)
    record = matrix.run_matrix(cluster, store, layer="tcp")
    doc, text = matrix_output.matrix_json(record), matrix_output.matrix_text(record)
    assert doc["flagged"] == [] and retested
    assert doc["not_judged"].startswith("not judged: the emulated wire was late (p99 850 µs, load")
    assert doc["not_judged"] in text and "flagged: nothing" not in text
    assert any(n.startswith("withheld, the wire was late: host2: latency") for n in doc["notes"])
    assert store.get(record["id"])["figures"]["not_judged"] == doc["not_judged"]
    monkeypatch.setattr(matrix, "worst_late_us", lambda b, a: {"p99_us": 40.0, "max_us": 300.0})
    doc = matrix_output.matrix_json(matrix.run_matrix(cluster, store, layer="tcp"))
    assert doc["not_judged"] is None
    assert [(f.get("host"), f["figure"]) for f in doc["flagged"]] == [("host2", "latency_us")]


# --------------------------------------------------------------------------- the bench


def load_bench():
    path = Path(__file__).resolve().parents[1] / "bench" / "network_diagnosis.py"
    spec = importlib.util.spec_from_file_location("network_diagnosis", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_bench_calls_a_fault_found_only_when_that_host_or_link_is_named_alone():
    bench = load_bench()

    def doc(*flags, not_judged=None):
        return {"flagged": list(flags), "not_judged": not_judged}

    host2, link = {"host": "host2"}, {"pair": ["host2", "host1"]}
    assert bench.verdict(doc(host2), "host2") == "right"
    assert bench.verdict(doc(link), "host1-host2") == "right"  # either order
    assert bench.verdict(doc(host2, link), "host2") == "wrong"  # not alone
    assert bench.verdict(doc(link), "host2") == "wrong"
    assert bench.verdict(doc(), "host2") == "wrong"  # missed
    assert bench.verdict(doc(not_judged="not judged: ..."), "host2") == "not judged"
    assert bench.named(doc({"fabric": ["host0"]}, host2)) == ["fabric", "host2"]
    assert set(bench.FAULTS) == {
        "loss on one host (0.1 %)",
        "loss between two hosts only (0.1 %)",
        "a flapping host (300 ms every 1 s)",
        "a slow host (100 Mbit)",
        "a host slow one way (transmit 100 Mbit)",
    }
    with pytest.raises(SystemExit):  # a part that does not exist: a usage error
        bench.main(["--only", "speed"])
