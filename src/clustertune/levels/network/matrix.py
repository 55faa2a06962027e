"""``net matrix``: every host pair, n-1 rounds of disjoint pairs at once, then diagnosis.

Each pair measures one byte (latency), ``size`` bytes (bandwidth: the throughput of that
size) and, over TCP, a short sweep of the mid sizes between, where a lossy link's curve
dips or jags (:func:`shapes.diagnose_shapes`); MPI measures the two sizes only, as
``ct-mpi-pingpong --pairs-round-robin`` does. Suspect links are measured again before
anyone is blamed (:func:`links.diagnose_with_retest`).
TCP pairs run in the order of the circle method's rounds, as many at once as the hosts'
CPUs allow (:func:`tcp_pairs`; a server and a client each); MPI runs the kernel's
round-robin mode with one rank per host, and re-tests a pair with two ranks.
Before the matrix every pair is checked for TCP reachability, and hosts that cannot be
reached are left out of it, named in a flag (:func:`reachability`). Every host's NIC
counts its link's downs and ups (``carrier_changes``): read before and after the matrix,
they name a flapping host whatever its traffic happened to meet (:func:`carrier_flags`).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from itertools import combinations
from typing import NamedTuple

from ... import vcluster
from ...cluster import Cluster
from ...errors import UserError
from ...launch.base import Launcher
from ...launch.launchers import launcher_for
from ...results import Store
from ...runner import WIRE_LATE_P99_US, Run, wire_state
from . import LEVEL, MPI_KERNEL, TCP_KERNEL, analysis
from .diagnosis import asymmetry, blame, late_wire, links, loss, shapes
from .pingpong import (
    Placement,
    both_ends,
    check_size,
    pair_rate_bps,
    reachable,
    shares_cpus,
    tbf_bucket,
    tcp_pair,
)

DEFAULT_SIZE = 1 << 20  # the MPI kernel's round-robin default
LATENCY_SIZE = 1
# The mid-size sweep: where 0.1-1 % loss shows (seeds/002 fig. 8: 1 KiB-256 KiB), two sizes
# per octave, each point's trials ~20 ms (0.4-0.6 s a pair at 1 Gbit).
SWEEP_MIN, SWEEP_MAX = 1024, 256 * 1024
SWEEP_ARGS = ("--points-per-octave", "2", "--point-time", "0.02")


class Sweep(NamedTuple):
    """A run of the kernel on a pair: smallest and largest size, extra arguments, and
    where its two ends run."""

    lo: int
    hi: int
    extra: tuple[str, ...] = ()
    cpus: Placement = None


# The loss re-test: the bandwidth size for this long per pair, ~10x a matrix point's
# traffic, so 0.1 % loss shows as tens of retransmissions, not the handful a point sees.
LOSS_POINT_TIME_S = 1.0
# Reachability checks at once. A check that fails lasts ~4 s (the check's connect bound,
# pingpong.REACH_CONNECT_S; its server is stopped at once); one dead host among n fails
# n-1 checks, which take ceil((n-1) / REACH_WORKERS) such waves, twice (a failed check is
# repeated). A check that passes takes < 1 s.
REACH_WORKERS = 8
# The one-way streams (TCP): the bandwidth size back to back, each way, this long per
# point; a pingpong averages the two directions and cannot tell which one is bad.
ONE_WAY_POINT_TIME_S = 0.05
Pair = tuple[str, str]


def rounds(hosts: Sequence[str]) -> list[list[Pair]]:
    """The circle method of round-robin tournaments: n-1 rounds (n rounded up to even)
    of disjoint pairs covering every pair once; the odd host out sits a round out."""
    names = list(hosts)
    m = len(names) + len(names) % 2
    slots: list[str | None] = [*names, None][:m]
    result = []
    for _ in range(m - 1):
        pairs = [(slots[i], slots[m - 1 - i]) for i in range(m // 2)]
        result.append([(a, b) for a, b in pairs if a is not None and b is not None])
        slots = [slots[0], slots[-1], *slots[1:-1]]  # slot 0 stays, the others rotate
    return result


def measurement(a: str, b: str, samples: Sequence[dict]) -> dict:
    """Latency (smallest size) and bandwidth (throughput of the largest) of one pair, and
    the TCP retransmissions of its runs when the samples carry them (TCP layer)."""
    curve = analysis.curve_from_points(
        [s for s in samples if not s.get("sweep") and not s.get("one_way")]
    )
    return {
        "pair": [a, b],
        "latency_us": analysis.latency_us(curve),
        "bandwidth_mbps": float(curve.throughput_mbps[-1]),
        **tcp_counters(samples),
        **one_way(a, b, samples),
    }


def one_way(a: str, b: str, samples: Sequence[dict]) -> dict:
    """The pair's one-way stream throughputs, Mbit/s by direction ("a>b"), when measured."""
    rates = {
        s["one_way"]: 8 * s["size"] / s["t_min_s"] / analysis.MBIT
        for s in samples
        if s.get("one_way")
    }
    return {"pair": [a, b], "one_way_mbps": rates} if rates else {}


