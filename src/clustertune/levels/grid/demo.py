"""The grid level's step in ``make demo``: its own virtual grid (two Slurm sites of two
hosts, a 100 Mbit WAN; sites without scheduler when Slurm is not installed), a small
Linpack and a short MPI ping-pong inside one site and across the two, then the grid
removed. Root only (namespaces); well under a minute."""

from __future__ import annotations

import os
import shutil
import sys

from ...cluster import Cluster
from ...errors import UserError
from ...grid import slurm, virtual
from ...launch.mpi import default_of
from ...results import Store
from .compare import default_cases, run_cases

DEMO_GRID = "demogrid"
DEMO_WAN_BPS = 100_000_000
DEMO_LINK_BPS = 1_000_000_000
DEMO_N, DEMO_NB = 1200, 64
DEMO_TIMEOUT_S = 120.0


def schedulers() -> list[str]:
    have_slurm = all(shutil.which(t) for t in slurm.TOOLS)
    return ["slurm", "slurm"] if have_slurm else ["none", "none"]


def demo(cluster: Cluster, store: Store) -> list[dict]:
    if os.geteuid() != 0:
        print("grid demo: skipped (a virtual grid needs root)", file=sys.stderr)
        return []
    mpi = default_of(cluster.mpi)
    cplan, state = virtual.plan(DEMO_GRID, 2, 2, schedulers(), DEMO_LINK_BPS, DEMO_WAN_BPS)
    virtual.down(DEMO_GRID)  # a crashed earlier demo leaves nothing in the way
    records: list[dict] = []
    try:
        virtual.up(cplan, state)
        for case in default_cases(("linpack", "pingpong"), (mpi,), DEMO_N, DEMO_NB):
            records += run_cases(DEMO_GRID, store, [case], DEMO_TIMEOUT_S)
    except UserError as exc:
        print(f"grid demo: {exc}", file=sys.stderr)
    finally:
        virtual.down(DEMO_GRID)
    return records
