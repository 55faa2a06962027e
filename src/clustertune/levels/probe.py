"""Probe: the first kernel, proving the launch chain end to end.

Every rank reports its rank, host and MPI library; the kernel checks that the ranks form
one MPI_COMM_WORLD. Stored like any measurement.
"""

from __future__ import annotations

import argparse
from collections import Counter

from .. import report, runner
from ..cli import Output, open_store, record_output
from ..cluster import resolve_cluster

ORDER = 10
LEVEL = "probe"
KERNEL = "ct-probe"
TIMEOUT_S = 120.0


def run_probe(args: argparse.Namespace) -> Output:
    cluster = resolve_cluster(args.cluster)
    hosts = args.hosts.split(",") if args.hosts else None
    record = runner.run_kernel(
        cluster, open_store(args), level=LEVEL, kernel=KERNEL, np=args.np, mpi=args.mpi,
        hosts=hosts, params={"np": args.np, "hosts": hosts}, timeout=args.timeout,
    )  # fmt: skip
    return record_output(record)


def add_commands(sub, run_sub, common) -> None:
    p = run_sub.add_parser("probe", parents=[common], help="every rank reports rank, host, MPI")
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--mpi", choices=("openmpi", "mpich"), default="openmpi")
    p.add_argument("--hosts", help="comma-separated hosts to place ranks on (round-robin)")
    p.add_argument(
        "--timeout", type=float, default=TIMEOUT_S, help="seconds before the job is killed"
    )
    p.set_defaults(func=run_probe)


@report.section(LEVEL, "Launch chain (probe)", order=10)
def render(records: list[dict]) -> str:
    plt = report.pyplot()
    rows, placements = [], []
    for r in records:
        per_host = Counter(s["host"] for s in r["samples"])
        placements.append(
            (f"run {r['id']} ({(r['meta'].get('mpi') or {}).get('flavour')})", per_host)
        )
        libraries = sorted({s["library"] for s in r["samples"]})
        rows.append(
            [r["id"], r["meta"]["cluster"]["name"], r["meta"].get("np"),
             (r["meta"].get("mpi") or {}).get("flavour"), ", ".join(sorted(per_host)),
             "; ".join(libraries), r["status"], r["verification"]]
        )  # fmt: skip
    parts = [
        report.table(
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
        parts.append(report.svg(fig))
    return "\n".join(parts)


def demo(cluster, store) -> list[dict]:
    """Both MPIs across every host of the demo cluster."""
    np = len(cluster.hosts)
    return [
        runner.run_kernel(
            cluster,
            store,
            level=LEVEL,
            kernel=KERNEL,
            np=np,
            mpi=mpi,
            params={"np": np, "hosts": None},
            timeout=TIMEOUT_S,
        )  # fmt: skip
        for mpi in cluster.mpi
    ]
