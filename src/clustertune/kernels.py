"""Kernel binaries: which exist (declared by the levels), where they are built, what they print.

Kernels are built by CMake into ``build/<flavour>/bin`` (libraries into ``lib``), one tree
per build flavour: each MPI (OpenMPI, MPICH) and ``serial`` for programs without MPI.
A kernel is declared once, by its level's manifest (clustertune.levels) or below for
the tools of the virtual cluster and the launchers; the build reads the same
declarations (clustertune.build), so a kernel built for one MPI only (the PnetCDF one:
Debian's libpnetcdf links OpenMPI) is asked for under the other with a clear error.
``CLUSTERTUNE_BUILD_DIR`` points elsewhere if needed. The output contract is in
kernels/common/ct.h: JSON Lines with a "type" field.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from . import catalog
from .errors import UserError
from .launch import mpi
from .levels import FLAVOURS, SERIAL, Kernel

# Not measurements: the virtual cluster's delay daemon and the MPI flavours' shims.
TOOLS = (
    Kernel("ct-nfq-delay", "vcluster", (SERIAL,)),
    *(Kernel(shim, "shims", (f.name,)) for f in mpi.FLAVOURS.values() for shim in f.shims),
)


def declared() -> list[Kernel]:
    """The tools above and every kernel a level's manifest declares (clustertune.catalog);
    a kernel declared twice differently, or for an unknown build flavour, is a bug."""
    seen: dict[str, Kernel] = {}
    for kernel in (*TOOLS, *catalog.kernels()):
        if kernel.name in seen and seen[kernel.name] != kernel:
            raise ValueError(f"kernel {kernel.name} declared twice, differently")
        unknown = set(kernel.flavours) - set(FLAVOURS)
        if unknown:
            raise ValueError(f"kernel {kernel.name}: unknown build flavour(s) {sorted(unknown)}")
        seen[kernel.name] = kernel
    return list(seen.values())


def build_dir() -> Path:
    env = os.environ.get("CLUSTERTUNE_BUILD_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "build"


def kernel_path(name: str, flavour: str) -> Path:
    """The built file of a declared kernel in one flavour's tree."""
    if flavour not in FLAVOURS:
        raise UserError(f"unknown MPI flavour {flavour!r} (known: {', '.join(FLAVOURS)})")
    kernel = next((k for k in declared() if k.name == name), None)
    if kernel is None:
        raise ValueError(f"kernel {name} is not declared by any level")  # a bug, not user input
    if flavour not in kernel.flavours:
        raise UserError(f"{name} is built for {', '.join(kernel.flavours)} only, not {flavour}")
    path = build_dir() / flavour / ("lib" if kernel.is_library else "bin") / name
    if not path.is_file():
        raise UserError(f"{name} for {flavour} not built ({path} missing): run 'make setup'")
    return path


@dataclass
class KernelOutput:
    samples: list[dict] = field(default_factory=list)
    result: dict | None = None
    errors: list[str] = field(default_factory=list)
    ranks: list[dict] = field(default_factory=list)  # MPI kernels: each rank's wall/CPU line


def parse_output(text: str) -> KernelOutput:
    """Collect the kernel's JSON lines; other lines (MPI library chatter) are skipped.

    A line cut short by a killed kernel is skipped too: everything before it counts.
    """
    out = KernelOutput()
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(item, dict):
            continue
        kind = item.pop("type", None)
        if kind == "sample":
            out.samples.append(item)
        elif kind == "result":
            out.result = item
        elif kind == "error":
            out.errors.append(str(item.get("message", "unknown error")))
        elif kind == "rank":
            out.ranks.append(item)
    return out


def check_args(kernel: str, np: int, mpi: str, kargs: list[str]) -> None:
    """A kernel's own checks of its flags (and input files), run without MPI before anything
    is launched: a bad input is one line and exit 2, not a page of MPI noise."""
    argv = [str(kernel_path(kernel, mpi)), "--check-only", "--np", str(np), *kargs]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError(f"{kernel}: cannot check the arguments: {exc}") from None
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()
        raise UserError(said[-1] if said else f"{kernel} --check-only: exit {done.returncode}")
