"""Arguments of ``clustertune stream``."""

from __future__ import annotations

from ...commands import add_job_options
from . import run


def add_commands(sub, common) -> None:
    p = sub.add_parser(
        "stream",
        parents=[common],
        help="memory bandwidth: STREAM's Copy, Scale, Add, Triad on every rank",
    )
    add_job_options(p, timeout=run.TIMEOUT_S)
    p.add_argument(
        "--sweep",
        action="store_true",
        help="every rank count from 1 to --np, one record each (bandwidth against ranks)",
    )
    p.add_argument(
        "--n",
        type=int,
        help=f"doubles per array and rank (default: {run.CACHE_TIMES} x the host's "
        "last-level caches over its ranks)",
    )
    p.add_argument(
        "--cache", help="last-level caches of a host, e.g. 32M (default: read from sysfs)"
    )
    p.add_argument("--ntimes", type=int, help="repetitions of the four loops (default 10)")
    p.add_argument("--inject-fault", action="store_true", help="tests: verification must FAIL")
    p.set_defaults(func=run.cmd_stream)
