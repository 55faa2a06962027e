"""What other levels use of the QCD level (the tuner's decomposition search): the kernel,
its runs, the process grids of a lattice and the QCDFlops of a record. Import it as
``from ..qcd import api as qcd``; the level's other modules are its own.
"""

from . import KERNEL as QCD_KERNEL
from .flops import gflops
from .run import (
    TIMEOUT_S,
    QcdSpec,
    dims_text,
    grids,
    halo_sites,
    number,
    parse_dims,
    run_qcd,
    split_dims,
)
from .study import oversubscribed, series_identical

__all__ = [
    "QCD_KERNEL",
    "TIMEOUT_S",
    "QcdSpec",
    "dims_text",
    "gflops",
    "grids",
    "halo_sites",
    "number",
    "oversubscribed",
    "parse_dims",
    "run_qcd",
    "series_identical",
    "split_dims",
]
