"""The tuning level's step in ``make demo`` (well under a minute on 2 cores): the QCD
decomposition for 8^4 on 4 ranks (two classes of grids, two sweeps per run) and the TCP
socket buffer between the first two hosts. ``tune linpack`` is not in the demo: its BLAS
stage alone (every installed library, an OpenBLAS with two cores) takes 20-60 s here."""

from __future__ import annotations

import sys

from ...cluster import Cluster
from ...errors import UserError
from ...results import Store
from . import LEVEL, cli, qcd, tcp

DEMO_NP = 4
DEMO_LATTICE = (8, 8, 8, 8)
DEMO_TIMEOUT_S = 120.0


def say(text: str) -> None:
    for line in text.splitlines():
        print(f"[demo] {line}", file=sys.stderr, flush=True)


@LEVEL.demo_step
def demo(cluster: Cluster, store: Store) -> list[dict]:
    mpi = "openmpi" if "openmpi" in cluster.mpi else cluster.mpi[0]
    records: list[dict] = []
    summary = qcd.tune(cluster, store, lattice=DEMO_LATTICE, np=DEMO_NP, mpi=mpi, sweeps=2,
                       timeout=DEMO_TIMEOUT_S)  # fmt: skip
    record = cli.store_qcd(cluster, store, summary, 2)
    say(cli.qcd_text(summary, record))
    records += [store.get(i) for i in summary["runs"]] + [record]
    hosts = [h.name for h in cluster.hosts]
    if len(hosts) < 2:
        say("tune tcp: one host only (no virtual cluster): left out")
        return records
    try:
        summary = tcp.tune(cluster, store, hosts[0], hosts[1], None)
    except UserError as exc:  # the default ping-pong gave no bandwidth: stored, shown
        say(f"tune tcp: {exc}")
        return records
    record = cli.store_tcp(cluster, store, summary)
    say(cli.tcp_text(summary, record))
    return records + [store.get(i) for i in summary["runs"]] + [record]
