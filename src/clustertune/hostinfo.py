"""Facts about one host: the resource information seeds/000 read from Globus MDS.

``python -m clustertune.hostinfo`` prints them as a sample line of the kernels' output
contract (kernels/common/ct.h); ``clustertune info`` runs that on every host of a cluster
through its launcher.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

from .launch import mpi

# ISA extensions that decide which BLAS kernels can run (OpenBLAS's cores: Haswell needs
# avx2 and fma, SkylakeX avx512f/dq/vl, Cooperlake also avx512_bf16, SapphireRapids
# amx_tile and avx512_fp16)
ISA_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512dq",
    "avx512vl",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
)
BLAS_ALTERNATIVE = Path("/etc/alternatives/libblas.so.3-x86_64-linux-gnu")
# the measured BLAS choice of each host (levels/linpack/choice.py): per user, not per
# results database, since it is a fact of the host (CPU, ISA, installed libraries)
BLAS_CACHE_ENV = "CLUSTERTUNE_BLAS_CACHE"


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _first_line(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [line.strip() for line in (out.stdout or out.stderr).splitlines() if line.strip()]
    return " ".join(lines[0].split()) if lines else None  # MPICH pads with tabs


def cpu_info() -> dict:
    text = _read("/proc/cpuinfo")
    model = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    flags = re.search(r"^flags\s*:\s*(.+)$", text, re.MULTILINE)
    present = set(flags.group(1).split()) if flags else set()
    return {
        "model": model.group(1).strip() if model else platform.processor(),
        "cores": os.cpu_count(),
        "isa": [f for f in ISA_FLAGS if f in present],
    }


def memory_bytes() -> int | None:
    match = re.search(r"^MemTotal:\s*(\d+) kB", _read("/proc/meminfo"), re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def load_average() -> str:
    """1, 5 and 15 minute load averages, for benchmarks to print beside their figures."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def os_info() -> dict:
    release = dict(
        line.split("=", 1) for line in _read("/etc/os-release").splitlines() if "=" in line
    )
    return {
        "name": release.get("PRETTY_NAME", "").strip('"') or platform.system(),
        "kernel": platform.release(),
    }


@cache
def mpi_versions() -> dict[str, str | None]:
    return {f.name: _first_line(f.version_argv()) for f in mpi.FLAVOURS.values()}


@cache
def blas_info() -> dict:
    """Which libblas.so.3 the system alternative selects and, for OpenBLAS, the kernel
    (core) it runs, which OPENBLAS_CORETYPE can override."""
    info: dict = {"library": None, "openblas_core": None, "openblas_config": None}
    if BLAS_ALTERNATIVE.exists():
        info["library"] = str(BLAS_ALTERNATIVE.resolve())
    for name in ("libopenblas.so.0", "libopenblas.so"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        for field, symbol in (
            ("openblas_core", "openblas_get_corename"),
            ("openblas_config", "openblas_get_config"),
        ):
            func = getattr(lib, symbol, None)
            if func is not None:
                func.restype = ctypes.c_char_p
                info[field] = func().decode()
        break
    return info


def blas_cache_dir() -> Path:
    """Where the measured BLAS choices live: $CLUSTERTUNE_BLAS_CACHE, else
    $XDG_CACHE_HOME/clustertune (~/.cache/clustertune)."""
    if env := os.environ.get(BLAS_CACHE_ENV):
        return Path(env)
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache_home) / "clustertune"


def blas_choices() -> dict:
    """Every stored choice by key (blas-choice.json), {} when there is none yet."""
    try:
        return json.loads((blas_cache_dir() / "blas-choice.json").read_text())
    except (OSError, ValueError):
        return {}


def blas_choice() -> dict | None:
    """This host's measured BLAS choice (any key whose CPU and ISA are this host's; the
    newest), as ``clustertune info`` shows it; None when none was measured here."""
    cpu = cpu_info()
    mine = [
        c
        for c in blas_choices().values()
        if c.get("key", {}).get("cpu") == cpu["model"] and c["key"].get("isa") == cpu["isa"]
    ]
    return max(mine, key=lambda c: c.get("measured", "")) if mine else None


def nics() -> list[dict]:
    """Network interfaces with their link speed where the driver reports one (veth does not)."""
    result = []
    for dev in sorted(Path("/sys/class/net").glob("*")):
        if dev.name == "lo":
            continue
        speed = _read(str(dev / "speed")).strip()
        result.append(
            {
                "name": dev.name,
                "speed_mbps": int(speed)
                if speed.lstrip("-").isdigit() and int(speed) > 0
                else None,
                "mtu": int(_read(str(dev / "mtu")).strip() or 0) or None,
            }
        )
    return result


def collect() -> dict:
    return {
        "hostname": platform.node(),
        "cpu": cpu_info(),
        "memory_bytes": memory_bytes(),
        "os": os_info(),
        "mpi": mpi_versions(),
        "blas": blas_info() | {"choice": blas_choice()},
        "nics": nics(),
    }


if __name__ == "__main__":  # in the kernels' output contract (kernels/common/ct.h)
    print(json.dumps({"type": "sample", **collect()}))
    print(json.dumps({"type": "result", "verification": "not-verified"}))
