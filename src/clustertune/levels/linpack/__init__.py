"""Application level I: the HPL-equivalent LU (ct-linpack), the GEMM in four types (ct-gemm)
and the choice of BLAS (docs/linpack.md).

run.py       running the kernels: `clustertune linpack`, `clustertune gemm`, derived figures
blas.py      `clustertune blas compare`: DGEMM and the LU with every installed BLAS
section.py   the report section (LU with % of peak, GEMM, BLAS comparison)
demo.py      the step in `make demo`
cli.py       the commands' arguments
"""

from . import section  # noqa: F401  (registers the report section)
from .cli import add_commands
from .demo import demo

# demo order: after the probe (10), in the slot of its report section (40)
ORDER = 40

__all__ = ["ORDER", "add_commands", "demo"]
