"""The QCD level's step in ``make demo``: an 8^4 lattice on a 2x2x1x1 grid (cold start,
plaquette from exactly 1 towards 0.59), and the decomposition study of four processes
(1-D and 2-D grids, the plaquette series bitwise the same on both), well under a minute."""

from __future__ import annotations

from ...cluster import Cluster
from ...launch.mpi import default_of
from ...results import Store
from . import run, study

DEMO_NP = 4
DEMO_LATTICE = (8, 8, 8, 8)
DEMO_TIMEOUT_S = 120.0


def demo(cluster: Cluster, store: Store) -> list[dict]:
    mpi = default_of(cluster.mpi)
    spec = run.QcdSpec(lattice=DEMO_LATTICE, grid=(2, 2, 1, 1), beta=6.0, sweeps=5)
    first = run.run_qcd(cluster, store, spec, np=DEMO_NP, mpi=mpi, timeout=DEMO_TIMEOUT_S)
    return [first] + study.run_study(
        cluster,
        store,
        np=DEMO_NP,
        mpi=mpi,
        lattice=DEMO_LATTICE,
        dims=[1, 2],
        sweeps=2,
        timeout=DEMO_TIMEOUT_S,
    )
