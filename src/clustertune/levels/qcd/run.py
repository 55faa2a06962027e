"""``clustertune qcd``: ct-qcd on a cluster, its record and its text.

The kernel checks its own arguments (``--check-only``, before anything is launched): a
lattice the grid does not divide, a grid whose product is not --np, an odd global extent
(the even/odd checkerboard), beta <= 0, a checkpoint that does not match. The figures are
the kernel's (docs/qcd.md defines each); this module adds the plaquette series.
"""

from __future__ import annotations

import argparse
import itertools
import math
from dataclasses import dataclass
from pathlib import Path

from ... import ranktimes, runner
from ...cluster import Cluster
from ...commands import Output, cluster_of, open_store, record_output
from ...errors import UserError
from ...kernels import check_args
from ...results import Store
from . import KERNEL, LEVEL, flops

TIMEOUT_S = 1800.0
AXES = "xyzt"


def parse_dims(text: str, flag: str) -> tuple[int, int, int, int]:
    """``8x8x8x8`` -> (8, 8, 8, 8); a UserError naming the flag otherwise."""
    parts = text.lower().split("x")
    if len(parts) != 4 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise UserError(f"{flag}: expected four positive extents such as 8x8x8x8, got {text!r}")
    a, b, c, d = (int(p) for p in parts)
    return a, b, c, d


def dims_text(dims: tuple[int, ...] | list[int]) -> str:
    return "x".join(str(d) for d in dims)


def split_dims(grid: tuple[int, ...] | list[int]) -> int:
    """How many directions a grid splits (the paper's 1-, 2-, 3-, 4-dimensional)."""
    return sum(1 for g in grid if g > 1)


def grids(np: int, lattice: tuple[int, ...]) -> list[tuple[int, int, int, int]]:
    """Every np1 x np2 x np3 x np4 = np that divides the lattice."""
    divisors = [d for d in range(1, np + 1) if np % d == 0]
    return [
        g
        for g in itertools.product(divisors, repeat=4)
        if math.prod(g) == np and all(n % p == 0 for n, p in zip(lattice, g, strict=True))
    ]


