"""``make demo``: from nothing to a report on a 4-host 1 Gbit virtual cluster.

Each level whose descriptor has a demo step (clustertune.levels) adds itself here; this
module only builds the cluster, calls the steps in level order, writes the report and
always tears the cluster down, also when stopped by a signal. Without root it says so
and runs on localhost ranks instead.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from . import levels, report, vcluster
from .cluster import Cluster, local_cluster
from .errors import UserError
from .launch.process import signal_of, stop_on_signals
from .results import Store

DEMO_NAME = "demo"
DEMO_HOSTS = 4
DEMO_LINK_BPS = 10**9
REPORT_PATH = Path("out/clustertune-report.html")


def log(message: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run_levels(cluster: Cluster, store: Store) -> list[int]:
    run_ids = []
    for level in levels.all_levels():
        if level.demo is None:
            continue
        log(f"level {level.name}")
        for record in level.demo(cluster, store):
            log(f"  run {record['id']}: {record['level']}/{record['kernel']} -> {record['status']}")
            run_ids.append(record["id"])
    return run_ids


def main() -> int:
    stop_on_signals()
    store = Store()
    if os.geteuid() != 0:
        log("not root: no virtual cluster possible; running on localhost ranks instead")
        cluster, built = local_cluster(), False
    else:
        vcluster.down(DEMO_NAME)  # a crashed earlier demo leaves nothing in the way
        state = vcluster.plan(DEMO_NAME, DEMO_HOSTS, DEMO_LINK_BPS)
        cluster = vcluster.cluster_from_state(vcluster.up(state))
        built = True
        log(f"virtual cluster {DEMO_NAME}: {DEMO_HOSTS} hosts at 1 Gbit")
    try:
        run_ids = run_levels(cluster, store)
    except UserError as exc:
        log(f"error: {exc}")
        return 2
    except KeyboardInterrupt as exc:
        signum = signal_of(exc)
        log(f"interrupted ({signal.Signals(signum).name}): the run in progress is stored")
        return 128 + signum
    finally:
        if built:
            vcluster.down(DEMO_NAME)
            log("virtual cluster removed")
    REPORT_PATH.parent.mkdir(parents=True, exist_ok=True)
    REPORT_PATH.write_text(report.build(store, run_ids))
    failed = [rid for rid in run_ids if store.get(rid)["status"] != "ok"]
    log(f"{len(run_ids)} run(s) stored in {store.path}; runs not ok: {failed or 'none'}")
    print(REPORT_PATH.resolve())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
