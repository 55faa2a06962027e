"""``clustertune blas compare``: DGEMM and the LU with each BLAS (seeds/002 fig. 12),
measured as the host's choice measures them (choice.measure), the choice they imply
stored; and ``clustertune blas choose``: the host's default BLAS (choice.py)."""

from __future__ import annotations

import argparse
import uuid

from ...cluster import Cluster
from ...commands import Output, add_job_options, cluster_of, open_store
from ...errors import UserError
from ...results import Store
from . import choice, run
from .blas import LIBDIR, Blas, failure, select, variants


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
    store_choice: bool = False,
) -> tuple[list[dict], dict | None]:
    """Each of ``blases`` (an OpenBLAS once per core) measured as the host's choice
    measures the candidates (choice.measure: the checked DGEMM by CPU time, screened,
    the fastest again at order ``gemm_n``), with the LU (order ``n``, NB ``nb``, its
    residual checked) of every one whose DGEMM passed. The records, in the order run
    (params ``blas``, ``blas_stage`` and ``compare``, this comparison's id), and the choice
    they imply (the first by DGEMM rate whose LU passed; None when none did), which
    ``store_choice`` (``blases`` are every available BLAS) stores as the host's choice."""
    runs: list[dict] = []
    how = {
        "every_lu": True,
        "final_n": gemm_n,
        "lu_n": n,
        "lu_nb": nb,
        "tag": {"compare": uuid.uuid4().hex[:12]},
        "timeout": timeout,
        "runs": runs,
        "rank_k": store_choice,  # what a default run's NB needs, only for a stored choice
    }
    if store_choice:
        chosen = choice.remeasure(cluster, store, np, mpi, hosts, **how)
    else:
        chosen = choice.measure(cluster, store, variants(blases), np, mpi, hosts, **how)
    return runs, chosen


def rows(records: list[dict]) -> list[dict]:
    """One row per BLAS: library, kernel name, DGEMM rate at the largest order measured
    (by the wall clock, as the LU's; and by CPU time, the rate the choice ranks by), LU
    rate, residual verdict."""
    table: dict[str, dict] = {}
    for r in records:
        if r["params"].get("blas_stage") == "shape":  # the rank-K products, for NB
            continue
        blas = r["params"]["blas"]
        row = table.setdefault(
            blas.get("key", blas["directory"]),
            {
                "blas": blas["name"],
                "directory": blas["directory"],
                "library": None,
                "core": None,
                "dgemm_gflops": None,
                "dgemm_cpu_gflops": None,
                "dgemm_n": 0,
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
            order = max((s.get("n", 0) for s in r["samples"]), default=0)
            if r["status"] == "ok" and order >= row["dgemm_n"]:
                wall = max((s["gflops"] for s in r["samples"] if s.get("passed")), default=0.0)
                rates = {"dgemm_gflops": wall, "dgemm_cpu_gflops": choice.best_cpu_rate(r)}
                for field, rate in rates.items():
                    same = order == row["dgemm_n"] and row[field] is not None
                    row[field] = max(rate, row[field]) if same else rate
                row["dgemm_n"] = order
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

    wide = max([18, *(len(row["blas"]) for row in table)])  # labels name the core
    lines = [
        f"{'BLAS':<{wide}} {'library':<58} {'kernel':<12} {'DGEMM Gflops':>12} {'by CPU':>7} "
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
            f"{row['blas']:<{wide}} {row['library'] or str(row['directory']):<58} "
            f"{row['core'] or '-':<12} {num(row['dgemm_gflops']):>12} "
            f"{num(row['dgemm_cpu_gflops']):>7} {num(row['lu_gflops']):>10} "
            f"{num(pct):>8}  {resid}{row['check'] or 'FAILED'}"
        )
        lines += [f"    failed: {reason}" for reason in row["failed"]]
    return "\n".join(lines)


def cmd_compare(args: argparse.Namespace) -> Output:
    cluster = cluster_of(args)
    available = choice.available_blas()
    blases = select(args.blas, available)
    if not blases:
        raise UserError(f"no libblas.so.3 found under {LIBDIR} (install libopenblas0, ...)")
    # only a comparison of every candidate says which is the host's best
    complete = set(blases) == set(available)
    records, chosen = compare(
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
        store_choice=complete,
    )
    table = rows(records)
    failed = any(row["failed"] for row in table)
    lines = [text(table)]
    ranks = records[0]["meta"]["np"] if records else args.np
    if ranks != args.np:  # choice.measure: one rank per CPU of one machine at most
        lines.insert(0, f"on {ranks} ranks (--np {args.np}: one per CPU of this machine)")
    if chosen is None:
        lines.append("no BLAS passed its checks: no choice stored")
    elif complete:
        lines.append(f"chosen: {chosen['label']}, stored as this host's default BLAS (--blas auto)")
    else:
        lines.append(f"best of these: {chosen['label']}; not stored (--blas named a subset)")
    payload = {
        "blas": table,
        "runs": [r["id"] for r in records],
        "choice": chosen,
        "stored": bool(chosen) and complete,
    }
    return Output(payload, "\n".join(lines), 1 if failed else 0)


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
    c = bsub.add_parser(
        "compare",
        parents=[common],
        help="DGEMM and LU with every BLAS; stores the host's choice they imply",
    )
    add_job_options(c, timeout=run.TIMEOUT_S)
    c.add_argument("-N", dest="n", type=int, default=choice.CHECK_N, help="LU order")
    c.add_argument("--nb", type=int, default=choice.CHECK_NB)
    c.add_argument(
        "--gemm-n",
        type=int,
        default=choice.FINAL_N,
        help="order of each rank's DGEMM (the fastest again; screened at the smaller of "
        f"{choice.SCREEN_N} and this)",
    )
    c.add_argument(
        "--blas",
        help="only these (names or directories, comma-separated; no choice is stored)",
    )
    c.set_defaults(func=cmd_compare)
    h = bsub.add_parser(
        "choose",
        parents=[common],
        help="this host's default BLAS: the stored choice, or measured now",
    )
    add_job_options(h, timeout=run.TIMEOUT_S)
    h.add_argument("--again", action="store_true", help="measure anew")
    h.set_defaults(func=cmd_choose)
