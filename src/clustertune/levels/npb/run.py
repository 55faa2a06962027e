"""Running the NPB kernels and reading their records.

``clustertune npb ep|lu|bt --class X --np N`` asks the kernel itself (``--check-only``)
whether the class runs on N ranks, so a bad count is one line naming the allowed ones
(exit 2) before anything is launched; then one MPI job, one record. The kernel computes
every figure (contract in docs/npb.md); this module renders NPB's familiar text from the
record and keeps no figure of its own.
"""

from __future__ import annotations

import argparse

from ... import ranktimes, runner
from ...cluster import Cluster
from ...commands import Output, cluster_of, open_store, record_output
from ...errors import UserError
from ...kernels import check_args
from ...results import Store
from . import AVAILABLE, KERNELS, LEVEL

CLASSES = ("S", "W", "A", "B", "C")
TIMEOUT_S = 3600.0


def kernel_of(bench: str) -> str:
    if bench not in AVAILABLE:
        raise UserError(
            f"npb {bench}: {bench.upper()} is not built in this version of clustertune "
            f"(available: {', '.join(AVAILABLE)})"
        )
    return KERNELS[bench]


def kernel_args(cls: str, inject_fault: bool = False, dt: float | None = None) -> list[str]:
    if cls not in CLASSES:
        raise UserError(f"--class: expected one of {', '.join(CLASSES)}, got {cls!r}")
    out = ["--class", cls] + (["--dt", repr(dt)] if dt is not None else [])
    return out + (["--inject-fault"] if inject_fault else [])


def check_np(kernel: str, np: int, mpi: str, kargs: list[str]) -> None:
    """The kernel's own rule for the class and rank count, run without MPI before anything
    is launched: one line naming the allowed counts, exit 2."""
    if np < 1:
        raise UserError(f"--np: expected a positive number of ranks, got {np}")
    check_args(kernel, np, mpi, kargs)  # the same --check-only call as ct-linpack's


def run_npb(
    cluster: Cluster,
    store: Store,
    bench: str,
    cls: str,
    np: int,
    mpi: str,
    *,
    inject_fault: bool = False,
    timeout: float = TIMEOUT_S,
    hosts: list[str] | None = None,
    dt: float | None = None,
) -> dict:
    """One NPB benchmark of one class on ``np`` ranks; the stored record. ``dt``: LU's or
    BT's time step instead of the class's (the kernel then fails verification, as NPB)."""
    kernel = kernel_of(bench)
    kargs = kernel_args(cls, inject_fault, dt)
    check_np(kernel, np, mpi, kargs)
    params = {"benchmark": bench.upper(), "class": cls, "np": np, "inject_fault": inject_fault}
    if dt is not None:
        params["dt"] = dt
    return runner.run_kernel(
        cluster,
        store,
        level=LEVEL.name,
        kernel=kernel,
        np=np,
        mpi=mpi,
        args=kargs,
        params=params,
        timeout=timeout,
        hosts=hosts,
    )


def size_text(figures: dict) -> str:
    size = figures.get("size") or []
    if len(size) == 3:
        return "x".join(f"{n:4d}" for n in size)
    return str(size[0]) if size else "-"


def failed(record: dict) -> str | None:
    """What stands where a run's times and rates would be when it is not ok (a run that
    fails verification is reported as failed, never as a number); None for an ok run."""
    if record["status"] == "ok":
        return None
    why = "verification" if record["verification"] == "failed" else record["status"]
    return f"FAILED ({why})"


def npb_text(record: dict) -> str:
    """NPB's result block (print_results), rendered from the record."""
    f = record["figures"]
    if "benchmark" not in f:
        return ""
    # "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4"
    mpi = (record["detail"].get("mpi_library") or "-").split(",")[0]
    fail = failed(record)
    rows = [
        ("Class", f["class"]),
        ("Size", size_text(f)),
        ("Iterations", f["iterations"]),
        ("Time in seconds", fail or f"{f['time_s']:.2f}"),
        ("Total processes", f["np"]),
        ("Mop/s total", fail or f"{f['mops_total']:.2f}"),
        ("Mop/s/process", fail or f"{f['mops_per_process']:.2f}"),
        ("Operation type", f["op_type"]),
        ("Verification", "SUCCESSFUL" if f["verified"] else "UNSUCCESSFUL"),
        ("MPI", mpi),
    ]
    lines = [f" {f['benchmark']} Benchmark Completed."]
    lines += [f" {k:<16}= {v!s:>24}" for k, v in rows]
    return "\n".join(lines)


def number(value: object, spec: str = ">24.15e") -> str:
    """A compared value; the kernel writes a NaN (a blown-up run) as null."""
    if isinstance(value, int | float):
        if float(value).is_integer() and abs(value) < 2**53 and spec.endswith("15e"):
            return f"{int(value):>24d}"  # a count
        return format(value, spec)
    return f"{'n/a':>24}" if spec.endswith("15e") else "n/a"


def text(record: dict) -> str:
    f = record["figures"]
    head = f"run {record['id']}: {f.get('name', record['kernel'])} {record['status']}, "
    head += f"verification {record['verification']}"
    lines = [head]
    block = npb_text(record)
    if block:
        lines += ["", block, ""]
        for c in f.get("compared", []):
            mark = "ok" if c.get("passed") else "FAILED"
            lines.append(
                f"  {c['name']:<16} {number(c['value'])}  ref {number(c['reference'])}"
                f"  rel.err {number(c['rel_error'], '.2e')}  {mark}"
            )
        if f.get("dt_ok") is False:
            lines.append(
                f"  dt {f['dt']:g} is not class {f['class']}'s {f['dt_reference']:g}: "
                "not verifiable (NPB's class U)  FAILED"
            )
        if not failed(record):
            lines.append(
                f"  computation {f['comp_time_s']:.3f} s, communication {f['comm_time_s']:.3f}"
                f" s (max over ranks); {f['messages_per_iteration']:.0f} messages, "
                f"{f['bytes_per_iteration']:.0f} bytes per iteration (all ranks)"
            )
    lines += ranktimes.text_end(record)
    return "\n".join(lines)


def cmd_npb(args: argparse.Namespace) -> Output:
    cluster = cluster_of(args)
    record = run_npb(
        cluster,
        open_store(args),
        args.benchmark,
        args.cls,
        args.np,
        args.mpi,
        inject_fault=args.inject_fault,
        timeout=args.timeout,
        hosts=args.hosts,
        dt=args.dt,
    )
    return record_output(record, text(record))
