"""A newer OpenBLAS from the Python package index as one more ``libblas.so.3``.

``scipy-openblas32`` (installed into the venv by ``make setup``) ships OpenBLAS as
``libscipy_openblas.so`` with every symbol prefixed ``scipy_`` (``scipy_dgemm_``), so the
kernels, which call the Fortran names of the generic ``libblas.so.3``, cannot load it
directly. The shim is a ``libblas.so.3`` of one-instruction trampolines
(``dgemm_: jmp scipy_dgemm_@PLT``), generated from the library's own symbol table and
linked to it with an rpath. Put first on ``LD_LIBRARY_PATH`` (blas.environment), it makes
the kernels run that OpenBLAS exactly as they run a Debian alternative, and the kernel's
record names the shim (dladdr of ``dgemm_``) and OpenBLAS's core and version
(``openblas_get_corename``/``openblas_get_config`` are forwarded too).

Trampolines do not depend on the signatures, so every function is forwarded; x86-64 only.
``scipy-openblas64`` is not used: its ILP64 interface takes 64-bit integers, the kernels
pass 32-bit ones. Built once per OpenBLAS version under ``build/blas/``, which must be
visible on every host (true for this host and a virtual cluster).
"""

from __future__ import annotations

import os
import platform
import subprocess
import tempfile
from pathlib import Path

from ... import kernels
from ...errors import UserError
from .blas import Blas

PACKAGE = "scipy_openblas32"
PREFIX = "scipy_"
LIBRARY = "libscipy_openblas.so"


def shim_root() -> Path:
    return kernels.build_dir() / "blas"


def functions(library: Path) -> list[str]:
    """The exported functions of ``library`` that carry the prefix."""
    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(library)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    names = []
    for line in out.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in ("T", "W", "i") and parts[2].startswith(PREFIX):
            names.append(parts[2])
    return names


def assembly(names: list[str]) -> str:
    lines = ['\t.section .note.GNU-stack,"",@progbits', "\t.text"]
    for name in names:
        plain = name[len(PREFIX) :]
        lines += [
            f"\t.globl {plain}",
            f"\t.type {plain}, @function",
            f"{plain}:",
            f"\tjmp {name}@PLT",
        ]
    return "\n".join(lines) + "\n"


def build(library: Path, target: Path) -> None:
    """Write ``target/libblas.so.3`` forwarding to ``library`` (atomically: tests and
    users may build it at the same time)."""
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target) as tmp:
        source = Path(tmp) / "shim.s"
        source.write_text(assembly(functions(library)))
        out = Path(tmp) / "libblas.so.3"
        argv = [
            os.environ.get("CC", "cc"),
            "-shared",
            "-o",
            str(out),
            str(source),
            f"-L{library.parent}",
            f"-l:{library.name}",
            f"-Wl,-rpath,{library.parent}",
            "-Wl,-soname,libblas.so.3",
        ]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise UserError(f"cannot build the {PACKAGE} shim: {done.stderr.strip()[-300:]}")
        os.replace(out, target / "libblas.so.3")


def scipy_openblas() -> Blas | None:
    """The package's OpenBLAS as a :class:`Blas` (its shim built if needed); None when
    the package is not installed or this is not x86-64."""
    try:
        import scipy_openblas32  # type: ignore[import-not-found]
    except ImportError:
        return None
    if platform.machine() != "x86_64":
        return None
    library = Path(scipy_openblas32.get_lib_dir()) / LIBRARY
    if not library.exists():
        return None
    version = getattr(scipy_openblas32, "__version__", "unknown")
    target = shim_root() / f"scipy-openblas32-{version}"
    if not (target / "libblas.so.3").exists():
        build(library, target)
    return Blas(f"OpenBLAS {version.rsplit('.', 2)[0]} (PyPI)", target)
