"""Running the two kernels: ct-linpack (HPL-equivalent LU) and ct-gemm (SUMMA / local GEMM).

``clustertune linpack`` runs ct-linpack on a cluster from an HPL.dat or from flags and
stores the record; ``clustertune gemm`` does the same for ct-gemm. Definitions of every
figure (Gflops, scaled residual, phases, load imbalance) are in docs/linpack.md; the
kernel computes them, this module only derives summaries from its samples.
"""

from __future__ import annotations

import argparse
import math
from functools import partial
from pathlib import Path

from ... import kernels, ranktimes
from ...cluster import Cluster
from ...commands import Output, cluster_of, open_store, record_output
from ...errors import UserError
from ...hostinfo import memory_bytes
from ...results import Store
from . import GEMM_KERNEL, LINPACK_KERNEL, choice, jobs
from . import blas as blaslib
from .jobs import TIMEOUT_S as TIMEOUT_S  # the commands' default, named here too
from .jobs import derive, gemm_args, machines

# what every result line carries (the issue's JSON contract)
RESULT_KEYS = ("variant", "n", "nb", "p", "q", "time_s", "gflops", "residual", "passed")
# flag of ct-linpack for each list option of the CLI
LIST_FLAGS = {
    "n": "-N",
    "nb": "--nb",
    "p": "-P",
    "q": "-Q",
    "pfact": "--pfact",
    "rfact": "--rfact",
    "nbmin": "--nbmin",
    "ndiv": "--ndiv",
    "bcast": "--bcast",
    "depth": "--depth",
}


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


def results(record: dict) -> list[dict]:
    return [{k: s.get(k) for k in RESULT_KEYS} for s in record["samples"] if "variant" in s]


def verdict(passed: object) -> str:
    """The residual check of one combination; a negative threshold skips it."""
    return "PASSED" if passed is True else "FAILED" if passed is False else "not checked"


def measured(passed: object, value: float, spec: str) -> str:
    """A time or rate as text, or "-" in its width when its check FAILED: a number that
    failed verification is not a result (its residual and verdict say why)."""
    text = format(value, spec)
    return "-".rjust(len(text)) if passed is False else text


def residual_text(residual: object) -> str:
    """The kernel writes a NaN or infinite residual (a blown-up solve) as null."""
    return f"{residual:.4g}" if isinstance(residual, int | float) else "n/a"


def blas_line(record: dict) -> list[str]:
    """The BLAS a run used by default, as its record names it (none when told)."""
    said = record.get("params", {}).get("blas_choice")
    if not said:
        return []
    core = record["detail"].get("blas", {}).get("core") or said.get("coretype") or "-"
    return [
        f"  BLAS {said['label']}: {said.get('version') or '-'}; core that ran {core} "
        f"({said.get('how')} choice of this host)"
    ]


def text(record: dict) -> str:
    lines = [f"run {record['id']}: {record['status']}, verification {record['verification']}"]
    lines += blas_line(record)
    for what, picked in record.get("params", {}).get("defaults", {}).items():
        lines.append(f"  {what} {picked['value']}: {picked['from']}")
    for r in results(record):
        lines.append(
            f"  {r['variant']:<10} N={r['n']:<7} NB={r['nb']:<4} {r['p']}x{r['q']:<3} "
            f"{measured(r['passed'], r['time_s'], '9.2f')} s "
            f"{measured(r['passed'], r['gflops'], '10.3f')} Gflops  "
            f"resid {residual_text(r['residual'])} {verdict(r['passed'])}"
        )
    for skipped in record["detail"].get("skipped", []):
        lines.append(f"  skipped: {skipped}")
    for warning in record["detail"].get("warnings", []):
        lines.append(f"  warning: {warning}")
    lines += ranktimes.text_end(record)
    return "\n".join(lines)


def run_blas_kernel(
    kernel: str,
    cluster: Cluster,
    store: Store,
    np: int,
    mpi: str,
    kargs: list[str],
    *,
    blas: str = "auto",
    chosen: dict | None = None,
    **options,
) -> dict:
    """``kernel`` (ct-linpack or ct-gemm) with ``kargs`` on ``np`` ranks, one BLAS thread
    per rank, after the kernel's own argument check; the stored record. The BLAS is
    ``blas`` (blas_choice) unless ``options["env"]`` or the caller's environment names a
    library or an OpenBLAS core; ``chosen`` is a choice the caller resolved already.
    ``options``: jobs.run_job's (timeout, env, params, derive, hosts)."""
    kernels.check_args(kernel, np, mpi, kargs)
    if chosen is None and not choice.told(options.get("env")):
        chosen = blas_choice(cluster, store, np, mpi, options.get("hosts"), blas)
    return jobs.run_job(kernel, cluster, store, np, mpi, kargs, chosen=chosen, **options)


