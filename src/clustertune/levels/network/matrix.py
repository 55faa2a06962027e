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
reached are left out of it, named in a flag (reach.py). Every host's NIC counts its
link's downs and ups: read before and after the matrix, they name a flapping host
whatever its traffic happened to meet (counters.py).

This module runs the pairs and composes the diagnoses' flags; schedule.py says what runs
where and when, diagnosis/ judges, matrix_output.py shows the record.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager

import numpy as np

from ... import vcluster
from ...cluster import Cluster
from ...errors import UserError
from ...launch import mpi as mpi_flavours
from ...launch.launchers import launcher_for
from ...results import Store
from ...runner import WIRE_LATE_P99_US, Run, wire_state
from ...units import payload_rate_bps
from . import LEVEL, MPI_KERNEL, TCP_KERNEL, analysis
from .counters import (
    carrier_changes,
    carrier_flags,
    lost_and_resent,
    retransmission_grid,
    tcp_counters,
)
from .diagnosis import asymmetry, blame, late_wire, links, loss, shapes
from .diagnosis.blame import Pair
from .pingpong import Placement, both_ends, check_size, pair_rate_bps, tbf_bucket, tcp_pair
from .reach import reachability, unstable
from .schedule import Sweep, parallel_pairs, placements, retest_order, rounds, sweeps

DEFAULT_SIZE = 1 << 20  # the MPI kernel's round-robin default
# The loss re-test: the bandwidth size for this long per pair, ~10x a matrix point's
# traffic, so 0.1 % loss shows as tens of retransmissions, not the handful a point sees.
LOSS_POINT_TIME_S = 1.0
# The one-way streams (TCP): the bandwidth size back to back, each way, this long per
# point; a pingpong averages the two directions and cannot tell which one is bad.
ONE_WAY_POINT_TIME_S = 0.05


