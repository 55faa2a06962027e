"""The network level's step of ``make demo``: on the demo cluster, a TCP ping-pong and an
MPI ping-pong per MPI between the first two hosts, and a TCP all-pairs matrix."""

from __future__ import annotations

import sys

from ...cluster import Cluster
from ...errors import UserError
from ...results import Store
from . import matrix, pingpong

DEMO_MAX_SIZE = 4 << 20  # >= 2 x the 2 MB bandwidth floor of a 1 Gbit virtual cluster


def demo(cluster: Cluster, store: Store) -> list[dict]:
    a, b = pingpong.parse_between(cluster, None)
    specs = [pingpong.PingpongSpec("tcp", a, b, max_size=DEMO_MAX_SIZE)]
    specs += [
        pingpong.PingpongSpec("mpi", a, b, mpi=flavour, max_size=DEMO_MAX_SIZE)
        for flavour in cluster.mpi
    ]
    records = []
    for spec in specs:
        try:
            records.append(pingpong.run_pingpong(cluster, store, spec))
        except UserError as exc:  # e.g. an MPI not installed: the other layers still run
            print(f"network demo: skipped {spec.layer} {spec.mpi}: {exc}", file=sys.stderr)
    if len(cluster.hosts) > 1:
        records.append(matrix.run_matrix(cluster, store, layer="tcp"))
    return records
