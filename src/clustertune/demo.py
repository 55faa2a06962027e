"""``make demo``: from nothing to a report on a 4-host 1 Gbit virtual cluster.

Each level whose manifest names a demo step (clustertune.levels) is run here, in the
levels' declared order (clustertune.catalog); this module only builds the cluster, calls
the steps, always tears the cluster down and writes the report of what was stored, also
when a step fails or a signal stops it. Without root it says so and runs on localhost
ranks instead.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from . import catalog, report, vcluster
from .cluster import Cluster, local_cluster
from .errors import UserError
from .launch.process import signal_of, stop_on_signals
from .levels import DEMO_DIR
from .results import Store

DEMO_NAME = "demo"
DEMO_HOSTS = 4
DEMO_LINK_BPS = 10**9
REPORT_PATH = DEMO_DIR / "clustertune-report.html"


def log(message: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run_levels(cluster: Cluster, store: Store, run_ids: list[int]) -> None:
    """Every level's demo step in order; ``run_ids`` grows as they end, so it holds what
    was stored also when a step stops with an error or interrupt (its own runs stored
    until then included)."""
    for level in catalog.all_levels():
        step = level.part("demo")
        if step is None:
            continue
        log(f"level {level.name}")
        before = len(store.saved)
        try:
            records = step(cluster, store)
        except BaseException:
            run_ids += store.saved[before:]
            raise
        for record in records:
            log(f"  run {record['id']}: {record['level']}/{record['kernel']} -> {record['status']}")
            run_ids.append(record["id"])


def demo_cluster() -> tuple[Cluster, bool]:
    """The demo's cluster, and whether it was built here (and so must be torn down)."""
    if os.geteuid() != 0:
        log("not root: no virtual cluster possible; running on localhost ranks instead")
        return local_cluster(), False
    vcluster.down(DEMO_NAME)  # a crashed earlier demo leaves nothing in the way
    state = vcluster.plan(DEMO_NAME, DEMO_HOSTS, DEMO_LINK_BPS)
    cluster = vcluster.cluster_from_state(vcluster.up(state))
    log(f"virtual cluster {DEMO_NAME}: {DEMO_HOSTS} hosts at 1 Gbit, {state['wire']} wire")
    return cluster, True


def write_report(store: Store, run_ids: list[int]) -> list[int] | None:
    """The report of ``run_ids``; the ids of the runs not ok, or None when no report could
    be written. Called also after an error or interrupt, so it never raises an Exception
    (that would hide why the demo stopped)."""
    if not run_ids:
        log("no run stored: no report")
        return []
    try:
        failed = [rid for rid in run_ids if store.get(rid)["status"] != "ok"]
        log(f"{len(run_ids)} run(s) stored in {store.path}; runs not ok: {failed or 'none'}")
        REPORT_PATH.parent.mkdir(parents=True, exist_ok=True)
        REPORT_PATH.write_text(report.build(store, run_ids))
    except Exception as exc:  # noqa: BLE001
        log(f"no report: {exc!r}")
        return None
    print(REPORT_PATH.resolve())
    return failed


def parse_args(argv: list[str]) -> None:
    """The demo takes no option: ``--help`` says what it does, anything else is refused
    before a cluster is built or a run stored."""
    argparse.ArgumentParser(
        prog="python -m clustertune.demo",
        description="Build a 4-host 1 Gbit virtual cluster, run every level's demo step, "
        "tear the cluster down and write the HTML report of the runs stored "
        f"({REPORT_PATH}); results go to CLUSTERTUNE_DB or the default database.",
    ).parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """``argv``: the demo's own arguments (none by default, not the caller's sys.argv)."""
    parse_args(argv or [])
    stop_on_signals()
    store = Store()
    cluster, built = demo_cluster()
    run_ids: list[int] = []
    try:
        run_levels(cluster, store, run_ids)
    except UserError as exc:
        log(f"error: {exc}")
        return 2
    except KeyboardInterrupt as exc:
        signum = signal_of(exc)
        log(f"interrupted ({signal.Signals(signum).name}): the run in progress is stored")
        return 128 + signum
    finally:
        try:
            if built:
                vcluster.down(DEMO_NAME)
                log("virtual cluster removed")
        finally:  # the report of what was stored, whatever stopped the levels
            failed = write_report(store, run_ids)
    return 1 if failed is None or failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
