"""The Linpack level's step in ``make demo``: a small LU, the GEMM in four types (SUMMA,
also at the LU's order), and the local DGEMM rate (% of peak), all on the demo cluster in
well under 60 s."""

from __future__ import annotations

from ...cluster import Cluster
from ...launch.mpi import default_of
from ...results import Store
from . import jobs, run

DEMO_NP = 4
DEMO_N = 2016  # 21 blocks of 96
DEMO_NB = 96
DEMO_GEMM_N = 1000
DEMO_TIMEOUT_S = 120.0


def demo(cluster: Cluster, store: Store) -> list[dict]:
    mpi = default_of(cluster.mpi)
    lu = jobs.fixed_lu_args(DEMO_N, DEMO_NB, 2, 2)
    # SUMMA at the LU's order too: the 4 ranks share 2 CPUs, so the first screen reads
    # the LU against the DGEMM that communicates on the same grid (summary.lu_row)
    summa = run.gemm_args(f"{DEMO_GEMM_N},{DEMO_N}", DEMO_NB, "sdcz", 1, False, 2, 2)
    peak = run.gemm_args(str(DEMO_GEMM_N), DEMO_NB, "d", 1, True, 1, DEMO_NP)
    return [
        run.run_linpack(cluster, store, DEMO_NP, mpi, lu, timeout=DEMO_TIMEOUT_S),
        run.run_gemm(cluster, store, DEMO_NP, mpi, summa, timeout=DEMO_TIMEOUT_S),
        run.run_gemm(cluster, store, DEMO_NP, mpi, peak, timeout=DEMO_TIMEOUT_S),
    ]
