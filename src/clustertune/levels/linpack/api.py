"""What other levels use of the Linpack level (the tuner, the grid's comparison): its
kernels and runs, the BLAS candidates and checks, and the NB candidates of a default run.
Import it as ``from ..linpack import api as linpack``; the level's other modules are its own.
"""

from . import LINPACK_KERNEL
from .blas import Blas, environment, failure, installed, library_check, select, variants
from .choice import (
    DEFAULT_BLOCK,
    available_blas,
    best_cpu_rate,
    nb_candidates,
    network_n_half,
    pick_nb,
)
from .jobs import BLAS_THREADS, TIMEOUT_S, derive, fixed_lu_args, gemm_args, machines
from .run import n_for_memory, run_gemm, run_linpack

__all__ = [
    "BLAS_THREADS",
    "DEFAULT_BLOCK",
    "LINPACK_KERNEL",
    "TIMEOUT_S",
    "Blas",
    "available_blas",
    "best_cpu_rate",
    "derive",
    "environment",
    "failure",
    "fixed_lu_args",
    "gemm_args",
    "installed",
    "library_check",
    "machines",
    "n_for_memory",
    "nb_candidates",
    "network_n_half",
    "pick_nb",
    "run_gemm",
    "run_linpack",
    "select",
    "variants",
]
