"""Application level I: the HPL-equivalent LU (ct-linpack), the GEMM in four types (ct-gemm)
and the choice of BLAS (docs/linpack.md). Both kernels' records carry this level (the
kernel field tells them apart), so the report can set an LU rate against the DGEMM rate of
the same BLAS.

run.py       running the kernels: `clustertune linpack`, `clustertune gemm`, derived figures
blas.py      the BLAS libraries: the installed ones, selecting one, checking which ran
choice.py    the host's default BLAS, NB of a default run
jobs.py      one kernel job with the BLAS its caller chose (below run.py and choice.py)
compare.py   `clustertune blas compare|choose`
shim.py      the PyPI OpenBLAS (scipy-openblas32) as a libblas.so.3
api.py       what other levels use of this one
section.py   the report section (LU with % of peak, GEMM, BLAS comparison)
demo.py      the step in `make demo`
cli.py       the commands' arguments
"""

from .. import Kernel, Level

LINPACK_KERNEL = "ct-linpack"
GEMM_KERNEL = "ct-gemm"

LEVEL = Level(
    name="linpack",
    title="Application level: Linpack, GEMM, BLAS",
    after="network",
    kernels=(Kernel(LINPACK_KERNEL, "linpack"), Kernel(GEMM_KERNEL, "linpack")),
    commands="cli:add_commands",
    section="section:render",
    summary="summary:rows",
    demo="demo:demo",
    study_kinds="steps:KINDS",
)
