"""Running ct-stream and reading its records.

``clustertune stream --np N`` is one MPI job, one record: every rank runs STREAM's Copy,
Scale, Add and Triad on its own arrays, the ranks in step (kernels/stream/stream.c).
``--sweep`` runs every rank count from 1 to N, one record each, for the bandwidth-versus-
ranks curve of the report. The kernel checks its own flags first (``--check-only``), so a
bad value is one line before anything is launched, and computes every figure; this module
only renders STREAM's familiar table from the record.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from ... import ranktimes, runner
from ...cluster import Cluster
from ...commands import Output, cluster_of, open_store
from ...errors import UserError
from ...kernels import check_args
from ...results import Store
from . import KERNEL, LEVEL

LOOPS = ("copy", "scale", "add", "triad")
TIMEOUT_S = 600.0
CACHE_TIMES = 4  # STREAM's rule: each array at least 4 x the last-level caches


@dataclass(frozen=True)
class StreamSpec:
    """What ct-stream is asked; None: the kernel's default."""

    n: int | None = None  # elements per array and rank (default: from the caches)
    cache: str | None = None  # the last-level caches of a host, "32M" (default: sysfs)
    ntimes: int | None = None  # repetitions of the four loops (kernel default 10)
    inject_fault: bool = False  # tests: one element off, the run must fail verification

    def args(self) -> list[str]:
        out = ["--n", str(self.n)] if self.n is not None else []
        out += ["--cache", self.cache] if self.cache is not None else []
        out += ["--ntimes", str(self.ntimes)] if self.ntimes is not None else []
        return out + (["--inject-fault"] if self.inject_fault else [])

    def params(self) -> dict:
        return {
            "n": self.n,
            "cache": self.cache,
            "ntimes": self.ntimes,
            "inject_fault": self.inject_fault,
        }


def check(spec: StreamSpec, np: int, mpi: str) -> list[str]:
    """The kernel's arguments, checked by the kernel itself without MPI: one line, exit 2."""
    if np < 1:
        raise UserError(f"--np: expected a positive number of ranks, got {np}")
    kargs = spec.args()
    check_args(KERNEL, np, mpi, kargs)
    return kargs


def run_stream(
    cluster: Cluster,
    store: Store,
    np: int,
    mpi: str,
    spec: StreamSpec = StreamSpec(),
    *,
    hosts: list[str] | None = None,
    timeout: float = TIMEOUT_S,
) -> dict:
    """One ct-stream job on ``np`` ranks; the stored record."""
    (record,) = run_sweep(cluster, store, [np], mpi, spec, hosts=hosts, timeout=timeout)
    return record


def run_sweep(
    cluster: Cluster,
    store: Store,
    nps: list[int],
    mpi: str,
    spec: StreamSpec = StreamSpec(),
    *,
    hosts: list[str] | None = None,
    timeout: float = TIMEOUT_S,
) -> list[dict]:
    """One record per rank count, every count checked before the first job starts."""
    kargs = [check(spec, np, mpi) for np in nps]
    return [
        runner.run_kernel(
            cluster,
            store,
            level=LEVEL.name,
            kernel=KERNEL,
            np=np,
            mpi=mpi,
            args=args,
            params={"np": np, **spec.params()},
            timeout=timeout,
            hosts=hosts,
        )
        for np, args in zip(nps, kargs, strict=True)
    ]


def failed(record: dict) -> str | None:
    """What stands where the rates would be when a run is not ok (a run that failed
    verification is reported as failed, never as a number); None for an ok run."""
    if record["status"] == "ok" and "triad_gb_s" in record["figures"]:
        return None
    why = "verification" if record["verification"] == "failed" else record["status"]
    return f"FAILED ({why})"


def in_cache(figures: dict) -> str | None:
    """STREAM's warning: arrays too small for the caches measure the caches, not memory."""
    over = figures.get("arrays_over_llc")
    if over is None or over >= CACHE_TIMES or not figures.get("llc_bytes"):
        return None
    return (
        f"arrays {over:.2g} x the last-level cache (STREAM asks for >= {CACHE_TIMES}): "
        "these rates are partly the cache's"
    )


def samples_by_loop(record: dict) -> dict[str, dict]:
    return {s["loop"]: s for s in record["samples"] if s.get("loop") in LOOPS}


def text(record: dict) -> str:
    """STREAM's table (best rate, average, min and max time per loop) from the record,
    then the ranks' and hosts' shares."""
    f = record["figures"]
    head = f"run {record['id']}: {KERNEL} {record['status']}, verification {record['verification']}"
    lines = [head]
    if "n" in f:
        lines.append(
            f"  {f['ranks']} rank(s) on {f['hosts']} host(s), arrays of {f['n']} doubles "
            f"({f['array_bytes'] / 2**20:.0f} MiB) per rank, "
            f"{f['arrays_over_llc']:.1f} x the last-level cache of the busiest host"
        )
    if fail := failed(record):
        lines.append(f"  {fail}")
        if "max_rel_error" in f:
            lines.append(f"  largest relative error {f['max_rel_error']:.3g} (at most 1e-13)")
    else:
        loops = samples_by_loop(record)
        lines.append(
            f"  {'Function':<9}{'Best GB/s':>11}{'Avg time':>11}{'Min time':>11}"
            f"{'Max time':>11}{'per rank (min/mean/max GB/s)':>32}"
        )
        for name in LOOPS:
            s = loops[name]
            st = s["rank_stats"]
            lines.append(
                f"  {name.capitalize() + ':':<9}{s['gb_s']:>11.2f}{s['avg_s']:>11.5f}"
                f"{s['best_s']:>11.5f}{s['max_s']:>11.5f}"
                f"{st['min']:>14.2f} /{st['mean']:>6.2f} /{st['max']:>6.2f}"
            )
        if f["hosts"] > 1:
            for h in loops["triad"]["per_host"]:
                lines.append(f"  Triad on {h['host']}: {h['gb_s']:.2f} GB/s ({h['ranks']} ranks)")
        if warning := in_cache(f):
            lines.append(f"  note: {warning}")
    if times := ranktimes.text(record):
        lines.append(times)
    if record["error"]:
        lines.append(f"  error: {record['error']}")
    return "\n".join(lines)


def cmd_stream(args: argparse.Namespace) -> Output:
    cluster = cluster_of(args)
    spec = StreamSpec(
        n=args.n, cache=args.cache, ntimes=args.ntimes, inject_fault=args.inject_fault
    )
    nps = list(range(1, args.np + 1)) if args.sweep else [args.np]
    records = run_sweep(
        cluster,
        open_store(args),
        nps,
        args.mpi,
        spec,
        hosts=args.hosts,
        timeout=args.timeout,
    )
    bad = any(r["status"] != "ok" for r in records)
    payload = records if args.sweep else records[0]
    return Output(payload, "\n\n".join(text(r) for r in records), 1 if bad else 0)
