"""The STREAM level's step in ``make demo``: every rank count from 1 to the cores of the
cluster, the ranks spread over its hosts by the launcher, so the section can draw the
bandwidth against the ranks and each host's share; arrays of the default size (4 x the
last-level caches), a few seconds a run."""

from __future__ import annotations

from ...cluster import Cluster
from ...launch.mpi import default_of
from ...results import Store
from . import run

DEMO_TIMEOUT_S = 120.0


def step(cluster: Cluster, store: Store) -> list[dict]:
    cores = sum(h.cores for h in cluster.hosts)
    nps = list(range(1, cores + 1))
    return run.run_sweep(cluster, store, nps, default_of(cluster.mpi), timeout=DEMO_TIMEOUT_S)
