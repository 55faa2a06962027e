"""Finding kernel binaries and reading what they print.

Kernels are built by CMake into ``build/<flavour>/bin`` (flavours: openmpi, mpich, and
serial for tools without MPI). ``CLUSTERTUNE_BUILD_DIR`` points elsewhere if needed.
The output contract is in kernels/common/ct.h: JSON Lines with a "type" field.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UserError

FLAVOURS = ("openmpi", "mpich", "serial")


def build_dir() -> Path:
    env = os.environ.get("CLUSTERTUNE_BUILD_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "build"


def kernel_path(name: str, flavour: str) -> Path:
    if flavour not in FLAVOURS:
        raise UserError(f"unknown MPI flavour {flavour!r} (known: {', '.join(FLAVOURS)})")
    path = build_dir() / flavour / "bin" / name
    if not path.is_file():
        raise UserError(f"kernel {name} for {flavour} not built ({path} missing): run 'make setup'")
    return path


def library_path(name: str, flavour: str) -> Path:
    path = build_dir() / flavour / "lib" / name
    if not path.is_file():
        raise UserError(f"{name} for {flavour} not built ({path} missing): run 'make setup'")
    return path


@dataclass
class KernelOutput:
    samples: list[dict] = field(default_factory=list)
    result: dict | None = None
    errors: list[str] = field(default_factory=list)


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
    return out
