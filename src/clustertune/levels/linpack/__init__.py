"""Application level I: the HPL-equivalent LU (ct-linpack), the GEMM in four types (ct-gemm)
and the choice of BLAS (docs/linpack.md). Both kernels' records carry this level (the
kernel field tells them apart), so the report can set an LU rate against the DGEMM rate of
the same BLAS.

run.py       running the kernels: `clustertune linpack`, `clustertune gemm`, derived figures
blas.py      `clustertune blas compare`: DGEMM and the LU with every installed BLAS
choice.py    the host's default BLAS, NB of a default run
shim.py      the PyPI OpenBLAS (scipy-openblas32) as a libblas.so.3
api.py       what other levels use of this one
section.py   the report section (LU with % of peak, GEMM, BLAS comparison)
demo.py      the step in `make demo`
cli.py       the commands' arguments
"""

from .. import Kernel, Level, register

LINPACK_KERNEL = "ct-linpack"
GEMM_KERNEL = "ct-gemm"

# in the demo and the report: after the probe and the network
LEVEL = register(
    Level(
        "linpack",
        "Application level: Linpack, GEMM, BLAS",
        order=40,
        kernels=(Kernel(LINPACK_KERNEL, "linpack"), Kernel(GEMM_KERNEL, "linpack")),
    )
)

from . import cli, demo, section, summary  # noqa: E402, F401  (they hang their parts on LEVEL)
