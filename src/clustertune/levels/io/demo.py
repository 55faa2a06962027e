"""The I/O level's step in ``make demo``: netCDF collective and independent write and read
of 16^3 and 64^3 ints on 2 ranks, beside raw MPI-IO, every file checked; then remote
collective I/O: an MPICH client job on one site writes and reads 64^3 and 256^3 through
ct-io-server (OpenMPI + PnetCDF) on another site over mutual TLS, across a 1 Gbit WAN (the
demo cluster's sites when it has two, else a two-host virtual cluster of its own; root
only). About 20 s in all."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from ... import vcluster
from ...cluster import Cluster
from ...errors import UserError
from ...results import Store
from . import netcdf

DEMO_NP = 2
DEMO_SIZES = [16, 64]
DEMO_REPS = 5
DEMO_TIMEOUT_S = 120.0
REMOTE_NAME = "demoio"
REMOTE_WAN_BPS = 10**9
REMOTE_SIZES = [64, 256]
REMOTE_REPS = 2


def remote_demo(cluster: Cluster, store: Store) -> list[dict]:
    """Remote collective I/O between two sites; [] (and why on stderr) when not possible."""
    mpi = "mpich" if "mpich" in cluster.mpi else "openmpi"  # the different-MPI case first
    own = len(cluster.sites) < 2
    if own and os.geteuid() != 0:
        print(
            "io demo: remote I/O skipped (two sites need a virtual cluster, so root)",
            file=sys.stderr,
        )
        return []
    try:
        if own:
            vcluster.down(REMOTE_NAME)  # a crashed earlier demo leaves nothing in the way
            # the paced wire's WAN pacers bound what crosses the WAN (vcluster.WAN_QUEUE)
            state = vcluster.plan(
                REMOTE_NAME, 2, 10 * REMOTE_WAN_BPS, sites=2, wan_bps=REMOTE_WAN_BPS
            )
            cluster = vcluster.cluster_from_state(vcluster.up(state))
        with tempfile.TemporaryDirectory(prefix="clustertune-io-demo-ca-") as ca:
            return [
                netcdf.measure(
                    cluster,
                    store,
                    np=1 if own else DEMO_NP,
                    mpi=mpi,
                    sizes=REMOTE_SIZES,
                    mode="collective",
                    ops=["write", "read"],
                    fmt="cdf1",
                    reps=REMOTE_REPS,
                    remote=cluster.sites[-1].name,
                    ca_dir=Path(ca),
                    identity="demo",
                    timeout=DEMO_TIMEOUT_S,
                )
            ]
    except UserError as exc:
        print(f"io demo: remote I/O: {exc}", file=sys.stderr)
        return []
    finally:
        if own:
            vcluster.down(REMOTE_NAME)


def demo(cluster: Cluster, store: Store) -> list[dict]:
    if "openmpi" not in cluster.mpi:  # Debian's PnetCDF exists for OpenMPI only
        return []
    local = netcdf.measure(
        cluster,
        store,
        np=DEMO_NP,
        mpi="openmpi",
        sizes=DEMO_SIZES,
        mode="both",
        ops=["write", "read"],
        fmt="cdf1",
        reps=DEMO_REPS,
        timeout=DEMO_TIMEOUT_S,
    )
    return [local, *remote_demo(cluster, store)]
