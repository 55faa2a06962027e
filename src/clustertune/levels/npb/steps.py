"""The NPB level's study step kind (clustertune.studies): one benchmark of a class."""

from __future__ import annotations

from ...cluster import Cluster
from ...results import Store
from ...studies import kinds


def _npb_args(v: dict) -> tuple[str, str, int]:
    """(benchmark, class, np), checked by the npb level's own checks when the file is read."""
    from . import run

    bench = str(v.get("benchmark", "ep")).lower()
    cls = str(v.get("class", "S")).upper()
    kinds.reworded("benchmark", run.kernel_of, bench)
    kinds.reworded("class", run.kernel_args, cls)
    return bench, cls, kinds.positive(v, "np", 1)


def _npb(cluster: Cluster, store: Store, v: dict, mpi: str) -> list[dict]:
    from . import run

    return [run.run_npb(cluster, store, *_npb_args(v), mpi)]


KINDS = (
    kinds.Kind(
        "npb",
        "npb",
        frozenset({"benchmark", "class", "np"}),
        _npb,
        "npb: EP, LU or BT of a class on np ranks",
        check=_npb_args,
        figure="mops_per_process",
    ),
)
