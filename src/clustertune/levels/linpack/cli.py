"""Arguments of ``clustertune linpack``, ``clustertune gemm`` and ``clustertune blas compare``."""

from __future__ import annotations

from ...commands import add_job_options
from . import compare, run


def add_commands(sub, common) -> None:
    p = sub.add_parser("linpack", parents=[common], help="HPL-equivalent distributed LU")
    add_job_options(p, timeout=run.TIMEOUT_S)
    p.add_argument("--dat", help="HPL.dat to run (flags below override its lists)")
    p.add_argument("-N", dest="n", help="problem sizes, comma-separated")
    p.add_argument("--nb", help="block sizes")
    p.add_argument("-P", dest="p", help="process rows (paired with -Q)")
    p.add_argument("-Q", dest="q", help="process columns")
    p.add_argument("--pmap", choices=("row", "col"))
    p.add_argument("--pfact", help="L, C, R")
    p.add_argument("--rfact", help="L, C, R")
    p.add_argument("--nbmin")
    p.add_argument("--ndiv")
    p.add_argument("--bcast", help="0=1ring 1=1ringM 2=2ring 3=2ringM 4=long 5=longM")
    p.add_argument("--depth", help="look-ahead depths")
    p.add_argument("--swap", type=int, choices=(0, 1, 2), help="bin-exch, long, mix")
    p.add_argument("--swap-threshold", type=int)
    p.add_argument("--threshold", type=float, help="residual threshold (negative: no check)")
    p.add_argument("--mem-fraction", type=float, help="N: largest fitting this memory share")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--inject-fault", action="store_true", help="tests: the check must FAIL")
    add_blas_option(p)
    p.set_defaults(func=run.cmd_linpack)

    g = sub.add_parser("gemm", parents=[common], help="distributed SUMMA GEMM, 4 data types")
    add_job_options(g, timeout=run.TIMEOUT_S)
    g.add_argument("-N", dest="n", default="1000", help="sizes, comma-separated")
    g.add_argument("--nb", type=int, default=192)
    g.add_argument("-P", dest="p", type=int)
    g.add_argument("-Q", dest="q", type=int)
    g.add_argument("--type", default="sdcz", help="any of s, d, c, z")
    g.add_argument("--repeat", type=int, default=1)
    g.add_argument("--local", action="store_true", help="each rank alone: the xGEMM rate")
    add_blas_option(g)
    g.set_defaults(func=run.cmd_gemm)

    compare.add_commands(sub, common)


def add_blas_option(parser) -> None:
    parser.add_argument(
        "--blas",
        default="auto",
        help="auto: this host's measured best correct BLAS (measured on the first run); "
        "system: the system's libblas.so.3; or NAME[:CORE] (an OPENBLAS_CORETYPE or "
        "LD_LIBRARY_PATH in the environment also overrides auto)",
    )
