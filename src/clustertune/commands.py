"""What every command shares, kept apart from the CLI wiring so levels can use it:
the command's result (:class:`Output`), the store and cluster a command acts on, and the
argument factories that give every measuring command the same options.

The grammar (README "Using it"): ``clustertune COMMAND [ACTION] [options]``, where
COMMAND is a level's command (``probe``, ``net``, ``linpack``, ``gemm``, ``blas``, ...) or
a tool (``vcluster``, ``info``, ``results``, ``report``), ACTION picks among its kinds of run
(``net pingpong``, ``blas compare``). Every command takes ``--db`` and ``--json``
(:func:`store_parser`), those that measure a cluster ``--cluster`` too
(:func:`common_parser`); every MPI job ``--np``, ``--mpi``, ``--hosts`` and
``--timeout`` (:func:`add_job_options`); the others take the factories they need.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from .cluster import Cluster
from .launch import mpi
from .results import Store
from .sources import resolve_cluster


@dataclass
class Output:
    """What a command produced: a JSON document, its human form, and the exit status."""

    payload: object
    text: str
    status: int = 0


def store_parser() -> argparse.ArgumentParser:
    """The parent parser of every command: --db, --json."""
    store = argparse.ArgumentParser(add_help=False)
    store.add_argument(
        "--db",
        help="results database (default $CLUSTERTUNE_DB or ~/.local/share/clustertune/results.db)",
    )
    store.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    return store


def common_parser() -> argparse.ArgumentParser:
    """The parent parser of the commands that measure a cluster: --cluster, --db, --json
    (the others take store_parser's, so that no --cluster is accepted and ignored)."""
    common = argparse.ArgumentParser(add_help=False, parents=[store_parser()])
    common.add_argument(
        "--cluster", help="cluster file (TOML) or virtual cluster name; default: this host"
    )
    return common


def add_np(parser: argparse.ArgumentParser, default: int = 2) -> None:
    parser.add_argument("--np", type=int, default=default, help=f"MPI ranks (default {default})")


def add_mpi(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--mpi",
        choices=mpi.NAMES,
        default=mpi.DEFAULT.name,
        help=f"MPI implementation (default {mpi.DEFAULT.name})",
    )


def add_hosts(parser: argparse.ArgumentParser, what: str = "hosts to place ranks on") -> None:
    parser.add_argument("--hosts", type=host_list, help=f"comma-separated {what} (default: all)")


def positive_seconds(text: str) -> float:
    """A timeout: 0 or less would launch a job only to kill it at once."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < math.inf:  # NaN too
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return seconds


def add_timeout(parser: argparse.ArgumentParser, default: float | None) -> None:
    told = f"default {default:.0f}" if default is not None else "default: from the link rate"
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=default,
        help=f"seconds before the job is killed and stored as failed ({told})",
    )


def add_job_options(
    parser: argparse.ArgumentParser, *, np: int = 2, timeout: float | None = 600.0
) -> None:
    """--np, --mpi, --hosts, --timeout: the options of every MPI job."""
    add_np(parser, np)
    add_mpi(parser)
    add_hosts(parser)
    add_timeout(parser, timeout)


def host_list(text: str) -> list[str]:
    hosts = [h.strip() for h in text.split(",")]
    if not all(hosts):
        raise argparse.ArgumentTypeError(f"{text!r}: expected host names separated by commas")
    return hosts


def open_store(args: argparse.Namespace) -> Store:
    return Store(args.db)


def cluster_of(args: argparse.Namespace) -> Cluster:
    return resolve_cluster(args.cluster)


def record_summary(record: dict) -> str:
    line = (
        f"run {record['id']}: {record['level']}/{record['kernel']} on {record['meta']['cluster']['name']}"
        f" -> {record['status']}, verification {record['verification']}"
    )
    if record["figures"]:
        figures = ", ".join(
            f"{k}={v}" for k, v in record["figures"].items() if not isinstance(v, dict | list)
        )
        line += f"\n  {figures}"
    if record["error"]:
        line += f"\n  error: {record['error']}"
    return line


def record_output(record: dict, text: str | None = None, payload: object = None) -> Output:
    """The usual ending of a measuring command: the stored record, non-zero if not ok."""
    return Output(
        record if payload is None else payload,
        record_summary(record) if text is None else text,
        0 if record["status"] == "ok" else 1,
    )
