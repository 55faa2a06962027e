"""``clustertune blas compare``: DGEMM and the LU with each installed BLAS (seeds/002 fig.
12), and ``clustertune blas choose``: the host's default BLAS (choice.py)."""

from __future__ import annotations

import argparse
import uuid

from ...cluster import Cluster
from ...commands import Output, add_job_options, cluster_of, open_store
from ...errors import UserError
from ...results import Store
from . import choice, run
from .blas import (
    LIBDIR,
    Blas,
    environment,
    failure,
    grid,
    installed,
    library_check,
    select,
    variants,
)


def compare(
    cluster: Cluster,
    store: Store,
    blases: list[Blas],
    *,
    np: int,
    mpi: str,
    n: int,
    nb: int,
    gemm_n: int,
    timeout: float = run.TIMEOUT_S,
    hosts: list[str] | None = None,
) -> list[dict]:
    """DGEMM (every rank its own product: the aggregate rate, the LU's peak) and the LU
    with each BLAS, an OpenBLAS with each of its cores (core_variants); one stored
    record per BLAS x kernel, returned in that order."""
    batch = uuid.uuid4().hex[:12]
    p, q = grid(np)
    records = []
    for blas in variants(blases):
        env = environment(blas)
        params = {
            "blas": {"name": blas.label, "directory": str(blas.directory), "key": blas.key},
            "compare": batch,
        }
        gemm = run.gemm_args(str(gemm_n), nb, "d", 1, True, 1, np)
        lu = ["-N", str(n), "--nb", str(nb), "-P", str(p), "-Q", str(q), "--hpl-out", "-"]
        for job, kargs, derive in (
            (run.run_gemm, gemm, library_check(blas)),
            (run.run_linpack, lu, library_check(blas, run.derive)),
        ):
            options = {"timeout": timeout, "env": env, "params": params, "hosts": hosts}
            records.append(job(cluster, store, np, mpi, kargs, derive=derive, **options))
    return records


def rows(records: list[dict]) -> list[dict]:
    """One row per BLAS: library, kernel name, DGEMM and LU rates, residual verdict."""
    table: dict[str, dict] = {}
    for r in records:
        blas = r["params"]["blas"]
        row = table.setdefault(
            blas.get("key", blas["directory"]),
            {
                "blas": blas["name"],
                "directory": blas["directory"],
                "library": None,
                "core": None,
                "dgemm_gflops": None,
                "lu_gflops": None,
                "residual": None,
                "check": None,
                "failed": [],
            },
        )
        detail = r["detail"].get("blas", {})
        row["library"] = row["library"] or detail.get("library")
        row["core"] = row["core"] or detail.get("core") or detail.get("config")
        if r["status"] != "ok":
            row["failed"].append(f"{r['kernel']}: {failure(r)}")
        if r["kernel"] == "ct-gemm":
            row["dgemm_gflops"] = (
                r["figures"].get("best_dgemm_gflops") if r["status"] == "ok" else None
            )
        else:
            lu = run.results(r)
            if lu:
                row["lu_gflops"] = lu[0]["gflops"]
                row["residual"] = lu[0]["residual"]
            row["check"] = (
                "PASSED" if r["verification"] == "passed" and r["status"] == "ok" else "FAILED"
            )
        row.setdefault("runs", []).append(r["id"])
    return list(table.values())


def text(table: list[dict]) -> str:
    def num(v: float | None) -> str:
        return f"{v:.2f}" if v is not None else "-"

    lines = [
        f"{'BLAS':<18} {'library':<58} {'kernel':<12} {'DGEMM Gflops':>12} "
        f"{'LU Gflops':>10} {'% DGEMM':>8}  residual"
    ]
    for row in table:
        pct = (
            100 * row["lu_gflops"] / row["dgemm_gflops"]
            if row["lu_gflops"] and row["dgemm_gflops"]
            else None
        )
        resid = f"{row['residual']:.4g} " if row["residual"] is not None else ""
        lines.append(
            f"{row['blas']:<18} {row['library'] or str(row['directory']):<58} "
            f"{row['core'] or '-':<12} {num(row['dgemm_gflops']):>12} {num(row['lu_gflops']):>10} "
            f"{num(pct):>8}  {resid}{row['check'] or 'FAILED'}"
        )
        lines += [f"    failed: {reason}" for reason in row["failed"]]
    return "\n".join(lines)


def cmd_compare(args: argparse.Namespace) -> Output:
    cluster = cluster_of(args)
    blases = select(args.blas, installed())
    if not blases:
        raise UserError(f"no libblas.so.3 found under {LIBDIR} (install libopenblas0, ...)")
    records = compare(
        cluster,
        open_store(args),
        blases,
        np=args.np,
        mpi=args.mpi,
        n=args.n,
        nb=args.nb,
        gemm_n=args.gemm_n,
        timeout=args.timeout,
        hosts=args.hosts,
    )
    table = rows(records)
    failed = any(row["failed"] for row in table)
    payload = {"blas": table, "runs": [r["id"] for r in records]}
    return Output(payload, text(table), 1 if failed else 0)


def cmd_choose(args: argparse.Namespace) -> Output:
    """The host's default BLAS (choice.py): the stored one, or measured now; --again
    measures anew."""
    cluster = cluster_of(args)
    if args.again:
        choice.forget(cluster)
    chosen = choice.resolve(cluster, open_store(args), args.np, args.mpi, args.hosts)
    if chosen is None:
        raise UserError("no BLAS passed its checks here (see the runs in the choice's store)")
    rates = chosen.get("rates", {})
    lines = [
        f"{chosen['label']}: {chosen['version']} ({chosen['how']}"
        f"{', ' + chosen['measured'] if 'measured' in chosen else ''})"
    ]
    for key, rate in sorted(
        (rates.get("final") or rates.get("screen") or {}).items(), key=lambda kv: -kv[1]
    ):
        lines.append(f"  {key:<70} {rate:8.1f} Gflop/s (DGEMM by CPU time)")
    lines += [f"  excluded {key}: {why}" for key, why in chosen.get("excluded", {}).items()]
    return Output(chosen, "\n".join(lines), 0)


def add_commands(sub, common) -> None:
    b = sub.add_parser("blas", help="BLAS libraries: compare, choose")
    bsub = b.add_subparsers(dest="blas_command", required=True)
    c = bsub.add_parser("compare", parents=[common], help="DGEMM and LU with every installed BLAS")
    add_job_options(c, timeout=run.TIMEOUT_S)
    c.add_argument("-N", dest="n", type=int, default=4000, help="LU order")
    c.add_argument("--nb", type=int, default=192)
    c.add_argument("--gemm-n", type=int, default=2000, help="order of each rank's DGEMM")
    c.add_argument("--blas", help="only these (names or directories, comma-separated)")
    c.set_defaults(func=cmd_compare)
    h = bsub.add_parser(
        "choose",
        parents=[common],
        help="this host's default BLAS: the stored choice, or measured now",
    )
    add_job_options(h, timeout=run.TIMEOUT_S)
    h.add_argument("--again", action="store_true", help="measure anew")
    h.set_defaults(func=cmd_choose)
