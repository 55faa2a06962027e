"""The Linpack level's study step kinds (clustertune.studies): the LU, the GEMM and the
BLAS comparison."""

from __future__ import annotations

from ...cluster import Cluster
from ...errors import UserError
from ...results import Store
from ...studies import kinds


def _linpack(cluster: Cluster, store: Store, v: dict, mpi: str) -> list[dict]:
    from . import run

    v = dict(v)
    if "pq" in v:  # seeds/000 table 5: "2x4"
        text = str(v.pop("pq"))
        try:
            v["p"], v["q"] = (int(x) for x in text.lower().split("x"))
        except ValueError:
            raise UserError(f"pq: expected PxQ such as 2x4, got {text!r}") from None
    kargs: list[str] = []
    for key, flag in run.LIST_FLAGS.items():
        if key in v:
            kargs += [flag, str(v[key])]
    kargs += ["--seed", str(kinds.integer(v, "seed", 42)), "--hpl-out", "-"]
    env = kinds.tcp_buffer_env(mpi, v["tcp_buffer"]) if "tcp_buffer" in v else None
    hosts = v.get("hosts")
    if hosts is not None:
        if not isinstance(hosts, list) or not hosts:
            raise UserError(f"hosts: expected a list of host names, got {hosts!r}")
        for host in hosts:
            cluster.host(host)
    record = run.run_linpack(
        cluster,
        store,
        kinds.integer(v, "np", 2),
        mpi,
        kargs,
        env=env,
        hosts=hosts,
        timeout=float(v.get("timeout", run.TIMEOUT_S)),
    )
    return [record]


def _gemm(cluster: Cluster, store: Store, v: dict, mpi: str) -> list[dict]:
    from . import run

    np = kinds.integer(v, "np", 2)
    p = kinds.integer(v, "p", 1)
    kargs = run.gemm_args(
        str(v.get("n", 1000)),
        kinds.integer(v, "nb", 192),
        str(v.get("type", "sdcz")),
        kinds.integer(v, "repeat", 1),
        bool(v.get("local", False)),
        p,
        kinds.integer(v, "q", max(1, np // p)),
    )
    return [
        run.run_gemm(cluster, store, np, mpi, kargs, timeout=float(v.get("timeout", run.TIMEOUT_S)))
    ]


def _blas(cluster: Cluster, store: Store, v: dict, mpi: str) -> list[dict]:
    from . import blas, choice, compare

    records, _ = compare.compare(
        cluster,
        store,
        blas.select(v.get("blas"), choice.available_blas()),
        np=kinds.integer(v, "np", 2),
        mpi=mpi,
        n=kinds.integer(v, "n", 2000),
        nb=kinds.integer(v, "nb", 128),
        gemm_n=kinds.integer(v, "gemm_n", 1000),
    )
    return records


def _blas_count(v: dict) -> int:
    """At least one record per library (its screening DGEMM); how many more depends on
    the rates (which are measured again, which LUs run)."""
    from . import blas, choice

    return len(blas.select(v.get("blas"), choice.available_blas()))


KINDS = (
    kinds.Kind(
        "linpack",
        "linpack",
        frozenset(
            {
                "np",
                "n",
                "nb",
                "p",
                "q",
                "pq",
                "pfact",
                "rfact",
                "nbmin",
                "ndiv",
                "bcast",
                "depth",
                "seed",
                "timeout",
                "hosts",
                "tcp_buffer",
            }
        ),
        _linpack,
        "linpack: ct-linpack (HPL-equivalent LU)",
        figure="samples.gflops",
    ),
    kinds.Kind(
        "gemm",
        "linpack",
        frozenset({"np", "n", "nb", "p", "q", "type", "repeat", "local", "timeout"}),
        _gemm,
        "gemm: ct-gemm in 1-4 types",
    ),
    kinds.Kind(
        "blas",
        "linpack",
        frozenset({"np", "n", "nb", "gemm_n", "blas"}),
        _blas,
        "blas compare: DGEMM and the LU with each installed BLAS",
        _blas_count,
    ),
)
