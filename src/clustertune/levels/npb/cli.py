"""Arguments of ``clustertune npb ep|lu|bt``."""

from __future__ import annotations

from ...commands import add_job_options
from . import KERNELS, run


def add_commands(sub, common) -> None:
    p = sub.add_parser("npb", parents=[common], help="NAS Parallel Benchmarks EP, LU, BT")
    p.add_argument("benchmark", choices=tuple(KERNELS), help="ep, lu or bt")
    p.add_argument(
        "--class",
        dest="cls",
        default="S",
        type=str.upper,
        help=f"problem class: {', '.join(run.CLASSES)} (default S)",
    )
    add_job_options(p, timeout=run.TIMEOUT_S)
    p.add_argument(
        "--dt",
        type=float,
        help="LU, BT: the time step (NPB's input file); another than the class's "
        "fails verification, as in NPB",
    )
    p.add_argument("--inject-fault", action="store_true", help="tests: verification must FAIL")
    p.set_defaults(func=run.cmd_npb)