def sweeps(
    size: int,
    mid_sizes: bool = True,
    retest: bool = False,
    places: Sequence[Placement] = (None,),
) -> list[Sweep]:
    """A pair's runs in the TCP matrix: one byte, the mid-size sweep below ``size`` (when
    asked and there is room for one), ``size``. The one byte runs with its ends where
    ``places[0]`` (:func:`placements`) puts them; a re-test runs it twice under each
    placement, the changed ones first, and the latency keeps the best: on a shared 2-core
    machine a placement alone doubled a healthy pair's latency (14 vs 28 µs, confirmed by
    one unpinned re-test, twice in 10 matrices at load 8-12), and at load 16 a healthy
    pair stayed 2.2x its controls through one re-test under each placement; a slow link
    is slow in every run. With one placement (the scheduler's) that is the one byte twice."""
    top = min(SWEEP_MAX, size // 2)
    mid = [Sweep(SWEEP_MIN, top, SWEEP_ARGS)] if mid_sizes and top >= 2 * SWEEP_MIN else []
    order = [*places[1:], places[0]] * 2 if retest else [places[0]]
    latency = [Sweep(LATENCY_SIZE, LATENCY_SIZE, (), p) for p in order]
    return [*latency, *mid, Sweep(size, size)]


# Pairs measured at once per CPU on hosts that share CPUs. Every pair at once drove the
# load to 14 on 2 CPUs with 32 hosts (16 pairs, each with two paced wires behind it), and
# healthy curves dipped (docs/network.md, "Scale").
PAIRS_PER_CPU = 2


def placements(cluster: Cluster, hosts: Sequence[str]) -> list[Placement]:
    """Where the two ends of the latency runs go. On hosts that share CPUs, where the two
    ends happened to run decided a healthy pair's latency (2.1x the median on 2 cores,
    flagged): there both ends of every pair run on one CPU, the same for every pair, and
    the re-test moves them to another. One CPU rather than one each: at load 17 it kept a
    host delayed 500 µs 2.4x above every healthy run, one CPU each 1.6x, unpinned 1.9x
    (docs/network.md). A real cluster: the scheduler's choice, [None]."""
    cpus = sorted(os.sched_getaffinity(0))
    if not shares_cpus(cluster, hosts) or len(cpus) < 2:
        return [None]
    a, b = str(cpus[0]), str(cpus[1])
    return [(a, a), (b, b)]


def parallel_pairs(cluster: Cluster, pairs: Sequence[Pair]) -> int:
    """How many of a round's pairs run at once: all of them on a real cluster (each host
    its own CPUs), PAIRS_PER_CPU per CPU on hosts that share them."""
    hosts = sorted({h for p in pairs for h in p})
    if not shares_cpus(cluster, hosts):
        return len(pairs)
    return max(1, min(len(pairs), PAIRS_PER_CPU * len(os.sched_getaffinity(0))))


def sweep_curves(found: dict[Pair, list[dict]]) -> dict[Pair, analysis.Curve]:
    """Each pair's mid-size sweep as a curve (sorted pair), where it has one."""
    curves = {}
    for pair, samples in found.items():
        mid = [s for s in samples if s.get("sweep")]
        if len({s["size"] for s in mid}) >= 3:
            curves[tuple(sorted(pair))] = analysis.curve_from_points(mid)
    return curves  # type: ignore[return-value]


def tcp_counters(samples: Sequence[dict]) -> dict[str, int | None]:
    """Retransmitted and sent data segments of the runs behind ``samples`` (None: not TCP;
    a run's counters are on its first sample only)."""
    counted = [s for s in samples if s.get("retrans") is not None]
    return {
        "retransmissions": sum(s["retrans"] for s in counted) if counted else None,
        "data_segments": sum(s.get("data_segs") or 0 for s in counted) if counted else None,
    }


# --------------------------------------------------------------------------- TCP


def _tcp_pair(
    run: Run, a: str, b: str, runs: Sequence[Sweep], timeout: float, tag: dict, streams: int
) -> list[dict]:
    """The pair's ``runs`` (client a), then with ``streams`` a one-way stream of that size
    each way (client a, then client b): samples marked ``sweep`` and ``one_way`` (the
    direction; every sample is tagged with the pair, a then b)."""
    found = []
    stream = ("--mode", "stream", "--point-time", str(ONE_WAY_POINT_TIME_S))
    ways = [(src, dst, Sweep(streams, streams, stream)) for src, dst in ((a, b), (b, a))]
    # a run each, so the TCP counters are each run's own
    for src, dst, (lo, hi, extra, cpus) in [(a, b, r) for r in runs] + (ways if streams else []):
        args = [
            "--min-size",
            str(lo),
            "--max-size",
            str(hi),
            "--perturbation",
            "0",
            "--trials",
            "3",
            *extra,
        ]
        pins = f" on CPUs {cpus[0]}/{cpus[1]}" if cpus else ""
        try:
            step = tcp_pair(
                run,
                src,
                dst,
                args,
                timeout,
                tag={"host_a": a, "host_b": b, **tag},
                what=f"{src}-{dst} {lo}-{hi} B{' stream' if extra == stream else ''}{pins}",
                cpus=cpus,
            )
        except UserError as exc:  # the server could not start: this pair stays unmeasured
            run.problems.append(f"{src}-{dst}: {exc}")
            return found
        detail = (step.output.result or {}).get("detail") or {}
        for i, sample in enumerate(step.output.samples):  # in the stored samples too
            sample["sweep"] = lo < hi
            if extra == stream:
                sample["one_way"] = f"{src}>{dst}"
            elif i == 0:
                sample["retrans"] = lost_and_resent(detail)
                sample["data_segs"] = both_ends(detail, "data_segs_out")
        found += step.output.samples
    return found


def tcp_pairs(
    run: Run,
    pairs: Sequence[Pair],
    runs: Sequence[Sweep],
    timeout: float | None,
    tag: dict,
    streams: int = 0,
) -> dict[Pair, list[dict]]:
    """Every pair measured (:func:`_tcp_pair`), each in its own thread, no host in two
    pairs at once and at most :func:`parallel_pairs` at the same time; ``streams``: the
    size of a one-way stream each way after the runs (0: none).

    A pair starts as soon as a slot and both its hosts are free, in the order given (the
    circle method's rounds, flattened), so that with fewer slots than a round has pairs
    no round waits for its slowest pair before the next starts."""
    largest = max([streams, *(r.hi for r in runs)])
    timeout = timeout or max(_pair_timeout_s(run.cluster, a, b, largest) for a, b in pairs)
    slots = parallel_pairs(run.cluster, pairs)
    waiting, busy, found = list(pairs), set(), {}
    with ThreadPoolExecutor(max_workers=slots) as pool:
        running: dict[Future, Pair] = {}
        while waiting or running:
            for pair in list(waiting):
                if len(running) == slots or busy & set(pair):
                    continue
                waiting.remove(pair)
                busy |= set(pair)
                running[pool.submit(_tcp_pair, run, *pair, runs, timeout, tag, streams)] = pair
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                pair = running.pop(future)
                busy -= set(pair)
                found[pair] = future.result()
    return found


def lost_and_resent(detail: dict) -> int | None:
    """Segments both ends retransmitted, less those the receiver reported as duplicates
    (DSACK): on a busy machine a late ACK fires TCP's timers and the segment is sent again
    though nothing was lost — under load that made healthy links look lossy."""
    total = both_ends(detail, "total_retrans")
    return None if total is None else total - (both_ends(detail, "dsack_dups") or 0)


def retest(
    run: Run,
    pairs: Sequence[Pair],
    runs: Sequence[Sweep],
    timeout: float | None,
    what: str,
    streams: int = 0,
) -> dict[Pair, list[dict]]:
    """``pairs`` measured again with ``runs`` (and ``streams``)."""
    return tcp_pairs(run, pairs, runs, timeout, {"retest": what}, streams)


def one_way_retest(run: Run, pairs: Sequence[Pair], size: int, timeout: float | None) -> list:
    """The one-way streams of ``pairs`` measured again (the asymmetry re-test)."""
    found = retest(run, pairs, [], timeout, "one-way", streams=size)
    return [one_way(a, b, samples) for (a, b), samples in found.items()]


def loss_retest(run: Run, pairs: Sequence[Pair], size: int, timeout: float | None) -> list[dict]:
    """Retransmissions of ``pairs`` over a long run at ``size`` (the loss re-test)."""
    runs = [Sweep(size, size, ("--point-time", str(LOSS_POINT_TIME_S)))]
    found = retest(run, pairs, runs, timeout, "loss")
    return [{"pair": [a, b], **tcp_counters(samples)} for (a, b), samples in found.items()]


# --------------------------------------------------------------------------- MPI


def mpi_round_robin(
    run: Run, hosts: list[str], mpi: str, size: int, timeout: float | None, tag: dict
) -> dict[Pair, list[dict]]:
    """The kernel's all-pairs mode over ``hosts``, one rank each (rank r on hosts[r])."""
    timeout = timeout or 60.0 + (len(hosts) - 1) * max(
        _pair_timeout_s(run.cluster, a, b, size) for r in rounds(hosts) for a, b in r
    )
    step = run.mpi(
        MPI_KERNEL,
        np=len(hosts),
        mpi=mpi,
        hosts=hosts,
        timeout=timeout,
        tag=tag,
        args=["--pairs-round-robin", "--max-size", str(size), "--trials", "3"],
        what=f"{mpi} all pairs of {','.join(hosts)}",
    )
    found: dict[Pair, list[dict]] = {}
    for sample in step.output.samples:  # ranks to host names, in the stored samples too
        sample.update(host_a=hosts[sample["a"]], host_b=hosts[sample["b"]])
        found.setdefault((sample["host_a"], sample["host_b"]), []).append(sample)
    return found


def reachability(launcher: Launcher, hosts: Sequence[str]) -> tuple[list[str], list[dict]]:
    """The hosts the matrix (MPI or TCP) can run on, and a flag for each host left out.

    Why here and not in the kernel: an MPI job is all or nothing. With a host's link down
    it does not even reach the kernel (OpenMPI's orted on that host cannot open its
    out-of-band channel and the job fails with no host named; MPICH's hydra proxy cannot
    call back to mpiexec and the job waits for its timeout, 181 s on 3 hosts), and an MPI
    call blocked on a dead peer cannot portably be abandoned to go on with the other pairs.
    So every pair gets the one-byte TCP check of ``net pingpong`` (:func:`reachable`)
    first, and a failed one once more (one that passes then is a flapping link: a flag of
    its own, :func:`flapping`); then the host in most failed pairs is left out until every
    remaining pair passed: a dead host fails with every other; of a pair that fails while
    both reach the others (a cable), the later host goes. Fewer than two hosts left is a
    user error."""
    pairs = [p for r in rounds(hosts) for p in r]

    def check(pair: Pair) -> str | None:
        try:
            reachable(launcher, *pair)
        except UserError as exc:  # no route, or the server could not start on the host
            return str(exc)
        return None

    with ThreadPoolExecutor(max_workers=min(len(pairs), REACH_WORKERS)) as pool:
        failed = {p: why for p, why in zip(pairs, pool.map(check, pairs), strict=True) if why}
        # a link that flaps fails a check it passes a moment later: check again before
        # anyone is left out (a lone failure once cost a healthy host its place)
        again = dict(zip(failed, pool.map(check, failed), strict=True))
    flags = flapping({p: failed.pop(p) for p, why in again.items() if why is None})
    live = list(hosts)
    while pending := [p for p in failed if not set(p) - set(live)]:
        counts = Counter(h for p in pending for h in p)
        host = max(reversed(live), key=lambda h: counts[h])
        own = [p for p in failed if host in p]  # with hosts already left out too
        peers = [h for h in hosts if h != host and any(h in p for p in own)]
        live.remove(host)
        suspect = (
            f"{host}'s NIC or cable, or {host} is down"
            if len(peers) == len(hosts) - 1
            else f"the route between them ({host} reaches the other hosts)"
        )
        flags.append(
            {
                "host": host,
                "figure": "reachable",
                "value": None,
                "median": None,
                "peers": peers,
                "reason": f"{host}: no TCP connection with {', '.join(peers)}, left out of the "
                f"matrix — suspect {suspect} ({failed[own[0]]})",
            }
        )
    if len(live) < 2:
        raise UserError(
            f"no two of {', '.join(hosts)} reach each other over TCP: " + "; ".join(failed.values())
        )
    return live, flags


def flapping(recovered: dict[Pair, str]) -> list[dict]:
    """Flags for pairs whose TCP check failed and then passed: the host in two or more of
    them (its link comes and goes), else each pair."""
    counts = Counter(h for p in recovered for h in p)
    hosts = sorted(h for h, n in counts.items() if n >= 2)
    flags = [
        {
            "host": h,
            "figure": "flapping",
            "value": None,
            "median": None,
            "reason": f"{h}: TCP checks with {', '.join(sorted(o for p in recovered if h in p for o in p if o != h))} "
            f"failed, then passed — suspect {h}'s link going down and up (NIC, cable, switch port)",
        }
        for h in hosts
    ]
    for p, why in recovered.items():
        if not set(p) & set(hosts):
            flags.append(
                {
                    "pair": list(p),
                    "figure": "flapping",
                    "value": None,
                    "median": None,
                    "reason": f"{p[0]}-{p[1]}: a TCP check failed ({why}), then passed — suspect a "
                    "link that goes down and up between them",
                }
            )
    return flags


def unstable(live: Sequence[str], measured: Sequence[dict]) -> list[dict]:
    """Flags for hosts most of whose pairs could not be measured although every pair had
    just passed the TCP check: a link that went down during the matrix."""
    done = {tuple(sorted(m["pair"])) for m in measured}
    lost = [p for p in combinations(sorted(live), 2) if p not in done]
    flags = []
    for host in live:
        mine = [p for p in lost if host in p]
        if len(mine) >= 2 and 2 * len(mine) > len(live) - 1:
            others = ", ".join(h for p in mine for h in p if h != host)
            flags.append(
                {
                    "host": host,
                    "figure": "flapping",
                    "value": None,
                    "median": None,
                    "reason": f"{host}: its pairs with {others} could not be measured, though they "
                    "passed the TCP check just before — suspect its link going down and up",
                }
            )
    return flags


# --------------------------------------------------------------------------- link state

# Each NIC's name, its carrier_changes counter (every down and every up of its link, kept
# by the kernel) and "nic" when it is a device (not a bridge, veth or tunnel).
CARRIER_READ = (
    'for d in /sys/class/net/*; do [ -e "$d/device" ] && k=nic || k=-; '
    'echo "${d##*/} $(cat "$d/carrier_changes" 2>/dev/null) $k"; done'
)
CarrierCounts = dict[str, dict[str, int]]


def carrier_changes(launcher: Launcher, hosts: Sequence[str]) -> CarrierCounts:
    """Each host's carrier_changes counters of the NICs the matrix's traffic can use: the
    launcher's interface when it names one (a virtual cluster's eth0), else the hosts'
    devices. A host whose counters cannot be read is left out (no evidence either way)."""
    interface = getattr(launcher, "interface", None)

    def read(host: str) -> dict[str, int] | None:
        done = launcher.run_on_host(host, ["sh", "-c", CARRIER_READ], 10.0)
        if done.returncode != 0:
            return None
        counts = {}
        for line in done.stdout.splitlines():
            m = re.fullmatch(r"(\S+) (\d+) (nic|-)", line.strip())
            if m and (m[1] == interface if interface else m[3] == "nic"):
                counts[m[1]] = int(m[2])
        return counts

    with ThreadPoolExecutor(max_workers=min(len(hosts), REACH_WORKERS)) as pool:
        read_all = zip(hosts, pool.map(read, hosts), strict=True)
        return {h: c for h, c in read_all if c is not None}


def carrier_flags(before: CarrierCounts, after: CarrierCounts) -> list[dict]:
    """A ``flapping`` flag for every host whose link went down (and up) between the two
    reads. Traffic shows a flap only when it is in flight during a down window, which the
    matrix's short runs can slip between; the counter sees every one."""
    flags = []
    for host, now in after.items():
        was = before.get(host, {})
        changed = {
            dev: now[dev] - was[dev]
            for dev in sorted(now.keys() & was.keys())
            if now[dev] > was[dev]
        }
        if changed:
            where = ", ".join(f"{dev} {n}" for dev, n in changed.items())
            flags.append(
                {
                    "host": host,
                    "figure": "flapping",
                    "value": sum(changed.values()),
                    "median": 0,
                    "reason": f"{host}: its link went down and up during the matrix (carrier "
                    f"changes: {where}) — suspect {host}'s NIC, cable or switch port",
                }
            )
    return flags


# --------------------------------------------------------------------------- the wire

Lateness = dict[str, dict]  # vcluster.wire_lateness: per pacer, how late it released


def pacers(cluster: Cluster) -> Callable[[], Lateness]:
    """A reader of how late the emulated wire's pacers have released packets so far
    (:func:`vcluster.wire_lateness`); one that reads {} where there are none (a real
    cluster)."""
    state = wire_state(cluster)
    return (lambda: vcluster.wire_lateness(state)) if state else dict


def worst_late_us(before: Lateness, after: Lateness) -> dict[str, float | None]:
    """The worst pacer's 99th percentile and maximum of lateness between two readings
    (None: no packet paced)."""
    late = vcluster.lateness_delta(before, after).values()
    return {
        key: max((v[key] for v in late if v[key] is not None), default=None)
        for key in ("p99_us", "max_us")
    }


def _pair_timeout_s(cluster: Cluster, a: str, b: str, size: int) -> float:
    rate = pair_rate_bps(cluster, a, b) or 10**8
    return 60.0 + 40.0 * size * 8 / rate  # 4 round trips of the large message, x5


# --------------------------------------------------------------------------- the matrix


def run_matrix(
    cluster: Cluster,
    store: Store,
    layer: str = "tcp",
    mpi: str = "openmpi",
    size: int = DEFAULT_SIZE,
    hosts: list[str] | None = None,
    timeout: float | None = None,
) -> dict:
    """Measure every pair, diagnose with re-test, store one record and return it.
    ``timeout`` bounds each launch (default: from the link rates)."""
    if layer not in ("tcp", "mpi"):
        raise UserError(f"--layer {layer!r}: net matrix runs over tcp or mpi")
    check_size(size, "--size")
    names = hosts or [h.name for h in cluster.hosts]
    for name in names:
        cluster.host(name)
    if len(names) < 2 or len(set(names)) != len(names):
        raise UserError(f"net matrix needs at least two distinct hosts, got {names}")
    params = {
        "command": "matrix",
        "layer": layer,
        "mpi": mpi if layer == "mpi" else None,
        "size": size,
        "hosts": names,
    }
    launcher = launcher_for(cluster)
    read_wire = pacers(cluster)
    carrier = carrier_changes(launcher, names)
    # also before TCP: its pairs are bounded one by one, but a dead host would cost a
    # connect timeout per pair and size and be named by no flag
    live, link_flags = reachability(launcher, names)
    with Run(
        cluster,
        store,
        level=LEVEL.name,
        kernel=TCP_KERNEL if layer == "tcp" else MPI_KERNEL,
        params=params,
        hosts=live,
        np=len(live) if layer == "mpi" else None,
        mpi=mpi if layer == "mpi" else None,
        composite=True,
    ) as run:
        run.problems += [f["reason"] for f in link_flags if f["figure"] == "reachable"]

        def measure(pairs: Sequence[Pair], retest: bool) -> list[dict]:
            found: dict[Pair, list[dict]] = {}
            if layer == "mpi" and not retest:
                found = mpi_round_robin(run, live, mpi, size, timeout, {"retest": False})
            elif layer == "mpi":
                for a, b in pairs:
                    found |= mpi_round_robin(run, [a, b], mpi, size, timeout, {"retest": True})
            else:
                # the re-test of a latency or bandwidth suspect needs their two sizes only
                runs = sweeps(
                    size, mid_sizes=judge_shapes and not retest, retest=retest, places=places
                )
                order = pairs if retest else [p for r in rounds(live) for p in r]
                found = tcp_pairs(run, order, runs, timeout, {"retest": retest})
                if not retest:
                    curves.update(sweep_curves(found))
                    # the one-way streams after every latency run, so that none shares the
                    # CPUs with a stream; their re-test is one_way_retest
                    tag = {"retest": False}
                    order = [p for r in rounds(live) for p in r]
                    for pair, samples in tcp_pairs(run, order, [], timeout, tag, size).items():
                        found.setdefault(pair, []).extend(samples)
            result = []
            for (a, b), samples in found.items():
                try:
                    result.append(measurement(a, b, samples))
                except ValueError as exc:
                    run.problems.append(f"{a}-{b}: {exc}")
            return result

        curves: dict[Pair, analysis.Curve] = {}
        # a tbf bucket draws its own mid-size curve (up to twice nominal, jagged under load:
        # a healthy 8-host tbf matrix was flagged for it), a wire does not
        judge_shapes = layer == "tcp" and not tbf_bucket(cluster, live)
        places = placements(cluster, live)
        wire_at_start = read_wire()
        first = measure([], retest=False)
        # the re-tests from here on: a flag stands on a wire that was on time during them
        wire_at_retests, load_at_retests = read_wire(), os.getloadavg()[0]
        diagnosis = None
        try:
            matrix = links.link_matrix(names, first)
            diagnosis = links.diagnose_with_retest(
                matrix,
                lambda s: measure(s, retest=True),
                reference=nominal_reference(cluster, names),
                shared_cpus=len(places) > 1,
            )
        except ValueError as exc:
            run.problems.append(f"analysis: {exc}")
        run.figures = {"size_bytes": size}  # kept also when incomplete
        if layer == "tcp":
            run.figures["retransmissions"] = retransmission_grid(names, first)
        if diagnosis is not None:
            run.figures |= diagnosis.to_json() | {"suspects": [list(p) for p in diagnosis.suspects]}
        if layer == "tcp" and diagnosis is not None:
            flapped = {  # the hosts of a link seen flapping: their links get the long re-test
                h
                for f in link_flags
                if f["figure"] == "flapping"
                for h in f.get("pair") or [f["host"]]
            }
            lossy = loss.diagnose_loss(
                names, first, lambda pairs: loss_retest(run, pairs, size, timeout), flapped
            )
            run.figures["flagged"], notes = loss.with_loss(run.figures["flagged"], lossy)
            run.figures["notes"] = run.figures.get("notes", []) + notes
            run.figures["one_way_mbps"] = asymmetry.one_way_grid(names, first)
            run.figures["flagged"] += asymmetry.diagnose_asymmetry(
                names, first, lambda pairs: one_way_retest(run, pairs, size, timeout)
            )
        if judge_shapes and diagnosis is not None:
            found = shapes.diagnose_shapes(
                names,
                curves,
                lambda pairs: sweep_curves(
                    retest(run, pairs, sweeps(size)[1:-1], timeout, "shape")
                ),
            )
            kept, notes = blame.symptoms(run.figures["flagged"], found)
            run.figures["flagged"] += kept
            run.figures["notes"] += notes
        elif layer == "tcp":
            run.figures.setdefault("notes", []).append(
                "mid-size curves not judged: a tbf-shaped virtual link draws its bucket's "
                "curve, not a wire's (vcluster up --wire paced)"
            )
        # a flag on a host explains what the links of that host showed (a flapping host's
        # pair that failed a check, a slow host's jagged curve): those become notes
        flagged = link_flags + unstable(live, first) + run.figures.get("flagged", [])
        flagged, notes = blame.pairs_to_hosts(live, flagged)
        # a link seen going down is the finding; what its host's traffic met is its symptom
        downs = carrier_flags(carrier, carrier_changes(launcher, names))
        flagged, more = blame.symptoms(downs, flagged)
        flagged = downs + flagged
        notes += more
        on_hosts = [f for f in flagged if "host" in f]
        kept, more = blame.symptoms(on_hosts, [f for f in flagged if "host" not in f])
        wire_at_end = read_wire()
        late_us = worst_late_us(wire_at_retests, wire_at_end)
        run.figures["wire_late_us"] = {
            "measurement": worst_late_us(wire_at_start, wire_at_retests),
            "retests": late_us,
        }
        late = None
        if late_us["p99_us"] is not None and late_us["p99_us"] > WIRE_LATE_P99_US:
            load = max(load_at_retests, os.getloadavg()[0])
            late = late_wire.LateWire(late_us["p99_us"], late_us["max_us"] or 0.0, load)
        flagged, withheld, run.figures["not_judged"] = late_wire.judged_on_late_wire(
            on_hosts + kept, late
        )
        run.figures["flagged"] = flagged
        run.figures["notes"] = run.figures.get("notes", []) + notes + more + withheld
        complete = not run.problems and not any(s.problems for s in run.steps)
        # a pair that failed verification fails the matrix, however far it got
        failed = any(s.failed for s in run.steps)
        if complete or failed:
            run.result = {"verification": "failed" if failed else "passed", "figures": run.figures}
    return run.record


# TCP payload over a healthy wire: ~94 % of the nominal rate (headers, inter-frame gaps)
PAYLOAD_SHARE = 0.94


def nominal_reference(cluster: Cluster, hosts: list[str]) -> dict[str, float] | None:
    """The bandwidth every link should reach when the cluster's nominal rates say so:
    one rate for all these hosts, on one site (a WAN between sites is another rate).
    Then even two hosts can be judged, and a fabric slow everywhere is seen."""
    rates = {cluster.host(h).link_bps for h in hosts}
    sites = {cluster.host(h).site for h in hosts}
    if len(rates) != 1 or None in rates or len(sites) != 1:
        return None
    return {"bandwidth_mbps": PAYLOAD_SHARE * rates.pop() / 1e6}


def retransmission_grid(hosts: list[str], measured: list[dict]) -> list[list[int | None]]:
    """n x n TCP retransmissions of each pair's runs (both ends, both sizes; symmetric,
    None where unmeasured): a lossy link retransmits before its throughput shows it."""
    index = {h: i for i, h in enumerate(hosts)}
    grid: list[list[int | None]] = [[None] * len(hosts) for _ in hosts]
    for m in measured:
        i, j = (index[h] for h in m["pair"])
        grid[i][j] = grid[j][i] = m.get("retransmissions")
    return grid


# --------------------------------------------------------------------------- output


def matrix_json(record: dict) -> dict:
    f = record["figures"]
    return {
        "run_id": record["id"],
        "status": record["status"],
        "error": record["error"],
        "cluster": record["meta"]["cluster"]["name"],
        "layer": record["params"]["layer"],
        "mpi": record["params"]["mpi"],
        "size_bytes": f.get("size_bytes"),
        "hosts": f.get("hosts", record["params"]["hosts"]),
        "latency_us": f.get("latency_us"),
        "bandwidth_mbps": f.get("bandwidth_mbps"),
        "retransmissions": f.get("retransmissions"),
        "one_way_mbps": f.get("one_way_mbps"),
        "flagged": f.get("flagged", []),
        "not_judged": f.get("not_judged"),
        "wire_late_us": f.get("wire_late_us"),
        "notes": f.get("notes", []),
    }


def _grid(
    hosts: list[str], m: list[list[float | None]] | None, fmt: Callable[[float], str]
) -> list[str]:
    if m is None:
        return ["  (not measured)"]
    width = max(8, *(len(h) for h in hosts))
    lines = ["  " + " " * width + "".join(f"{h:>{width + 1}}" for h in hosts)]
    for h, row in zip(hosts, m, strict=True):
        cells = "".join(f"{'-' if v is None else fmt(v):>{width + 1}}" for v in row)
        lines.append(f"  {h:<{width}}{cells}")
    return lines


def matrix_text(record: dict) -> str:
    j = matrix_json(record)
    layer = j["layer"] + (f" ({j['mpi']})" if j["mpi"] else "")
    lines = [f"run {j['run_id']}: {layer} matrix on {j['cluster']} -> {j['status']}"]
    lines += ["  bandwidth (Mbit/s)", *_grid(j["hosts"], j["bandwidth_mbps"], lambda v: f"{v:.1f}")]
    lines += ["  latency (µs)", *_grid(j["hosts"], j["latency_us"], lambda v: f"{v:.1f}")]
    if j["retransmissions"] is not None:
        lines += ["  TCP retransmissions", *_grid(j["hosts"], j["retransmissions"], str)]
    if j["one_way_mbps"] is not None:
        lines += [
            "  one-way stream (Mbit/s, row host sending to column host)",
            *_grid(j["hosts"], j["one_way_mbps"], lambda v: f"{v:.1f}"),
        ]
    if j["not_judged"]:
        lines.append(f"  {j['not_judged']}")
    if j["flagged"]:
        lines += ["  flagged:"] + [f"    {f['reason']}" for f in j["flagged"]]
    elif not j["not_judged"]:
        lines.append("  flagged: nothing")
    lines += [f"  note: {n}" for n in j["notes"]]
    if record["error"]:
        lines.append(f"  error: {record['error']}")
    return "\n".join(lines)
