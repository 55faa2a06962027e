"""Co-allocation of one MPI job across the sites of a virtual grid (DUROC's role): an
allocation per Slurm site and a GSI authentication at each GRAM site's gatekeeper
(``globusrun -a``: the grid's subject mapped, its certificate valid), all granted within
a start barrier or none kept; then the
MPI launcher starts every rank inside them (its remote agent runs ``srun --jobid`` on
Slurm sites, ssh on ssh sites, the vcluster agent elsewhere), and the allocations are
released at the end, whatever happened.

Run as ``python -m clustertune.grid.coalloc --grid G --workdir W --barrier S
--sites site0=host0,host1 [--sites ...] -- MPI-LAUNCHER-ARGV``; it is the one command the
grid launcher gives the runner (launch/base.py: ``mpi_argv``), so every level runs
through it unchanged. It reports on stderr one line ``clustertune-coalloc: {json}``: per
site the allocation id and the times of request and grant (the job's timeline), or why
it did not start. Exit 97 when the co-allocation failed (nothing was started).

While the job runs a heartbeat (grid/heartbeat.py) checks every ``--heartbeat`` seconds
the daemons, hosts and WAN links it stands on; the first dead one is named on stderr
(``clustertune-coalloc: heartbeat: site1: slurmd-host2 (pid N) is not running``), the MPI
launcher is stopped, and the exit status is 96; what the kernel wrote before stays in
its output (the runner keeps those samples).

A test switch: ``CT_GRID_FAIL_SITE=siteK`` makes that site's request impossible (an
unknown node), so the all-or-none path can be seen.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import asdict
from pathlib import Path

from ..errors import UserError
from . import gram, heartbeat, jobs, slurm, virtual

FAILED_TO_START = 97
HEARTBEAT_LOST = 96  # a daemon, host or the WAN died during the job: stopped
STOP_GRACE_S = 5.0  # SIGTERM to SIGKILL of a stopped launcher (a cut WAN hangs its teardown)
GRANTED = re.compile(r"Granted job allocation (\d+)")
FAIL_SWITCH = "CT_GRID_FAIL_SITE"


def _request(site: dict, hosts: list[str], name: str, minutes: int) -> subprocess.Popen:
    nodelist = ",".join(hosts)
    if os.environ.get(FAIL_SWITCH) == site["name"]:
        nodelist = "no-such-node"
    argv = [
        "salloc",
        "--no-shell",
        "--job-name",
        name,
        "--nodes",
        str(len(hosts)),
        "--ntasks",
        str(len(hosts)),
        "--ntasks-per-node",
        "1",
        "--nodelist",
        nodelist,
        "--time",
        str(minutes),
    ]
    return subprocess.Popen(
        slurm.client(site, argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def coallocate(
    grid: dict, wanted: dict[str, list[str]], workdir: Path, barrier: float, name: str, minutes: int
) -> tuple[dict, str | None]:
    """(timeline per site, None) when every Slurm site granted its hosts within
    ``barrier`` seconds; else (timeline, why) with every allocation already cancelled."""
    sites = {s["name"]: s for s in grid["sites"]}
    timeline: dict[str, dict] = {}
    pending: dict[str, subprocess.Popen] = {}
    marks: dict[str, int] = {}  # GRAM sites: where their gatekeeper's log stood
    for site_name, hosts in wanted.items():
        site = sites[site_name]
        timeline[site_name] = {
            "scheduler": site["scheduler"],
            "hosts": hosts,
            "requested": time.time(),
        }
        if site["scheduler"] == "slurm":
            pending[site_name] = _request(site, hosts, name, minutes)
        elif site["scheduler"] == "gram":  # nothing to allocate, but the site must accept us
            marks[site_name] = gram.log_mark(site)
            pending[site_name] = gram.authenticate(grid, site)
        else:  # nothing to allocate: reached directly
            timeline[site_name]["granted"] = time.time()
    why = None
    deadline = time.monotonic() + barrier
    while pending and why is None:
        for site_name, proc in list(pending.items()):
            if proc.poll() is None:
                continue
            err = proc.stderr.read() if proc.stderr else ""
            del pending[site_name]
            if sites[site_name]["scheduler"] == "gram":
                said = proc.stdout.read() if proc.stdout else ""
                if proc.returncode == 0 and "successful" in said:
                    timeline[site_name].update(granted=time.time(), allocation="gsi")
                else:
                    why = (
                        f"{site_name}: GRAM authentication refused: "
                        f"{gram.refusal(sites[site_name], said, marks[site_name])}"
                    )
                continue
            match = GRANTED.search(err)
            if proc.returncode == 0 and match:
                timeline[site_name].update(granted=time.time(), allocation=match.group(1))
                (workdir / f"alloc.{site_name}").write_text(match.group(1))
            else:
                why = f"{site_name}: allocation refused: {err.strip().splitlines()[-1:] or '?'}"
        if pending and time.monotonic() > deadline:
            why = f"{', '.join(pending)}: not granted within the {barrier:g} s start barrier"
        time.sleep(0.05)
    if why is not None:
        for proc in pending.values():
            proc.terminate()  # salloc cancels its own request when signalled
        release(grid, timeline, name)
    return timeline, why


def release(grid: dict, timeline: dict, name: str) -> None:
    """Cancel every allocation of this job (by name too: a request still queued)."""
    for site in grid["sites"]:
        if site["name"] in timeline and site["scheduler"] == "slurm":
            with contextlib.suppress(subprocess.TimeoutExpired):
                slurm.run_client(site, ["scancel", "--name", name], timeout=10)
            timeline[site["name"]].setdefault("released", time.time())


def _wait_all(entries: list[dict], timeout: float, beat: heartbeat.Heartbeat | None) -> str | None:
    """Every released subjob to its end, under the heartbeat: when a part they stand on
    dies (or ``timeout`` passes) the ones still running are cancelled. What died, or None."""
    deadline = time.monotonic() + timeout
    running = list(entries)
    while running:
        for e in list(running):
            if e["backend"].poll(e["handle"]) in ("done", "failed"):
                e["result"], e["ended"] = e["backend"].result(e["handle"]), time.time()
                running.remove(e)
        lost = beat.lost if beat is not None else None
        if running and (lost is not None or time.monotonic() > deadline):
            for e in running:
                e["backend"].cancel(e["handle"])
                e["result"], e["ended"] = jobs.wait(e["backend"], e["handle"], 20), time.time()
                e["result"].state = "failed"
                e["result"].stderr += "\n(cancelled: " + (lost or f"past {timeout:g} s") + ")"
            return lost
        time.sleep(0.2)
    return beat.lost if beat is not None else None


def coallocate_jobs(
    grid: dict,
    subjobs: list[tuple[str, jobs.GridJob]],
    barrier: float,
    timeout: float,
    heartbeat_s: float = heartbeat.INTERVAL_S,
) -> dict:
    """Subjobs (site, job) started all or none: each checks in at a start barrier and waits
    there; when all have checked in within ``barrier`` seconds they are released together,
    else (a submission refused, a subjob that never starts or dies first) every subjob is
    cancelled. Once released they run under the heartbeat: a daemon, host or WAN link they
    stand on found dead cancels the subjobs still running (``error`` and ``heartbeat`` say
    what died). Returns {"started", "error", "heartbeat", "subjobs": [{site, handle,
    result, times}]}."""
    d = Path(grid["dir"]) / "coalloc" / uuid.uuid4().hex[:12]
    d.mkdir(parents=True)
    d.chmod(0o755)
    entries: list[dict] = []
    why = None
    try:
        for site, job in subjobs:
            backend = jobs.backend(grid, site)
            job.barrier = str(d)
            entry = {"site": site, "backend": backend, "submitted": time.time()}
            entries.append(entry)
            entry["handle"] = backend.submit(job)
    except UserError as exc:
        why = f"{entries[-1]['site']}: submission refused: {exc}"
    deadline = time.monotonic() + barrier
    while why is None:
        waiting = [e for e in entries if not (d / f"ready.{Path(e['handle'].dir).name}").exists()]
        for e in waiting:
            if e["backend"].poll(e["handle"]) in ("done", "failed"):
                why = f"{e['site']}: subjob ended before the start barrier"
        if not waiting or why:
            break
        if time.monotonic() > deadline:
            why = (
                f"{', '.join(e['site'] for e in waiting)}: not started within the "
                f"{barrier:g} s start barrier"
            )
        time.sleep(0.1)
    started = why is None
    lost = None
    if started:
        (d / "go").touch()
        released = time.time()
        wanted: dict[str, list[str]] = {}
        for (site, job), e in zip(subjobs, entries, strict=True):
            e["started"] = released
            wanted.setdefault(site, []).extend(e["backend"].hosts(job))
        if heartbeat_s > 0:
            with heartbeat.Heartbeat(grid, wanted, heartbeat_s) as beat:
                lost = _wait_all(entries, timeout, beat)
        else:
            lost = _wait_all(entries, timeout, None)
        if lost is not None:
            why = f"heartbeat: {lost}; every subjob still running was cancelled"
    else:
        (d / "abort").touch()
        submitted = [e for e in entries if "handle" in e]
        for e in submitted:  # all cancelled before any is waited for
            e["backend"].cancel(e["handle"])
        for e in submitted:
            e["result"] = jobs.wait(e["backend"], e["handle"], 20)
    return {
        "started": started,
        "error": why,
        "heartbeat": lost,
        "subjobs": [
            {
                "site": e["site"],
                "handle": asdict(e["handle"]) if "handle" in e else None,
                "result": asdict(e["result"]) if "result" in e else None,
                **{k: e[k] for k in ("submitted", "started", "ended") if k in e},
            }
            for e in entries
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="clustertune.grid.coalloc")
    parser.add_argument("--grid", required=True)
    parser.add_argument("--workdir", required=True, type=Path)
    parser.add_argument("--barrier", type=float, default=30.0)
    parser.add_argument("--minutes", type=int, default=60)
    parser.add_argument("--sites", action="append", default=[])
    parser.add_argument(
        "--heartbeat",
        type=float,
        default=heartbeat.INTERVAL_S,
        help="seconds between checks of the job's daemons, hosts, WAN (0: off)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    grid = virtual.load(args.grid)
    if grid is None:
        print(f"clustertune-coalloc: no grid {args.grid!r}", file=sys.stderr)
        return FAILED_TO_START
    wanted = {}
    for item in args.sites:
        site, _, hosts = item.partition("=")
        wanted[site] = hosts.split(",")
    name = f"ct-{os.environ.get('CLUSTERTUNE_JOB', os.getpid())}"

    def stop(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    timeline: dict = {}
    code = FAILED_TO_START
    why = None
    lost = None
    try:
        timeline, why = coallocate(grid, wanted, args.workdir, args.barrier, name, args.minutes)
        if why is None:
            started = time.time()
            code, lost = run_watched(command, grid, wanted, args.heartbeat)
            for entry in timeline.values():
                entry.update(started=started, ended=time.time())
    finally:
        release(grid, timeline, name)
        report = {"sites": timeline, "started": why is None, "error": why, "heartbeat": lost}
        print(f"clustertune-coalloc: {json.dumps(report)}", file=sys.stderr, flush=True)
    if why is not None:
        print(f"clustertune-coalloc: co-allocation failed, nothing started: {why}", file=sys.stderr)
    if lost is not None:
        print(f"clustertune-coalloc: heartbeat lost: {lost}; the job was stopped", file=sys.stderr)
        return HEARTBEAT_LOST
    return code


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def run_watched(
    command: list[str], grid: dict, wanted: dict[str, list[str]], interval: float
) -> tuple[int, str | None]:
    """Run the MPI launcher under the heartbeat: when a part of the job dies it is named
    on stderr at once and the launcher is stopped (SIGTERM, SIGKILL after a grace).
    Returns (exit status, what died or None). A job that failed by itself is checked once
    more, so a dead part is still named when the launcher noticed it first."""
    proc = subprocess.Popen(command, process_group=0)  # the launcher and its remote shells
    begin = time.monotonic()

    def signal_group(sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)

    def on_lost(message: str) -> None:
        print(
            f"clustertune-coalloc: heartbeat: {message} "
            f"({time.monotonic() - begin:.1f} s into the job); stopping it",
            file=sys.stderr,
            flush=True,
        )
        signal_group(signal.SIGTERM)

    if interval <= 0:
        try:
            return proc.wait(), None
        except BaseException:
            signal_group(signal.SIGTERM)
            raise
    with heartbeat.Heartbeat(grid, wanted, interval, on_lost) as beat:
        try:
            code = proc.wait()
        except BaseException:
            signal_group(signal.SIGTERM)
            raise
        if beat.lost is not None:  # the launcher is gone: its stragglers go too
            deadline = time.monotonic() + STOP_GRACE_S
            while time.monotonic() < deadline and _group_alive(proc.pid):
                time.sleep(0.1)
            signal_group(signal.SIGKILL)
    lost = beat.lost
    if lost is None and code != 0:
        lost = beat.check()
        if lost is not None:
            print(
                f"clustertune-coalloc: heartbeat: {lost} (found after the job failed)",
                file=sys.stderr,
                flush=True,
            )
    return code, lost


if __name__ == "__main__":
    sys.exit(main())