def halo_sites(lattice: tuple[int, ...], grid: tuple[int, ...]) -> float:
    """Boundary sites a rank sends per exchange round: the surface of its block in the
    split directions (what a decomposition costs in bytes)."""
    local = [n // p for n, p in zip(lattice, grid, strict=True)]
    volume = math.prod(local)
    return sum(2 * volume / local[d] for d in range(4) if grid[d] > 1)


def default_grid(lattice: tuple[int, ...], np: int) -> tuple[int, int, int, int]:
    """The grid with the least halo surface; ties go to fewer split directions (fewer
    messages), then to splitting t, then z, ... first."""
    found = grids(np, lattice)
    if not found:
        raise UserError(
            f"--np: no np1xnp2xnp3xnp4 grid of {np} processes divides the lattice "
            f"{dims_text(lattice)}"
        )
    return min(found, key=lambda g: (halo_sites(lattice, g), split_dims(g), g))


@dataclass
class QcdSpec:
    """One ct-qcd run, as the user asked for it."""

    lattice: tuple[int, int, int, int]
    grid: tuple[int, int, int, int]
    beta: float = 6.0
    sweeps: int = 10
    or_steps: int = 4
    start: str = "cold"
    seed: int | None = None
    checkpoint: str | None = None
    resume: str | None = None
    overlap: bool = True
    inject_fault: bool = False
    isa: str = "auto"  # "baseline": the x86-64 build of the update even on AVX2 CPUs

    def kernel_args(self) -> list[str]:
        if self.sweeps < 0:
            raise UserError(f"--sweeps: must be >= 0, got {self.sweeps}")
        if self.or_steps < 0:
            raise UserError(f"--or-steps: must be >= 0, got {self.or_steps}")
        if not self.beta > 0:
            raise UserError(f"--beta: must be > 0, got {self.beta}")
        out = [
            "--lattice",
            dims_text(self.lattice),
            "--grid",
            dims_text(self.grid),
            "--beta",
            repr(self.beta),
            "--sweeps",
            str(self.sweeps),
            "--or-steps",
            str(self.or_steps),
            "--start",
            self.start,
        ]
        if self.seed is not None:
            out += ["--seed", str(self.seed)]
        for flag, path in (("--checkpoint", self.checkpoint), ("--resume", self.resume)):
            if path:
                out += [flag, str(Path(path).resolve())]
        if not self.overlap:
            out.append("--no-overlap")
        if self.inject_fault:
            out.append("--inject-fault")
        if self.isa != "auto":
            out += ["--isa", self.isa]
        return out

    def params(self, np: int) -> dict:
        return {
            "np": np,
            "lattice": list(self.lattice),
            "grid": list(self.grid),
            "split_dims": split_dims(self.grid),
            "beta": self.beta,
            "sweeps": self.sweeps,
            "or_steps": self.or_steps,
            "start": "resume" if self.resume else self.start,
            "seed": self.seed,
            "overlap": self.overlap,
            "checkpoint": self.checkpoint,
            "resume": self.resume,
            "inject_fault": self.inject_fault,
            "isa": self.isa,
        }


def derive(samples: list[dict], result: dict | None) -> dict:
    """The plaquette series (one value per sweep, the start's apart) and its sweeps."""
    sweeps = [s for s in samples if "plaquette" in s and "start" not in s]
    start = next((s for s in samples if "start" in s), None)
    out: dict = {
        "plaquette_series": [s["plaquette"] for s in sweeps],
        "plaquette_sweeps": [s["sweep"] for s in sweeps],
    }
    if start is not None:
        out["plaquette_start"] = start["plaquette"]
    return out


def run_qcd(
    cluster: Cluster,
    store: Store,
    spec: QcdSpec,
    *,
    np: int,
    mpi: str,
    timeout: float = TIMEOUT_S,
    hosts: list[str] | None = None,
    extra: dict | None = None,
) -> dict:
    """ct-qcd on ``np`` ranks after the kernel's own argument check; the stored record."""
    kargs = spec.kernel_args()
    check_args(KERNEL, np, mpi, kargs)
    return runner.run_kernel(
        cluster,
        store,
        level=LEVEL.name,
        kernel=KERNEL,
        np=np,
        mpi=mpi,
        args=kargs,
        params={**spec.params(np), **(extra or {})},
        timeout=timeout,
        hosts=hosts,
        derive=derive,
    )


def number(value: object, spec: str) -> str:
    return format(value, spec) if isinstance(value, int | float) else "n/a"


def text(record: dict, series_lines: int = 12) -> str:
    f, p = record["figures"], record["params"]
    lines = [
        f"run {record['id']}: {record['status']}, verification {record['verification']}"
        f"  lattice {dims_text(p.get('lattice', []))} grid {dims_text(p.get('grid', []))}"
        f" np {p.get('np')} beta {p.get('beta')} or-steps {p.get('or_steps')}"
    ]
    series = list(zip(f.get("plaquette_sweeps", []), f.get("plaquette_series", []), strict=False))
    if "plaquette_start" in f:
        lines.append(f"  start ({p.get('start')}): plaquette {f['plaquette_start']:.15f}")
    if len(series) > series_lines:
        lines.append(f"  ... {len(series) - series_lines} sweeps before")
    lines += [f"  sweep {s:>5}: plaquette {v:.15f}" for s, v in series[-series_lines:]]
    if "link_updates_per_s" in f:
        lines += [
            f"  QCDFlops {number(flops.gflops(f), '.3f')} Gflops "
            f"({number(flops.compute_gflops(f), '.3f')} without communication) "
            f"= 5700 x {number(f.get('hb_link_updates_per_s'), '.4g')} heat-bath link updates/s",
            f"  counted {number(f['counted_gflops'], '.3f')} Gflops, "
            f"{number(f['link_updates_per_s'], '.4g')} link updates/s"
            f" (heat bath + {p.get('or_steps', '?')} over-relaxation passes)",
            f"  time {number(f['time_s'], '.3f')} s, compute {number(f['compute_time_s'], '.3f')} s,"
            f" comm (post to completion) {number(f['comm_time_s'], '.3f')} s,"
            f" waiting {number(f['comm_wait_s'], '.3f')} s, halo {number(f['comm_mbps'], '.1f')} MB/s,"
            f" {number(f['messages_per_sweep'], '.0f')} messages and"
            f" {number(f['bytes_per_sweep'], '.4g')} bytes per sweep per rank",
            f"  checks: |UU+ - 1| {number(f['unitarity_error'], '.2g')}, |det U - 1| "
            f"{number(f['det_error'], '.2g')}, gauge invariance {number(f['gauge_invariance_error'], '.2g')}",
        ]
    lines += ranktimes.text_end(record)
    return "\n".join(lines)


def spec_of(args: argparse.Namespace) -> QcdSpec:
    lattice = parse_dims(args.lattice, "--lattice")
    grid = parse_dims(args.grid, "--grid") if args.grid else default_grid(lattice, args.np)
    return QcdSpec(
        lattice=lattice,
        grid=grid,
        beta=args.beta,
        sweeps=args.sweeps,
        or_steps=args.or_steps,
        start=args.start,
        seed=args.seed,
        checkpoint=args.checkpoint,
        resume=args.resume,
        overlap=not args.no_overlap,
        inject_fault=args.inject_fault,
        isa=args.isa,
    )


def cmd_qcd(args: argparse.Namespace) -> Output:
    spec = spec_of(args)
    record = run_qcd(
        cluster_of(args),
        open_store(args),
        spec,
        np=args.np,
        mpi=args.mpi,
        timeout=args.timeout,
        hosts=args.hosts,
    )
    return record_output(record, text(record))
