"""What ``net matrix`` runs where and when: the rounds of pairs, the runs of one pair
(:class:`Sweep`), where a pair's two ends run and how many pairs run at once."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple

from ...cluster import Cluster
from .diagnosis.blame import Pair
from .pingpong import Placement, shares_cpus

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
    order = retest_order(places) if retest else [places[0]]
    latency = [Sweep(LATENCY_SIZE, LATENCY_SIZE, (), p) for p in order]
    return [*latency, *mid, Sweep(size, size)]


def retest_order(places: Sequence[Placement], times: int = 2) -> list[Placement]:
    """Where a re-test measures a pair's latency, run by run: ``times`` under each
    placement, the changed ones first (:func:`sweeps`; the MPI matrix's two-rank jobs,
    which measure both sizes and cost seconds each under load, once)."""
    return [*places[1:], places[0]] * times


# Pairs measured at once per CPU on hosts that share CPUs. Every pair at once drove the
# load to 14 on 2 CPUs with 32 hosts (16 pairs, each with two paced wires behind it), and
# healthy curves dipped (docs/network.md, "Scale").
PAIRS_PER_CPU = 2


def placements(cluster: Cluster, hosts: Sequence[str], apart: bool = False) -> list[Placement]:
    """Where the two ends of the latency runs go. On hosts that share CPUs, where the two
    ends happened to run decided a healthy pair's latency (2.1x the median on 2 cores,
    flagged): there both ends of every pair run on one CPU, the same for every pair, and
    the re-test moves them to another. One CPU rather than one each: at load 17 it kept a
    host delayed 500 µs 2.4x above every healthy run, one CPU each 1.6x, unpinned 1.9x
    (docs/network.md). ``apart``: one CPU each, then swapped, for ends that busy-poll
    (MPI ranks): two of them on one CPU pay a scheduler tick per message (2-3.5 ms).
    A real cluster: the scheduler's choice, [None]."""
    cpus = sorted(os.sched_getaffinity(0))
    if not shares_cpus(cluster, hosts) or len(cpus) < 2:
        return [None]
    a, b = str(cpus[0]), str(cpus[1])
    return [(a, b), (b, a)] if apart else [(a, a), (b, b)]


def parallel_pairs(cluster: Cluster, pairs: Sequence[Pair], retest: bool = False) -> int:
    """How many of a round's pairs run at once: all of them on a real cluster (each host
    its own CPUs), PAIRS_PER_CPU per CPU on hosts that share them, and there one at a
    time for a re-test: a re-test run beside other pairs meets the load of the first
    round that raised the suspicion (the matrix's own pairs drove a 32-host one to load
    14, healthy curves dipped, and their re-test, 4 at once, confirmed 4 false `dips`)."""
    hosts = sorted({h for p in pairs for h in p})
    if not shares_cpus(cluster, hosts):
        return len(pairs)
    if retest:
        return 1
    return max(1, min(len(pairs), PAIRS_PER_CPU * len(os.sched_getaffinity(0))))
