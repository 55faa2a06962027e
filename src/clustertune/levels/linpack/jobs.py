"""One ct-linpack or ct-gemm job with the BLAS its caller chose, and the figures derived
from its samples. No choice is made here: run.py resolves the host's default BLAS
(choice.py) first, and choice.py measures the candidates through these jobs.
"""

from __future__ import annotations

from functools import partial

from ... import kernels, runner
from ...cluster import Cluster
from ...results import Store
from ...runner import Derive
from . import GEMM_KERNEL, LEVEL, LINPACK_KERNEL

TIMEOUT_S = 3600.0
PHASES = ("pfact", "bcast", "swap", "update", "wait", "solve")
# one BLAS thread per rank (ranks fill the cores), whichever library runs
BLAS_THREADS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "BLIS_NUM_THREADS": "1"}


# launchers whose hosts are all this machine (a virtual cluster's and grid's are its
# namespaces)
ONE_MACHINE = ("local", "vcluster", "grid")


def machines(cluster: Cluster, np: int) -> int:
    """Physical machines whose memory the ranks share: one for this host, a virtual
    cluster or a virtual grid (namespaces of one machine), else the hosts the ranks land on."""
    if cluster.launcher in ONE_MACHINE:
        return 1
    return max(1, min(np, len(cluster.hosts)))


def derive(samples: list[dict], result: dict | None) -> dict:
    """Summary figures: the best passing rate and the phase maxima of its run."""
    passed = [s for s in samples if s.get("passed") is True]
    if not passed:
        return {}
    best = max(passed, key=lambda s: s["gflops"])
    return {
        "best_variant": best["variant"],
        "best_n": best["n"],
        "phase_max_s": {p: max(best["phases"][p]) for p in PHASES if p in best["phases"]},
        "best_load_imbalance": best.get("load_imbalance"),
    }


def gemm_args(n: str, nb: int, dtypes: str, repeat: int, local: bool, p: int, q: int) -> list[str]:
    kargs = ["-N", n, "--nb", str(nb), "--type", dtypes, "--repeat", str(repeat)]
    return kargs + (["--local"] if local else ["-P", str(p), "-Q", str(q)])


# One LU variant, fixed, for runs that compare machines or show the level (the grid
# comparison, the demo): their times then differ by what the machines do, not by which
# variant the kernel's defaults pick.
FIXED_VARIANT = {"depth": "1", "bcast": "1", "pfact": "R", "rfact": "C", "nbmin": "4", "ndiv": "2"}


def fixed_lu_args(n: int, nb: int, p: int, q: int, *extra: str) -> list[str]:
    """ct-linpack's arguments for an N, NB, P x Q LU of FIXED_VARIANT, its HPL.out on
    stdout; ``extra`` (e.g. a seed) before that."""
    shape = ["-N", str(n), "--nb", str(nb), "-P", str(p), "-Q", str(q)]
    variant = [a for flag, value in FIXED_VARIANT.items() for a in (f"--{flag}", value)]
    return [*shape, *variant, *extra, "--hpl-out", "-"]


def chosen_environment(choice: dict) -> dict[str, str]:
    """The environment a run with ``choice`` gets (its library first on the path, its
    OpenBLAS core named)."""
    env = {"LD_LIBRARY_PATH": choice["directory"]}
    if choice.get("coretype"):
        env["OPENBLAS_CORETYPE"] = choice["coretype"]
    return env


def named(chosen: dict) -> dict:
    """What a run's record says of its BLAS: library, version, core and how it was
    chosen (``measured`` by this run, ``stored`` from an earlier one, ``named``)."""
    return {
        k: chosen.get(k)
        for k in ("name", "label", "directory", "version", "coretype", "how", "dgemm_cpu_gflops")
    }


def run_job(
    kernel: str,
    cluster: Cluster,
    store: Store,
    np: int,
    mpi: str,
    kargs: list[str],
    *,
    timeout: float = TIMEOUT_S,
    env: dict[str, str] | None = None,
    params: dict | None = None,
    derive: Derive | None = None,
    hosts: list[str] | None = None,
    chosen: dict | None = None,
) -> dict:
    """``kernel`` with ``kargs`` on ``np`` ranks, one BLAS thread per rank, the BLAS of
    ``chosen`` (a choice of choice.py) unless ``env`` names one; the stored record. The
    arguments are checked already (checked_job, run.run_blas_kernel)."""
    extra = {"blas_choice": named(chosen)} if chosen else {}
    return runner.run_kernel(
        cluster,
        store,
        level=LEVEL.name,
        kernel=kernel,
        np=np,
        mpi=mpi,
        args=kargs,
        params={"np": np, "args": kargs, **(params or {}), **extra},
        timeout=timeout,
        hosts=hosts,
        env={**BLAS_THREADS, **(chosen_environment(chosen) if chosen else {}), **(env or {})},
        derive=derive,
    )


def checked_job(
    kernel: str, cluster: Cluster, store: Store, np: int, mpi: str, kargs: list[str], **options
) -> dict:
    """run_job after the kernel's own check of its arguments (bad input: one line)."""
    kernels.check_args(kernel, np, mpi, kargs)
    return run_job(kernel, cluster, store, np, mpi, kargs, **options)


# with the BLAS the caller names (choice.py measuring the candidates)
linpack_job = partial(checked_job, LINPACK_KERNEL, derive=derive)
gemm_job = partial(checked_job, GEMM_KERNEL)