def measurement(a: str, b: str, samples: Sequence[dict]) -> dict:
    """Latency (smallest size) and bandwidth (throughput of the largest) of one pair, and
    the TCP retransmissions of its runs when the samples carry them (TCP layer). Where
    the smallest size ran more than once (a re-test), also each of those runs' latency
    (``latency_runs_us``; the latency is the best of them)."""
    plain = [s for s in samples if not s.get("sweep") and not s.get("one_way")]
    curve = analysis.curve_from_points(plain)
    smallest = [s for s in plain if s["size"] == curve.size[0]]
    rest = [s for s in plain if s["size"] != curve.size[0]]
    runs = (
        {
            "latency_runs_us": [
                analysis.latency_us(analysis.curve_from_points([s, *rest])) for s in smallest
            ]
        }
        if len(smallest) > 1
        else {}
    )
    return {
        "pair": [a, b],
        "latency_us": analysis.latency_us(curve),
        "bandwidth_mbps": float(curve.throughput_mbps[-1]),
        **runs,
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


def sweep_curves(found: dict[Pair, list[dict]]) -> dict[Pair, analysis.Curve]:
    """Each pair's mid-size sweep as a curve (sorted pair), where it has one."""
    curves = {}
    for pair, samples in found.items():
        mid = [s for s in samples if s.get("sweep")]
        if len({s["size"] for s in mid}) >= 3:
            curves[tuple(sorted(pair))] = analysis.curve_from_points(mid)
    return curves  # type: ignore[return-value]


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
    if not pairs:
        return {}
    largest = max([streams, *(r.hi for r in runs)])
    timeout = timeout or max(_pair_timeout_s(run.cluster, a, b, largest) for a, b in pairs)
    slots = parallel_pairs(run.cluster, pairs, retest=bool(tag.get("retest")))
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


def mpi_retest(
    run: Run,
    pairs: Sequence[Pair],
    mpi: str,
    size: int,
    timeout: float | None,
    places: Sequence[Placement],
) -> dict[Pair, list[dict]]:
    """Each pair as a job of two ranks. On hosts that share CPUs (``places`` from
    :func:`placements` with ``apart``) once under each placement of :func:`retest_order`,
    the changed one first, the rank on each host pinned to its CPU (:func:`ranks_on`), as
    the TCP re-test moves its ends: the latency keeps the best, a slow link is slow under
    every placement."""
    order = retest_order(places, times=1) if len(places) > 1 else [None]
    found: dict[Pair, list[dict]] = {}
    for a, b in pairs:
        for cpus in order:
            with ranks_on(run, dict(zip((a, b), cpus, strict=True)) if cpus else {}):
                tag = {"retest": True}
                for pair, samples in mpi_round_robin(run, [a, b], mpi, size, timeout, tag).items():
                    found.setdefault(pair, []).extend(samples)
    return found


@contextmanager
def ranks_on(run: Run, cpus: dict[str, str]) -> Iterator[None]:
    """Within the block, the rank of the run's MPI jobs on each host of ``cpus`` runs on
    that CPU: a virtual cluster's agent, through which the MPI launcher starts every
    host's processes, reads it from its environment (vcluster.CPU_ENV_PREFIX)."""
    env = run.env
    run.env = {**env, **{vcluster.CPU_ENV_PREFIX + host: cpu for host, cpu in cpus.items()}}
    try:
        yield
    finally:
        run.env = env


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


def rto_late_packets(before: Lateness, after: Lateness) -> int:
    """Packets the pacers released between two readings as late as TCP's minimum
    retransmission timeout or later (each pacer's count, summed)."""
    at_least_ns = round(late_wire.TCP_MIN_RTO_US * 1000)
    late = vcluster.lateness_delta(before, after).values()
    return sum(vcluster.packets_late_by(v["hist"], at_least_ns) for v in late)


def _pair_timeout_s(cluster: Cluster, a: str, b: str, size: int) -> float:
    rate = pair_rate_bps(cluster, a, b) or 10**8
    return 60.0 + 40.0 * size * 8 / rate  # 4 round trips of the large message, x5


# --------------------------------------------------------------------------- the matrix


def run_matrix(
    cluster: Cluster,
    store: Store,
    layer: str = "tcp",
    mpi: str = mpi_flavours.DEFAULT.name,
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
            pairs = steady(pairs)
            if layer == "mpi" and not retest:
                found = mpi_round_robin(run, live, mpi, size, timeout, {"retest": False})
            elif layer == "mpi":
                found = mpi_retest(run, pairs, mpi, size, timeout, placements(cluster, live, True))
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
                    order = steady([p for r in rounds(live) for p in r])
                    for pair, samples in tcp_pairs(run, order, [], timeout, tag, size).items():
                        found.setdefault(pair, []).extend(samples)
            result = []
            for (a, b), samples in found.items():
                try:
                    result.append(measurement(a, b, samples))
                except ValueError as exc:
                    run.problems.append(f"{a}-{b}: {exc}")
            return result

        flapping: set[str] = set()

        def steady(pairs: Sequence[Pair]) -> list[Pair]:
            """The pairs touching no host whose link has gone down and up so far (its NIC's
            counter, read afresh). Such a host is named for that whatever its links show,
            and what they show is the flap, so none of them is measured further: with a
            port down 300 ms a second, its streams and re-tests took 20-35 s of a 4-host
            matrix's 45-65 s, each run waiting out TCP's timeouts."""
            if pairs:  # the hosts measured and not yet seen flapping (a dead one costs 10 s)
                unseen = [h for h in live if h not in flapping]
                downs = carrier_flags(carrier, carrier_changes(launcher, unseen))
                flapping.update(f["host"] for f in downs)
            return [p for p in pairs if not flapping & set(p)]

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
                names,
                first,
                lambda pairs: loss_retest(run, steady(pairs), size, timeout),
                flapped - flapping,
            )
            run.figures["flagged"], notes = loss.with_loss(run.figures["flagged"], lossy)
            run.figures["notes"] = run.figures.get("notes", []) + notes
            run.figures["one_way_mbps"] = asymmetry.one_way_grid(names, first)
            run.figures["flagged"] += asymmetry.diagnose_asymmetry(
                names, first, lambda pairs: one_way_retest(run, steady(pairs), size, timeout)
            )
        if judge_shapes and diagnosis is not None:
            found = shapes.diagnose_shapes(
                names,
                curves,
                lambda pairs: sweep_curves(
                    retest(run, steady(pairs), sweeps(size)[1:-1], timeout, "shape")
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
        found = link_flags + unstable(live, first) + run.figures.get("flagged", [])
        downs = carrier_flags(carrier, carrier_changes(launcher, names))
        flagged, notes = blame.verdict(live, found, downs)
        wire_at_end = read_wire()
        late_us = worst_late_us(wire_at_retests, wire_at_end)
        run.figures["wire_late_us"] = {
            "measurement": worst_late_us(wire_at_start, wire_at_retests),
            "retests": late_us,
        }
        late = None
        if late_us["p99_us"] is not None and late_us["p99_us"] > WIRE_LATE_P99_US:
            load = max(load_at_retests, os.getloadavg()[0])
            resent = rto_late_packets(wire_at_retests, wire_at_end)
            late = late_wire.LateWire(late_us["p99_us"], resent, load)
        flagged, withheld, run.figures["not_judged"] = late_wire.judged_on_late_wire(flagged, late)
        run.figures["flagged"] = flagged
        run.figures["notes"] = run.figures.get("notes", []) + notes + withheld
        complete = not run.problems and not any(s.problems for s in run.steps)
        # a pair that failed verification fails the matrix, however far it got
        failed = any(s.failed for s in run.steps)
        if complete or failed:
            run.result = {"verification": "failed" if failed else "passed", "figures": run.figures}
    return run.record


def nominal_reference(cluster: Cluster, hosts: list[str]) -> dict[str, np.ndarray] | None:
    """The bandwidth each link should reach when the cluster's nominal rates say so: the
    TCP payload (units.payload_rate_bps, the rule every level's ceiling uses) of the slower
    of its two hosts' links, as an n x n matrix in the order of ``hosts``. Only when every
    host's rate is known and all are on one site (a WAN between sites is another rate).
    Then even two hosts can be judged, a fabric slow everywhere is seen, and a 100 Mbit
    host among 1 Gbit ones is judged against its own rate, not blamed for it."""
    rates = [cluster.host(h).link_bps for h in hosts]
    if None in rates or len({cluster.host(h).site for h in hosts}) != 1:
        return None
    slower_end = np.minimum.outer(rates, rates).astype(float)
    np.fill_diagonal(slower_end, np.nan)
    return {"bandwidth_mbps": payload_rate_bps(slower_end) / analysis.MBIT}
