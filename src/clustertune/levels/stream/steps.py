"""The STREAM level's study step kind (clustertune.studies): one ct-stream job, the same
API and record as ``clustertune stream`` (a study sweeps ``np``, or ``n``, through its
step's values); the study page plots the Triad against the swept value and draws the
section's bandwidth-against-ranks figure of the step's runs."""

from __future__ import annotations

import re

from ...cluster import Cluster
from ...errors import UserError
from ...launch import mpi as mpi_flavours
from ...results import Store
from ...studies import kinds
from ...units import parse_size
from . import run, section

PARAMS = frozenset({"np", "n", "cache", "ntimes", "timeout"})
KERNEL_FLAG = re.compile(r"^ct-stream: --(?=[\w-]+: )")  # the flags are named as the keys


def _point(v: dict) -> tuple[int, run.StreamSpec, float]:
    """(np, spec, timeout) of a point, checked when the study file is read: the types here,
    the ranges by the kernel itself (its --check-only, no MPI), as the command checks them."""
    cache = v.get("cache")
    timeout = v.get("timeout", run.TIMEOUT_S)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not timeout > 0:
        raise UserError(f"timeout: expected a positive number of seconds, got {timeout!r}")
    spec = run.StreamSpec(
        n=kinds.positive(v, "n", 1) if "n" in v else None,
        cache=None if cache is None else str(kinds.reworded("cache", parse_size, str(cache))),
        ntimes=kinds.positive(v, "ntimes", 1) if "ntimes" in v else None,
    )
    np = kinds.positive(v, "np", 1)
    try:
        run.check(spec, np, mpi_flavours.DEFAULT.name)
    except UserError as exc:  # "ct-stream: --ntimes: expected ...": the study's field
        raise UserError(KERNEL_FLAG.sub("", str(exc))) from None
    return np, spec, float(timeout)


def _stream(cluster: Cluster, store: Store, v: dict, mpi: str) -> list[dict]:
    np, spec, timeout = _point(v)
    return [run.run_stream(cluster, store, np, mpi, spec, timeout=timeout)]


KINDS = (
    kinds.Kind(
        "stream",
        "stream",
        PARAMS,
        _stream,
        "stream: ct-stream (STREAM's Copy, Scale, Add, Triad) on np ranks",
        check=_point,
        figure="triad_gb_s",
        plots=section.figure,
    ),
)
