"""The tuning level's step in ``make demo``: the QCD decomposition for 8^4 on 4 ranks
(two classes of grids, two sweeps per run), the TCP socket buffer between the first two
hosts, and a quick ``tune linpack`` on 2 cores (a budget of DEMO_BUDGET_MIN; its HPL.dat
written beside the report, its session in the report's Tuning section)."""

from __future__ import annotations

import sys

from ...cluster import Cluster
from ...launch.mpi import default_of
from ...results import Store
from .. import DEMO_DIR
from ..linpack.api import available_blas
from . import cli, linpack, qcd, tcp

DEMO_NP = 4
DEMO_LATTICE = (8, 8, 8, 8)
DEMO_TIMEOUT_S = 120.0
DEMO_LINPACK_NP = 2
# minutes: bounds the search and confirmation; the BLAS stage (every installed library,
# an OpenBLAS with two cores) comes on top
DEMO_BUDGET_MIN = 0.2
# left out of the demo's BLAS stage: the reference implementations, 10-50x slower than
# OpenBLAS or BLIS, whose DGEMM alone took most of a minute at load 7
DEMO_SKIP_BLAS = ("blas", "atlas")


def say(text: str) -> None:
    for line in text.splitlines():
        print(f"[demo] {line}", file=sys.stderr, flush=True)


def demo(cluster: Cluster, store: Store) -> list[dict]:
    mpi = default_of(cluster.mpi)
    records: list[dict] = []
    summary = qcd.tune(
        cluster, store, lattice=DEMO_LATTICE, np=DEMO_NP, mpi=mpi, sweeps=2, timeout=DEMO_TIMEOUT_S
    )
    record = cli.store_qcd(cluster, store, summary, 2)
    say(cli.qcd_text(summary, record))
    records += [store.get(i) for i in summary["runs"]] + [record]
    records += tune_linpack(cluster, store, mpi)
    hosts = [h.name for h in cluster.hosts]
    if len(hosts) < 2:
        say("tune tcp: one host only (no virtual cluster): left out")
        return records
    try:
        summary = tcp.tune(cluster, store, hosts[0], hosts[1], None)
    except tcp.BaseFailed as exc:  # the default ping-pong gave no bandwidth: stored, shown
        say(f"tune tcp: {exc}")
        return records + [exc.record]
    record = cli.store_tcp(cluster, store, summary)
    say(cli.tcp_text(summary, record))
    return records + [store.get(i) for i in summary["runs"]] + [record]


def tune_linpack(cluster: Cluster, store: Store, mpi: str) -> list[dict]:
    found = [b.directory.name for b in available_blas()]
    # one host: the virtual hosts share this machine's 2 cores, and a launch inside one
    # namespace starts faster than across four
    tuner = linpack.Tuner(
        cluster,
        store,
        DEMO_LINPACK_NP,
        mpi,
        DEMO_BUDGET_MIN * 60.0,
        timeout=DEMO_TIMEOUT_S,
        hosts=[cluster.hosts[0].name],
        blas_filter=",".join(d for d in found if d not in DEMO_SKIP_BLAS) or None,
    )
    summary = tuner.tune()
    out = DEMO_DIR / "tuned-HPL.dat"
    out.parent.mkdir(parents=True, exist_ok=True)
    linpack.write(out, summary["hpl_dat"])
    record = cli.store_linpack(cluster, store, tuner, summary, out, DEMO_BUDGET_MIN)
    say(cli.text(summary, record, out))
    return [store.get(i) for i in summary["runs"]] + [record]
