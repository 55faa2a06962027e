"""Arguments of ``clustertune qcd`` and ``clustertune qcd study``."""

from __future__ import annotations

import argparse

from ...commands import add_job_options
from . import run, study


def physics_options(p: argparse.ArgumentParser, sweeps: int) -> None:
    p.add_argument("--lattice", default="8x8x8x8", help="XxYxZxT (default 8x8x8x8)")
    p.add_argument("--beta", type=float, default=6.0, help="gauge coupling (default 6.0)")
    p.add_argument("--sweeps", type=int, default=sweeps, help=f"sweeps (default {sweeps})")
    p.add_argument(
        "--or-steps",
        type=int,
        default=4,
        help="over-relaxation passes per heat-bath pass (default 4, as MILC su3_ora)",
    )
    p.add_argument(
        "--no-overlap",
        action="store_true",
        help="complete each halo exchange before computing (no overlap)",
    )


def add_commands(sub, common) -> None:
    p = sub.add_parser(
        "qcd",
        parents=[common],
        help="lattice QCD: SU(3) pure gauge after QCDMPI (QCDFlops)",
        description="clustertune qcd [options] runs one lattice; clustertune qcd study "
        "compares the 1- to 4-dimensional decompositions (seeds/003 table 2).",
    )
    add_job_options(p, timeout=run.TIMEOUT_S)
    physics_options(p, sweeps=10)
    p.add_argument("--grid", help="process grid np1xnp2xnp3xnp4 (default: least halo)")
    p.add_argument("--start", choices=("cold", "hot"), default="cold")
    p.add_argument("--seed", type=int, help="random seed (default 1; a resume keeps its own)")
    p.add_argument("--checkpoint", help="write the field and RNG state here at the end")
    p.add_argument("--resume", help="continue from this checkpoint")
    p.add_argument(
        "--isa",
        choices=("auto", "baseline"),
        default="auto",
        help="build of the update: AVX2 where present (auto) or the x86-64 "
        "baseline; both give the same bits",
    )
    p.add_argument(
        "--inject-fault",
        action="store_true",
        help="tests: corrupt one halo message; the run must FAIL",
    )
    p.set_defaults(func=run.cmd_qcd)
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    s = actions.add_parser(
        "study",
        parents=[common],
        help="the paper's decomposition comparison (table 2, figures 7-9)",
    )
    add_job_options(s, np=16, timeout=run.TIMEOUT_S)
    physics_options(s, sweeps=3)
    s.set_defaults(lattice="16x16x16x16")
    s.add_argument("--dims", help="split dimensions to run, e.g. 1,2,4 (default 1,2,3,4)")
    s.add_argument("--seed", type=int, default=1)
    s.set_defaults(func=study.cmd_study)
