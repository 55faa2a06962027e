"""What other levels use of the network level (the tuner's socket buffer, the grid's
co-allocated ping-pong, its WAN row): the kernels, the ping-pong runs and the bandwidth
verdict. Import it as ``from ..network import api as network``; the level's other modules
are its own (helpers several levels share live below the levels, e.g. clustertune.ceiling).
"""

from . import MPI_KERNEL, TCP_KERNEL
from .analysis import TBF_BANDWIDTH_MIN_SIZE_BYTES
from .pingpong import (
    TBF_BUCKETS,
    PingpongSpec,
    bandwidth_min_size,
    derive_for,
    pair_rate_bps,
    parse_between,
    run_pingpong,
    run_pingpongs,
    validate,
)
from .pingpong import _sweep_args as sweep_args  # the kernel's arguments for a spec
from .summary import judge_bandwidth

__all__ = [
    "MPI_KERNEL",
    "TBF_BANDWIDTH_MIN_SIZE_BYTES",
    "TBF_BUCKETS",
    "TCP_KERNEL",
    "PingpongSpec",
    "bandwidth_min_size",
    "derive_for",
    "judge_bandwidth",
    "pair_rate_bps",
    "parse_between",
    "run_pingpong",
    "run_pingpongs",
    "sweep_args",
    "validate",
]