def blas_choice(
    cluster: Cluster, store: Store, np: int, mpi: str, hosts: list[str] | None, blas: str
) -> dict | None:
    """``--blas``: ``auto`` the host's measured choice (choice.resolve; measured on the
    first run), ``system`` the system's libblas.so.3 as it picks its core (None), else
    ``NAME[:CORE]`` an installed library by name or directory, an OpenBLAS core."""
    if blas == "system":
        return None
    if blas == "auto":
        return choice.resolve(cluster, store, np, mpi, hosts)
    return choice.told_choice(blas)


run_linpack = partial(run_blas_kernel, LINPACK_KERNEL, derive=derive)
run_gemm = partial(run_blas_kernel, GEMM_KERNEL)


def gemm_text(record: dict) -> str:
    lines = [f"run {record['id']}: {record['status']}, verification {record['verification']}"]
    lines += blas_line(record)
    lines += [
        f"  {s['dtype']} {s['mode']} N={s['n']} {s['p']}x{s['q']} "
        f"{measured(bool(s['passed']), s['gflops'], '10.3f')} Gflops {verdict(bool(s['passed']))}"
        for s in record["samples"]
    ]
    if record["error"]:
        lines.append(f"  error: {record['error']}")
    return "\n".join(lines)


def default_shape(
    args: argparse.Namespace, cluster: Cluster, store: Store, chosen: dict | None
) -> dict:
    """NB and P x Q for a run that names neither (nor an HPL.dat), set on ``args``; what
    was picked and from what. NB: among the candidates (fractions of the BLAS's k-block,
    above the network's n_half when a ping-pong of this cluster is stored:
    choice.nb_candidates) the best by the measured rank-NB update of the chosen BLAS
    (the trailing update's DGEMM shape) and the panel's cost at N (choice.pick_nb); with
    --mem-fraction N is taken as large. P x Q: 1 x np
    when every rank is on one machine (the panel's pivot search then needs no message),
    else the squarest P <= Q (HPL's advice)."""
    picked: dict = {}
    if args.dat:
        return picked
    if args.nb is None:
        n = int(str(args.n or "1000").split(",")[0]) if args.mem_fraction is None else 1 << 20
        n_half = choice.network_n_half(store, cluster.name)
        allowed = choice.nb_candidates(choice.DEFAULT_BLOCK, n_half, n)
        nb = choice.pick_nb((chosen or {}).get("rank_k_gflops") or {}, allowed, n)
        if nb is not None:
            args.nb = str(nb)
            net = f", n_half {n_half:.0f} B" if n_half else ""
            picked["nb"] = {
                "value": nb,
                "from": f"rank-K DGEMM of {chosen['label']} among {allowed}{net}",
            }
    if args.p is None and args.q is None:
        one = machines(cluster, args.np) == 1
        p, q = (1, args.np) if one else blaslib.grid(args.np)
        args.p, args.q = str(p), str(q)
        picked["grid"] = {
            "value": [p, q],
            "from": "one machine: 1 x np" if one else "squarest P <= Q",
        }
    return picked


def cmd_linpack(args: argparse.Namespace) -> Output:
    cluster = cluster_of(args)
    # the user's flags checked before anything runs (the first run measures the BLAS)
    kernels.check_args(LINPACK_KERNEL, args.np, args.mpi, kernel_args(args, cluster))
    store = open_store(args)
    chosen = (
        None
        if choice.told(None)
        else blas_choice(cluster, store, args.np, args.mpi, args.hosts, args.blas)
    )
    picked = default_shape(args, cluster, store, chosen)
    kargs = kernel_args(args, cluster)
    record = run_linpack(
        cluster,
        store,
        args.np,
        args.mpi,
        kargs,
        timeout=args.timeout,
        hosts=args.hosts,
        chosen=chosen,
        blas=args.blas if chosen else "system",
        params={"defaults": picked} if picked else None,
    )
    return record_output(record, text(record), dict(record, results=results(record)))


def cmd_gemm(args: argparse.Namespace) -> Output:
    p = args.p or 1
    kargs = gemm_args(
        args.n, args.nb, args.type, args.repeat, args.local, p, args.q or max(1, args.np // p)
    )
    record = run_gemm(
        cluster_of(args),
        open_store(args),
        args.np,
        args.mpi,
        kargs,
        timeout=args.timeout,
        hosts=args.hosts,
        blas=args.blas,
    )
    return record_output(record, gemm_text(record))
