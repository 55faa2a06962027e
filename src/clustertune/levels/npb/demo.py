"""The NPB level's step in ``make demo``: EP and LU (and BT when built), class S, on 1, 2
and 4 ranks of the demo cluster, so the section can draw Mop/s per process against the
rank count; a few seconds each."""

from __future__ import annotations

from ...cluster import Cluster
from ...launch.mpi import default_of
from ...results import Store
from . import AVAILABLE, run

DEMO_CLASS = "S"
DEMO_NPS = {"ep": (1, 2, 4), "lu": (1, 2, 4), "bt": (1, 4)}
DEMO_TIMEOUT_S = 120.0


def demo(cluster: Cluster, store: Store) -> list[dict]:
    mpi = default_of(cluster.mpi)
    return [
        run.run_npb(cluster, store, bench, DEMO_CLASS, np, mpi, timeout=DEMO_TIMEOUT_S)
        for bench in AVAILABLE
        for np in DEMO_NPS[bench]
    ]
