"""Checks of every netCDF file the I/O level writes, local or remote (issue "Validation"):
``ncvalidator`` (PnetCDF's format checker) and ``ncdump -h`` (netCDF-C reads the header)
run on a host of the cluster that wrote the file, and the netCDF4 Python package reads
every value back here when the file is visible from this machine (this host, a virtual
cluster: its hosts share /tmp) and compares it with the kernel's pattern
value(z, y, x) = z N^2 + y N + x (mod 2^32).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

VARIABLE = "data"
DIMENSIONS = ("z", "y", "x")


def expected(n: int) -> np.ndarray:
    """The kernel's array of order n, as int32 (values wrap modulo 2^32 as in C)."""
    values = np.arange(n**3, dtype=np.uint64) % (1 << 32)
    return values.astype(np.uint32).view(np.int32).reshape(n, n, n)


def readback(path: Path, n: int) -> str | None:
    """None when the file holds the pattern of order n, else what is wrong (one line)."""
    import netCDF4  # local: heavy, and only needed when a file is checked

    try:
        with netCDF4.Dataset(path) as ds:
            if tuple(ds.dimensions) != DIMENSIONS:
                return f"dimensions {tuple(ds.dimensions)}, expected {DIMENSIONS}"
            var = ds.variables.get(VARIABLE)
            if var is None:
                return f"no variable {VARIABLE!r}"
            var.set_auto_mask(False)
            data = var[:]
    except OSError as exc:
        return f"netCDF4 cannot read it: {exc}"
    if data.shape != (n, n, n) or data.dtype != np.int32:
        return f"{VARIABLE} is {data.dtype}{list(data.shape)}, expected int32{[n, n, n]}"
    wrong = np.flatnonzero(data != expected(n))
    if wrong.size:
        z, y, x = np.unravel_index(wrong[0], (n, n, n))
        return f"{wrong.size} values differ, first at (z={z}, y={y}, x={x})"
    return None


def header_ok(ncdump_header: str, n: int) -> bool:
    """``ncdump -h`` shows the three dimensions of length n and ``int data(z, y, x)``."""
    lines = {line.strip() for line in ncdump_header.splitlines()}
    return all(f"{d} = {n} ;" in lines for d in DIMENSIONS) and "int data(z, y, x) ;" in lines
