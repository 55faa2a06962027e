"""The BLAS every Linpack/GEMM run uses by default: measured once per host, then reused.

The first run that names no BLAS (``--blas auto``, the default) measures every installed
libblas.so.3 and the PyPI OpenBLAS, an OpenBLAS with the core it picks itself and with
each core the CPU's ISA can run (blas.core_variants), with the local DGEMM of ct-gemm,
ranked by its rate in CPU time (gemm.c: a neighbour's load changes it far less than the
wall-clock rate), its entries checked against the generator (a candidate whose product is wrong, or that
loads another library, fails and is never chosen). A screening round at a small order,
then the candidates within FINAL_SHARE of the fastest again at a larger order, in
alternating rounds (the machine may be shared); the fastest is then run through a small
LU with the full scaled-residual check, and the next one taken if that fails. With the
chosen library the rank-K update (ct-gemm --local --k) is measured for the NB candidates:
the DGEMM shape the LU's trailing update runs, from which a default run picks NB.
``clustertune blas compare`` measures the same way (remeasure: every candidate's LU
too, for its table, into the user's database) and stores the choice this implies.

The choice is a fact of the host, so it is stored per user, not per results database
(hostinfo.blas_cache_dir(): blas-choice.json, the measuring runs in blas-choice.db
beside it, named by id): every results database and every test run on this host reuses
it. It is keyed by the CPU model, its ISA flags and each candidate library's version and
file, so a new CPU, a changed library or a newly installed one measures again.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from ... import hostinfo
from ...cluster import Cluster
from ...results import Store
from . import blas as blaslib
from . import jobs, shim

# The measurement's cost is its products (at load 8 on 2 cores a product's wall time is
# ~7x its CPU time) and its launches (~0.5 s each). The screening only has to drop the
# slow libraries (the reference BLAS and ATLAS run at 10-25 % of OpenBLAS): an order-768
# product costs them 0.4x an order-1024 one. The final needs the large order: at 1024
# the AVX2 (Haswell) kernels of OpenBLAS measured level with its AVX-512 ones, at 2048
# 6 % below them (best of 6 at load 9); one product per finalist and round, best of the
# two alternating rounds, instead of two per launch.
SCREEN_N = 768
SCREEN_REPEAT = 2
FINAL_N = 2048
FINAL_REPEAT = 1
# the screening's fastest few, within this share of the fastest, are measured again
FINAL_SHARE = 0.8
FINALISTS = 3
FINAL_ROUNDS = 2
# the LU that checks a candidate's solve (its scaled residual)
CHECK_N, CHECK_NB = 1152, 128
# the rank-K update of the LU's trailing matrix: an order-SHAPE_N product of depth K
SHAPE_N = 2048
SHAPE_KS = (64, 96, 128, 192, 256)
SHAPE_REPEAT = 2
MEASURE_TIMEOUT_S = 300.0


# the DGEMM k-block (kc) of the x86-64 AVX2/AVX-512 kernels of OpenBLAS and BLIS is of
# this order; an NB near it, or a simple fraction of it, keeps the trailing update's
# rank-NB products at the library's own block depth. Not read from the library (no BLAS
# exports it): the candidates around it are measured.
DEFAULT_BLOCK = 256
NB_FLOOR = 32


def available_blas() -> list[blaslib.Blas]:
    """Every installed libblas.so.3 and the PyPI OpenBLAS (shim.py), if installed."""
    pypi = shim.scipy_openblas()
    return blaslib.installed() + ([pypi] if pypi is not None else [])


def candidates() -> list[blaslib.Blas]:
    """Every available BLAS, each OpenBLAS once per core."""
    return blaslib.variants(available_blas())


def key_of(cluster: Cluster, found: list[blaslib.Blas]) -> dict:
    """What the choice depends on: the CPU model and ISA flags (this machine's when the
    ranks run here, the cluster's name too when they run elsewhere), each library's
    version and file, and the candidates (each OpenBLAS core)."""
    cpu = hostinfo.cpu_info()
    libs = {}
    for b in found:
        real = b.library.resolve()
        stat = real.stat()
        libs[str(b.directory)] = {
            "file": str(real),
            "size": stat.st_size,
            "mtime": int(stat.st_mtime),
            "version": blaslib.library_facts(b.library).get("version"),
        }
    # the candidates too: an OpenBLAS core dropped or added is another measurement
    key = {"cpu": cpu["model"], "isa": cpu["isa"], "libraries": libs}
    key["candidates"] = sorted(b.key for b in found)
    if jobs.machines(cluster, 2) > 1:  # the hosts of another machine, measured through it
        key["cluster"] = cluster.name
    return key


def digest(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def cache_file() -> Path:
    return hostinfo.blas_cache_dir() / "blas-choice.json"


def told(env: dict[str, str] | None) -> bool:
    """The caller chose the BLAS: its environment or ``env`` names a library or a core."""
    names = ("LD_LIBRARY_PATH", "OPENBLAS_CORETYPE")
    return any(os.environ.get(k) for k in names[1:]) or any((env or {}).get(k) for k in names)


def resolve(
    cluster: Cluster,
    store: Store,
    np: int,
    mpi: str,
    hosts: list[str] | None,
    log=None,
) -> dict | None:
    """This host's stored choice for the current key, measured first when there is none
    (under a lock: concurrent first runs measure once). None when no candidate passed
    (then the run takes the system's libblas.so.3, as before the choice existed)."""
    found = candidates()
    if not found:
        return None
    key = key_of(cluster, found)
    with _locked() as path:
        stored = hostinfo.blas_choices().get(digest(key))
        if stored is not None:
            return stored | {"how": "stored"}
        (log or _stderr)(f"measuring the BLAS candidates of this host ({len(found)}), once")
        measuring = Store(path.with_suffix(".db"))
        try:
            return _measure_and_store(key, cluster, measuring, found, np, mpi, hosts)
        finally:
            measuring.close()


def remeasure(
    cluster: Cluster,
    store: Store,
    np: int,
    mpi: str,
    hosts: list[str] | None,
    **how,
) -> dict | None:
    """Every candidate measured now into ``store`` (``blas compare``: the caller's
    database) and the choice this implies stored for the current key, replacing the
    stored one; ``how``: measure()'s options. None when no candidate passed."""
    found = candidates()
    if not found:
        return None
    with _locked():
        return _measure_and_store(
            key_of(cluster, found), cluster, store, found, np, mpi, hosts, **how
        )


@contextmanager
def _locked() -> Iterator[Path]:
    """The choice file's lock held (one measurement at a time); the file's path."""
    path = cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield path


def _measure_and_store(
    key: dict,
    cluster: Cluster,
    store: Store,
    found: list[blaslib.Blas],
    np: int,
    mpi: str,
    hosts: list[str] | None,
    **how,
) -> dict | None:
    """measure(), its choice stored under ``key``; the caller holds the lock."""
    chosen = measure(cluster, store, found, np, mpi, hosts, **how)
    if chosen is None:
        return None
    chosen |= {"key": key, "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write(hostinfo.blas_choices() | {digest(key): chosen})
    return chosen | {"how": "measured"}


def forget(cluster: Cluster) -> None:
    """Drop the stored choice for the current key (``blas choose --again``)."""
    if not cache_file().exists():
        return
    with _locked():
        rest = hostinfo.blas_choices()
        rest.pop(digest(key_of(cluster, candidates())), None)
        write(rest)


def write(choices: dict) -> None:
    """The cache file replaced at once (readers never see half of it); under the lock."""
    path = cache_file()
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(choices, indent=1, sort_keys=True))
    os.replace(tmp, path)


def _stderr(line: str) -> None:
    print(f"clustertune: {line}", file=sys.stderr)


def measure(
    cluster: Cluster,
    store: Store,
    found: list[blaslib.Blas],
    np: int,
    mpi: str,
    hosts: list[str] | None,
    *,
    every_lu: bool = False,
    final_n: int | None = None,
    lu_n: int | None = None,
    lu_nb: int | None = None,
    tag: dict | None = None,
    timeout: float | None = None,
    runs: list[dict] | None = None,
    rank_k: bool = True,
) -> dict | None:
    """The fastest candidate whose DGEMM and LU pass their checks, with its version, the
    rates of all and the rank-K rates; None when none passed. ``blas compare`` measures
    the same way with ``every_lu`` (the LU of every candidate whose DGEMM passed, for its
    table, not only until one passes), its own orders (``final_n`` the final DGEMM's,
    ``lu_n`` and ``lu_nb`` the LU's), ``tag`` (more params of every run: its comparison's id),
    and ``runs``, to which every record measured is appended; without ``rank_k`` (a
    choice not to be stored) the rank-K rates are not measured."""
    final_n = final_n or FINAL_N
    screen_n = min(SCREEN_N, final_n)
    lu_args = ["-N", str(lu_n or CHECK_N), "--nb", str(lu_nb or CHECK_NB)]
    timeout = timeout or MEASURE_TIMEOUT_S
    made = runs if runs is not None else []
    # the ranks of one machine fill its cores at most (a DGEMM rank per core)
    ranks = min(np, os.cpu_count() or np) if jobs.machines(cluster, np) == 1 else np
    excluded: dict[str, str] = {}

    def job(run, b: blaslib.Blas, stage: str, kargs: list[str], derive) -> dict:
        said = {"name": b.label, "directory": str(b.directory), "key": b.key}
        params = {"blas_measure": b.key, "blas_stage": stage, "blas": said, **(tag or {})}
        options = {"timeout": timeout, "env": blaslib.environment(b), "hosts": hosts}
        made.append(run(cluster, store, ranks, mpi, kargs, params=params, derive=derive, **options))
        return made[-1]

    def dgemm(b: blaslib.Blas, stage: str, n: int, repeat: int, *extra: str) -> dict:
        kargs = jobs.gemm_args(str(n), 192, "d", repeat, True, 1, ranks) + [*extra]
        return job(jobs.gemm_job, b, stage, kargs, blaslib.library_check(b))

    def rate(b: blaslib.Blas, stage: str, n: int, repeat: int) -> float | None:
        record = dgemm(b, stage, n, repeat)
        if record["status"] != "ok":
            excluded[b.key] = f"ct-gemm: {blaslib.failure(record)}"
            return None
        return best_cpu_rate(record)

    started = time.monotonic()
    screen = {
        b.key: r for b in found if (r := rate(b, "screen", screen_n, SCREEN_REPEAT)) is not None
    }
    by_key = {b.key: b for b in found}
    top = max(screen.values(), default=0.0)
    finalists = sorted(
        (k for k, r in screen.items() if r >= FINAL_SHARE * top), key=lambda k: -screen[k]
    )[:FINALISTS]
    final: dict[str, float] = {}
    for round_ in range(FINAL_ROUNDS if len(finalists) > 1 else 0):
        for k in finalists if round_ % 2 == 0 else finalists[::-1]:
            if k in excluded:
                continue
            r = rate(by_key[k], "final", final_n, FINAL_REPEAT)
            if r is not None:
                final[k] = max(final.get(k, 0.0), r)
    # the finalists by their final rate, then the others by their screening rate: the
    # first whose LU passes is the choice
    order = sorted(final, key=lambda k: -final[k])
    order += sorted((k for k in screen if k not in final), key=lambda k: -screen[k])
    winner: tuple[blaslib.Blas, dict] | None = None  # the choice and its passing LU
    for k in (k for k in order if k not in excluded):
        if winner is not None and not every_lu:
            break
        b = by_key[k]
        lu_kargs = [*lu_args, "-P", "1", "-Q", str(ranks), "--hpl-out", "-"]
        lu_run = job(jobs.linpack_job, b, "lu", lu_kargs, blaslib.library_check(b, jobs.derive))
        if lu_run["status"] != "ok":
            excluded[k] = f"ct-linpack: {blaslib.failure(lu_run)}"
        elif winner is None:
            winner = b, lu_run
    if winner is None:
        return None
    chosen, checked = winner
    ks = ",".join(map(str, SHAPE_KS))
    shape = dgemm(chosen, "shape", SHAPE_N, SHAPE_REPEAT, "--k", ks) if rank_k else None
    rates = {"screen_n": screen_n, "final_n": final_n, "screen": screen, "final": final}
    return {
        "name": chosen.name,
        "label": chosen.label,
        "directory": str(chosen.directory),
        "coretype": chosen.coretype,
        "version": blaslib.library_facts(chosen.library).get("version"),
        "library": str(chosen.library.resolve()),
        "ranks": ranks,
        "dgemm_cpu_gflops": final.get(chosen.key, screen[chosen.key]),
        "rates": rates,
        "rank_k_gflops": rank_k_rates(shape) if shape else {},
        "excluded": excluded,
        "runs": {"db": str(store.path), "lu": checked["id"], "shape": shape and shape["id"]},
        "seconds": round(time.monotonic() - started, 1),
    }


def cpu_rate(sample: dict) -> float:
    """A ct-gemm --local product's rate by the CPU time of its ranks (the wall-clock
    rate when the kernel did not say): at load 8 on 2 cores the wall-clock rates of one
    core ran 18-25 Gflop/s over a minute, the CPU-time rates 100-105."""
    if not sample.get("passed"):
        return 0.0
    return sample.get("cpu_gflops") or sample["gflops"]


def best_cpu_rate(record: dict) -> float:
    """The best cpu_rate of a ct-gemm --local launch's products (0 when none passed)."""
    return max((cpu_rate(s) for s in record.get("samples", [])), default=0.0)


def rank_k_rates(record: dict) -> dict[str, float]:
    """The best rate of each depth K of a ct-gemm --k launch (passing products only)."""
    best: dict[str, float] = {}
    for s in record["samples"]:
        if s.get("passed") and "k" in s:
            best[str(s["k"])] = max(best.get(str(s["k"]), 0.0), cpu_rate(s))
    return best


# the LU's flops outside the trailing update (panel factorisation) are ~3 NB / 4N of all
# of them and run at a fraction of the update's rate (narrow, memory-bound): taken as a
# quarter, an NB costs the update's rate a factor 1 + PANEL_COST NB / N
PANEL_COST = 3.0


def nb_candidates(block: int, n_half_bytes: float | None, n: int) -> list[int]:
    """NB candidates: fractions of the BLAS's k-blocking (3/8, 1/2, 3/4, 1: an NB of
    the block depth or a divisor wastes no pass of the library's kernel), multiples of
    32, kept where a panel block (NB x NB doubles) is at least the network's half-
    bandwidth message size n_half (smaller blocks travel latency-bound) and where the
    problem has at least 4 blocks per dimension."""
    cands = sorted({max(NB_FLOOR, round(block * f / 32) * 32) for f in (0.375, 0.5, 0.75, 1.0)})
    if n_half_bytes:
        floor = math.sqrt(n_half_bytes / 8.0)
        kept = [nb for nb in cands if nb >= floor]
        cands = kept or cands[-1:]
    fits = [nb for nb in cands if 4 * nb <= n]
    return fits or cands[:1]


def network_n_half(store: Store, cluster: str) -> float | None:
    """n_half (bytes) of the latest ok MPI ping-pong stored for ``cluster``."""
    for r in reversed(store.list("network")):
        if (
            r["status"] == "ok"
            and r["meta"].get("cluster", {}).get("name") == cluster
            and r["params"].get("layer") == "mpi"
            and r["figures"].get("n_half_bytes")
        ):
            return float(r["figures"]["n_half_bytes"])
    return None


def pick_nb(rank_k: dict[str, float], allowed: list[int], n: int) -> int | None:
    """The NB among ``allowed`` with the best estimated LU rate at order ``n``: the
    measured rate of the rank-NB update (the trailing update's DGEMM shape) over
    1 + PANEL_COST NB / n (larger blocks make the update faster and the panel dearer).
    None without a measured rate for any of them."""
    rates = {nb: rank_k[str(nb)] for nb in allowed if str(nb) in rank_k}
    if not rates:
        return None
    return max(rates, key=lambda nb: rates[nb] / (1.0 + PANEL_COST * nb / max(n, 1)))


def told_choice(wanted: str) -> dict:
    """``--blas NAME[:CORE]``: an installed library by name or directory (the PyPI
    OpenBLAS too), with the OpenBLAS core named, not measured."""
    name, _, core = wanted.partition(":")
    plain = {b.key: replace(b, coretype=None) for b in candidates()}
    lib = blaslib.select(name, list(plain.values()))[0]
    facts = blaslib.library_facts(lib.library)
    return {
        "name": lib.name,
        "label": replace(lib, coretype=core or None).label,
        "directory": str(lib.directory),
        "coretype": core or None,
        "version": facts.get("version"),
        "how": "named",
    }
