"""The paced wire's CPU cost: the CPU time (utime + stime, /proc/PID/stat) its ct-nfq-delay
daemons spend on a known bulk TCP transfer between the two hosts of a 2-host virtual
cluster, per GB moved (docs/network.md, "Cost and scale of the paced wire"). Root.
With --delay-us, the switch's delay daemons (issue 19) are counted too.

    .venv/bin/python bench/pacer_cost.py --link 1gbit --bytes 300M --runs 3 [--delay-us 0]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_vcluster import measure_rate  # the tests' bulk transfer (tests/transfer.py)

from clustertune import vcluster
from clustertune.units import parse_rate, parse_size


def cpu_seconds(pids) -> float:
    ticks = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--link", default="1gbit")
    ap.add_argument("--bytes", default="300M", help="bytes per transfer")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--wire", choices=vcluster.WIRES, default=vcluster.DEFAULT_WIRE)
    ap.add_argument("--delay-us", type=int, default=0, help="delay of every packet each way")
    ap.add_argument("--name", default="pacecost")
    args = ap.parse_args()
    link, nbytes = parse_rate(args.link), parse_size(args.bytes)
    vcluster.down(args.name)
    state = vcluster.up(vcluster.plan(args.name, 2, link, wire=args.wire, delay_us=args.delay_us))
    cluster = vcluster.cluster_from_state(state)
    pids = list(state["delay_pids"].values())
    try:
        for _ in range(args.runs):
            before, start = cpu_seconds(pids), time.monotonic()
            rate = measure_rate(cluster, "host0", "host1", nbytes)
            elapsed, used = time.monotonic() - start, cpu_seconds(pids) - before
            print(
                f"{args.link} {args.wire} delay {args.delay_us} us, {len(pids)} daemons: "
                f"{nbytes / 1e6:g} MB at {rate / 1e6:.1f} Mbit/s in "
                f"{elapsed:.2f} s; daemons {used:.2f} CPU s = {used / (nbytes / 1e9):.2f} "
                f"CPU s/GB; load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    finally:
        vcluster.down(args.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
