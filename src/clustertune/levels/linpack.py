"""Linpack level: the HPL-equivalent LU (ct-linpack) and the SUMMA GEMM (ct-gemm).

``clustertune linpack`` runs ct-linpack on a cluster from an HPL.dat or from flags and
stores the record; ``clustertune gemm`` does the same for ct-gemm. Definitions of every
figure (Gflops, scaled residual, phases, load imbalance) are in docs/linpack.md; the
kernel computes them, this module only derives summaries from its samples.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from .. import report, runner
from ..cli import Output, open_store
from ..cluster import Cluster, resolve_cluster
from ..errors import UserError
from ..hostinfo import memory_bytes

ORDER = 40
LEVEL = "linpack"
GEMM_LEVEL = "gemm"
TIMEOUT_S = 3600.0
# what every result line carries (the JSON contract)
RESULT_KEYS = ("variant", "n", "nb", "p", "q", "time_s", "gflops", "residual", "passed")
PHASES = ("pfact", "bcast", "swap", "update", "wait", "solve")
# flag of ct-linpack for each list option of the CLI
LIST_FLAGS = {
    "n": "-N", "nb": "--nb", "p": "-P", "q": "-Q", "pfact": "--pfact", "rfact": "--rfact",
    "nbmin": "--nbmin", "ndiv": "--ndiv", "bcast": "--bcast", "depth": "--depth",
}  # fmt: skip


def machines(cluster: Cluster, np: int) -> int:
    """Physical machines whose memory the ranks share: one for this host or a virtual
    cluster (namespaces of one machine), else the hosts the ranks land on."""
    if cluster.launcher in ("local", "vcluster"):
        return 1
    return max(1, min(np, len(cluster.hosts)))


def n_for_memory(fraction: float, total_bytes: int, nb: int) -> int:
    """Largest N, a multiple of NB, whose N x (N+1) doubles fit ``fraction`` of memory."""
    if not 0.0 < fraction <= 1.0:
        raise UserError(f"--mem-fraction must be in (0, 1], got {fraction}")
    n = int(math.sqrt(fraction * total_bytes / 8.0))
    while n > 0 and 8.0 * n * (n + 1) > fraction * total_bytes:
        n -= 1
    return max(nb, n // nb * nb)


def kernel_args(args: argparse.Namespace, cluster: Cluster) -> list[str]:
    out: list[str] = []
    if args.dat:
        if not Path(args.dat).is_file():
            raise UserError(f"HPL.dat not found: {args.dat}")
        out += ["--dat", str(Path(args.dat).resolve())]
    if args.mem_fraction is not None:
        memory = memory_bytes()
        if memory is None:
            raise UserError("--mem-fraction: cannot read this host's memory size")
        nb = int(str(args.nb or "192").split(",")[0])
        args.n = str(n_for_memory(args.mem_fraction, memory * machines(cluster, args.np), nb))
    for key, flag in LIST_FLAGS.items():
        value = getattr(args, key)
        if value is not None:
            out += [flag, str(value)]
    if args.pmap:
        out += ["--pmap", args.pmap]
    if args.swap is not None:
        out += ["--swap", str(args.swap)]
    if args.swap_threshold is not None:
        out += ["--swap-threshold", str(args.swap_threshold)]
    if args.threshold is not None:
        out += ["--threshold", str(args.threshold)]
    if args.inject_fault:
        out.append("--inject-fault")
    out += ["--seed", str(args.seed), "--hpl-out", "-"]
    return out


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


def results(record: dict) -> list[dict]:
    return [{k: s.get(k) for k in RESULT_KEYS} for s in record["samples"] if "variant" in s]


def text(record: dict) -> str:
    lines = [f"run {record['id']}: {record['status']}, verification {record['verification']}"]
    for r in results(record):
        verdict = "PASSED" if r["passed"] is True else "FAILED" if r["passed"] is False else "-"
        lines.append(
            f"  {r['variant']:<10} N={r['n']:<7} NB={r['nb']:<4} {r['p']}x{r['q']:<3} "
            f"{r['time_s']:9.2f} s {r['gflops']:10.3f} Gflops  resid {r['residual']:.4g} {verdict}"
        )
    for skipped in record["detail"].get("skipped", []):
        lines.append(f"  skipped: {skipped}")
    for warning in record["detail"].get("warnings", []):
        lines.append(f"  warning: {warning}")
    if record["error"]:
        lines.append(f"  error: {record['error']}")
    return "\n".join(lines)


def cmd_linpack(args: argparse.Namespace) -> Output:
    cluster = resolve_cluster(args.cluster)
    kargs = kernel_args(args, cluster)
    record = runner.run_kernel(
        cluster, open_store(args), level=LEVEL, kernel="ct-linpack", np=args.np, mpi=args.mpi,
        args=kargs, params={"np": args.np, "args": kargs}, timeout=args.timeout,
        env={"OPENBLAS_NUM_THREADS": "1"}, derive=derive,
    )  # fmt: skip
    payload = dict(record, results=results(record))
    return Output(payload, text(record), 0 if record["status"] == "ok" else 1)


def cmd_gemm(args: argparse.Namespace) -> Output:
    cluster = resolve_cluster(args.cluster)
    kargs = ["-N", args.n, "--nb", str(args.nb), "--type", args.type, "--repeat", str(args.repeat)]
    if args.local:
        kargs.append("--local")
    else:
        kargs += ["-P", str(args.p or 1), "-Q", str(args.q or args.np // (args.p or 1))]
    record = runner.run_kernel(
        cluster, open_store(args), level=GEMM_LEVEL, kernel="ct-gemm", np=args.np, mpi=args.mpi,
        args=kargs, params={"np": args.np, "args": kargs}, timeout=args.timeout,
        env={"OPENBLAS_NUM_THREADS": "1"},
    )  # fmt: skip
    lines = [f"run {record['id']}: {record['status']}, verification {record['verification']}"]
    lines += [
        f"  {s['dtype']} {s['mode']} N={s['n']} {s['p']}x{s['q']} {s['gflops']:10.3f} Gflops "
        f"{'PASSED' if s['passed'] else 'FAILED'}"
        for s in record["samples"]
    ]
    return Output(record, "\n".join(lines), 0 if record["status"] == "ok" else 1)


def add_commands(sub, run_sub, common) -> None:
    p = sub.add_parser("linpack", parents=[common], help="HPL-equivalent distributed LU")
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--mpi", choices=("openmpi", "mpich"), default="openmpi")
    p.add_argument("--dat", help="HPL.dat to run (flags below override its lists)")
    p.add_argument("-N", dest="n", help="problem sizes, comma-separated")
    p.add_argument("--nb", help="block sizes")
    p.add_argument("-P", dest="p", help="process rows (paired with -Q)")
    p.add_argument("-Q", dest="q", help="process columns")
    p.add_argument("--pmap", choices=("row", "col"))
    p.add_argument("--pfact", help="L, C, R")
    p.add_argument("--rfact", help="L, C, R")
    p.add_argument("--nbmin")
    p.add_argument("--ndiv")
    p.add_argument("--bcast", help="0=1ring 1=1ringM 2=2ring 3=2ringM 4=long 5=longM")
    p.add_argument("--depth", help="look-ahead depths")
    p.add_argument("--swap", type=int, choices=(0, 1, 2), help="bin-exch, long, mix")
    p.add_argument("--swap-threshold", type=int)
    p.add_argument("--threshold", type=float, help="residual threshold (negative: no check)")
    p.add_argument("--mem-fraction", type=float, help="N: largest fitting this memory share")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--inject-fault", action="store_true", help="tests: the check must FAIL")
    p.add_argument("--timeout", type=float, default=TIMEOUT_S)
    p.set_defaults(func=cmd_linpack)

    g = sub.add_parser("gemm", parents=[common], help="distributed SUMMA GEMM, 4 data types")
    g.add_argument("--np", type=int, default=2)
    g.add_argument("--mpi", choices=("openmpi", "mpich"), default="openmpi")
    g.add_argument("-N", dest="n", default="1000", help="sizes, comma-separated")
    g.add_argument("--nb", type=int, default=192)
    g.add_argument("-P", dest="p", type=int)
    g.add_argument("-Q", dest="q", type=int)
    g.add_argument("--type", default="sdcz", help="any of s, d, c, z")
    g.add_argument("--repeat", type=int, default=1)
    g.add_argument("--local", action="store_true", help="each rank alone: the xGEMM rate")
    g.add_argument("--timeout", type=float, default=TIMEOUT_S)
    g.set_defaults(func=cmd_gemm)


@report.section(LEVEL, "Application level: Linpack", order=40)
def render(records: list[dict]) -> str:
    rows, points = [], []
    for r in records:
        for s in r["samples"]:
            if "variant" not in s:
                continue
            rows.append(
                [r["id"], s["variant"], s["n"], s["nb"], f"{s['p']}x{s['q']}",
                 f"{s['time_s']:.2f}", f"{s['gflops']:.3f}", f"{s['residual']:.4g}",
                 "PASSED" if s["passed"] is True else "FAILED"]
            )  # fmt: skip
            points.append(s)
    parts = [
        report.table(
            ["run", "T/V", "N", "NB", "PxQ", "time s", "Gflops", "residual", "check"], rows
        )
    ]
    good = [s for s in points if s["passed"] is True]
    if good:
        plt = report.pyplot()
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.6))
        for np_ in sorted({s["p"] * s["q"] for s in good}):
            pts = sorted((s["n"], s["gflops"]) for s in good if s["p"] * s["q"] == np_)
            ax1.plot([x for x, _ in pts], [y for _, y in pts], "o-", label=f"np={np_}")
        ax1.set_xlabel("N")
        ax1.set_ylabel("Gflops")
        ax1.set_title("Gflops vs N")
        ax1.legend(fontsize="small")
        shown = good[-6:]
        left = [0.0] * len(shown)
        labels = [f"{s['variant']} N={s['n']} {s['p']}x{s['q']}" for s in shown]
        for phase in PHASES:
            vals = [max(s["phases"].get(phase, [0.0])) for s in shown]
            ax2.barh(labels, vals, left=left, label=phase)
            left = [a + b for a, b in zip(left, vals, strict=True)]
        ax2.set_xlabel("seconds (max over ranks)")
        ax2.set_title("Per-phase breakdown")
        ax2.legend(fontsize="small", loc="lower right")
        fig.tight_layout()
        parts.append(report.svg(fig))
    return "\n".join(parts)
