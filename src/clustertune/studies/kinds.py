"""What a kind of study step is, and the helpers the levels' kinds share.

A level declares its kinds in its manifest (``study_kinds="steps:KINDS"``, see
clustertune.levels); clustertune.studies.catalog collects them. A kind calls the Python
API its level's command calls (the same validation, the same stored record) with the
study's values, runs one point on a cluster and returns the records it stored (one,
usually). Its ``check`` refuses bad values when the study file is read, before anything
runs; ``figure`` and ``plots`` draw its step on the study's page.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import UserError
from ..launch import mpi as mpi_flavours
from ..units import parse_size
from .findings import text_of

Runner = Callable[..., list[dict]]  # (cluster, store, values, mpi[, rundir=])


@dataclass
class Kind:
    name: str
    level: str  # the records' level
    params: frozenset[str]
    run: Runner
    help: str
    expected: Callable[[dict], int] = lambda values: 1  # records one point stores
    check: Callable[[dict], object] = lambda values: None  # raises on bad values, at load
    rundir: bool = False  # run() also takes rundir=, the study's own directory
    sites: int = 1  # the sites its cluster needs
    # the study page: a plot of this findings figure against the step's swept value
    # (e.g. "mops_per_process"), and/or the level's own plots of the step's ok records
    figure: str | None = None
    plots: Callable[[list[dict]], str] | None = None


def integer(values: dict, key: str, default: int) -> int:
    value = values.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise UserError(f"{key}: expected an integer, got {value!r}")
    return value


def positive(v: dict, key: str, default: int) -> int:
    value = integer(v, key, default)
    if value < 1:
        raise UserError(f"{key}: must be at least 1, got {value}")
    return value


def choice(v: dict, key: str, default: str, choices: tuple[str, ...]) -> str:
    value = v.get(key, default)
    if value not in choices:
        raise UserError(f"{key}: expected one of {', '.join(choices)}, got {value!r}")
    return value


# "--sizes '..': ...", "--class: ...", "bad size '..': ..."
LEVEL_WORDING = re.compile(r"^(--[\w-]+:?|bad \w+) ")


def reworded(key: str, parse: Callable, text: str):
    """A level parser's error (worded for its command line) re-worded for the study field."""
    try:
        return parse(text)
    except UserError as exc:
        raise UserError(f"{key}: {LEVEL_WORDING.sub('', str(exc))}") from None


def tcp_buffer_env(mpi: str, size: object) -> dict[str, str]:
    """MPI's TCP socket buffers (seeds/000 table 4), send and receive alike: the flavour's."""
    if mpi not in mpi_flavours.FLAVOURS:
        raise UserError(f"tcp_buffer: no TCP socket buffer setting known for {mpi}")
    return mpi_flavours.FLAVOURS[mpi].tcp_buffer_env(parse_size(str(size)))


def point_label(record: dict, skip: str | None = None) -> str:
    """A point's line label on the study page: its swept values (but ``skip``, the x axis),
    its MPI and cluster."""
    tag = record["meta"]["study"]
    parts = [
        f"{k}={text_of(tag['values'][k])}"
        for k in tag.get("swept", ())
        if k != skip and k in tag["values"]
    ]  # a case may leave a key out
    return " ".join([*parts, tag["mpi"], tag["cluster"]])
