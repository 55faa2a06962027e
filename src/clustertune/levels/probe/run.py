"""Probe: the first kernel, proving the launch chain end to end.

Every rank reports its rank, host and MPI library; the kernel checks that the ranks form
one MPI_COMM_WORLD. Stored like any measurement.
"""

from __future__ import annotations

import argparse
from collections import Counter

from ... import render, runner
from ...cluster import Cluster
from ...commands import Output, add_job_options, cluster_of, open_store, record_output
from ...results import Store
from . import KERNEL, LEVEL

TIMEOUT_S = 120.0


def probe_job(cluster: Cluster, store: Store, np: int, mpi: str, **options) -> dict:
    """ct-probe on ``np`` ranks through the runner, its stored record; ``options``:
    runner.run_kernel's (args, params, hosts, env, timeout)."""
    return runner.run_kernel(
        cluster, store, level=LEVEL.name, kernel=KERNEL, np=np, mpi=mpi, **options
    )


def run_probe(args: argparse.Namespace) -> Output:
    record = probe_job(
        cluster_of(args),
        open_store(args),
        args.np,
        args.mpi,
        hosts=args.hosts,
        params={"np": args.np, "hosts": args.hosts},
        timeout=args.timeout,
        args=["--hang"] if args.hang else [],
    )
    return record_output(record)


def add_commands(sub, common) -> None:
    p = sub.add_parser("probe", parents=[common], help="every rank reports rank, host, MPI")
    add_job_options(p, timeout=TIMEOUT_S)
    p.add_argument("--hang", action="store_true", help="tests: rank 0 waits until killed")
    p.set_defaults(func=run_probe)


def section(records: list[dict]) -> str:
    plt = render.pyplot()
    rows, placements = [], []
    for r in records:
        per_host = Counter(s["host"] for s in r["samples"])
        placements.append(
            (f"run {r['id']} ({(r['meta'].get('mpi') or {}).get('flavour')})", per_host)
        )
        libraries = sorted({s["library"] for s in r["samples"]})
        rows.append(
            [
                r["id"],
                r["meta"]["cluster"]["name"],
                r["meta"].get("np"),
                (r["meta"].get("mpi") or {}).get("flavour"),
                ", ".join(sorted(per_host)),
                "; ".join(libraries),
                r["status"],
                r["verification"],
            ]
        )
    parts = [
        render.table(
            [
                "run",
                "cluster",
                "np",
                "mpi",
                "hosts reached",
                "MPI library",
                "status",
                "verification",
            ],
            rows,
        )
    ]
    hosts = sorted({h for _, per_host in placements for h in per_host})
    if hosts:
        fig, ax = plt.subplots(figsize=(7, 0.5 + 0.35 * len(placements)))
        left = [0] * len(placements)
        for host in hosts:
            counts = [per_host.get(host, 0) for _, per_host in placements]
            ax.barh([label for label, _ in placements], counts, left=left, label=host)
            left = [a + b for a, b in zip(left, counts, strict=True)]
        ax.set_xlabel("ranks")
        ax.set_title("Rank placement per host")
        ax.legend(loc="center left", bbox_to_anchor=(1, 0.5), fontsize="small")
        parts.append(render.svg(fig))
    return "\n".join(parts)


def demo(cluster, store) -> list[dict]:
    """Both MPIs across every host of the demo cluster."""
    np = len(cluster.hosts)
    return [
        probe_job(cluster, store, np, mpi, params={"np": np, "hosts": None}, timeout=TIMEOUT_S)
        for mpi in cluster.mpi
    ]
