"""The I/O level's step in ``make demo``: netCDF collective and independent write and read
of 16^3 and 64^3 ints on 2 ranks, beside raw MPI-IO, every file checked; a few seconds."""

from __future__ import annotations

from ...cluster import Cluster
from ...results import Store
from . import LEVEL, netcdf

DEMO_NP = 2
DEMO_SIZES = [16, 64]
DEMO_REPS = 5
DEMO_TIMEOUT_S = 120.0


@LEVEL.demo_step
def demo(cluster: Cluster, store: Store) -> list[dict]:
    if "openmpi" not in cluster.mpi:  # Debian's PnetCDF exists for OpenMPI only
        return []
    return [
        netcdf.measure(cluster, store, np=DEMO_NP, mpi="openmpi", sizes=DEMO_SIZES, mode="both",
                       ops=["write", "read"], fmt="cdf1", reps=DEMO_REPS,
                       timeout=DEMO_TIMEOUT_S)
    ]  # fmt: skip
