"""``clustertune grid up|down|status|info|submit|compare``."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

from ... import vcluster
from ...commands import Output, open_store, positive_seconds, store_parser
from ...errors import UserError
from ...grid import info, jobs, staging, virtual
from ...launch import mpi
from ...runner import Run
from ...units import format_rate, parse_rate
from . import LEVEL, compare


def cmd_up(args: argparse.Namespace) -> Output:
    if args.sites > 1 and not args.wan_link:
        raise UserError("--sites needs --wan-link RATE (the link between sites)")
    schedulers = virtual.parse_schedulers(args.scheduler, args.sites)
    cplan, state = virtual.plan(
        args.name,
        args.sites,
        args.hosts_per_site,
        schedulers,
        parse_rate(args.link),
        parse_rate(args.wan_link) if args.wan_link else None,
        args.delay_us,
        args.wire,
    )
    state = virtual.up(cplan, state, timeout=args.start_timeout)
    return Output(state, describe(state))


def cmd_down(args: argparse.Namespace) -> Output:
    removed = virtual.down(args.name)
    left = virtual.leftovers(args.name)
    text = f"grid {args.name}: " + ("removed" if removed else "nothing to remove")
    if left:
        text += f"; LEFT BEHIND: {', '.join(left)}"
    return Output({"name": args.name, "removed": removed, "left": left}, text, 1 if left else 0)


def cmd_status(args: argparse.Namespace) -> Output:
    states = [virtual.load(n) for n in virtual.names()]
    states = [s for s in states if s]
    for s in states:
        s["down_daemons"] = virtual.healthy(s)
    return Output(states, "\n".join(describe(s) for s in states) or "no virtual grid is up")


def describe(state: dict) -> str:
    lines = [
        f"{state['name']}: {len(state['sites'])} site(s), link {format_rate(state['link_bps'])}"
        + f", wire {state.get('wire', 'tbf')}"  # grids older than the option were tbf
        + (f", wan {format_rate(state['wan_bps'])}" if state.get("wan_bps") else "")
    ]
    down = state.get("down_daemons", {})
    for s in state["sites"]:
        hosts = ",".join(h["name"] for h in s["hosts"])
        dead = down.get(s["name"])
        lines.append(
            f"  {s['name']:6} {s['scheduler']:5} contact {s['contact']:12} hosts {hosts}"
            + (f"  [DOWN: {', '.join(dead)}]" if dead else "")
        )
    return "\n".join(lines)


def cmd_info(args: argparse.Namespace) -> Output:
    state = virtual.load(args.name)
    if state is None:
        raise UserError(f"no virtual grid {args.name!r} (see 'clustertune grid status')")
    known = info.info(state, args.max_age)
    return Output(known, info.describe(known))


def _env(items: list[str]) -> dict[str, str]:
    env = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise UserError(f"--env {item!r}: expected NAME=VALUE")
        env[name] = value
    return env


def _mtime(path: Path) -> float | None:
    return path.stat().st_mtime if path.exists() else None


def job_run(
    args: argparse.Namespace, state: dict, job: jobs.GridJob, handle: jobs.Handle, requested: float
) -> Run:
    """The submitted job's run (level grid, kernel ``grid-job``; docs/grid.md says what its
    fields mean): a composite run, launched by the site's scheduler (no command of its
    own), from the job's request (``started``) to its result. Opened as soon as the site took
    the job, so the load at its start and end and, on a virtual grid, the wire's lateness
    (meta ``wire_late``) cover the job, not the moment its record is stored."""
    from ...grid.source import cluster_from_grid

    params = {
        "job": {k: v for k, v in asdict(job).items() if k != "barrier"},
        "site": handle.site,
        "backend": handle.backend,
        "grid": compare.grid_summary(state),
    }
    site = next(s for s in state["sites"] if s["name"] == handle.site)
    return Run(
        cluster_from_grid(state),
        open_store(args),
        level=LEVEL.name,
        kernel="grid-job",
        params=params,
        hosts=job.hosts or [h["name"] for h in site["hosts"]],
        composite=True,
        since=requested,
    )


def record_job(
    run: Run,
    state: dict,
    job: jobs.GridJob,
    handle: jobs.Handle,
    result: jobs.Result,
    staged: list,
    requested: float,
) -> None:
    """The job's answer in its run: its RSL attributes' outcome and its timeline
    (requested, started, ended from the job's own files), so the report lists it beside the
    co-allocated runs."""
    d = Path(handle.dir)
    site = next(s for s in state["sites"] if s["name"] == handle.site)
    started, ended = _mtime(d / "started"), _mtime(d / "exit")
    run.record["meta"]["coalloc"] = {
        "sites": {
            handle.site: {
                "scheduler": site["scheduler"],
                "allocation": handle.id,
                "hosts": job.hosts or [h["name"] for h in site["hosts"]],
                "requested": requested,
                "granted": started,
                "started": started,
                "ended": ended,
            }
        },
        "started": started is not None,
        "error": None,
    }
    run.result = {
        "verification": "not-verified",
        "figures": {
            "exit_status": result.exit_status,
            "job_s": round(ended - started, 3) if started and ended else None,
        },
        "detail": {"staged": staging.as_dicts(staged)},
    }
    if result.state != "done":
        run.problems.append(
            f"{result.state}, exit status {result.exit_status}\n{result.stderr[-2000:]}".strip()
        )


def cmd_submit(args: argparse.Namespace) -> Output:
    state = virtual.load(args.name)
    if state is None:
        raise UserError(f"no virtual grid {args.name!r} (see 'clustertune grid status')")
    job = jobs.GridJob(
        executable=args.executable,
        arguments=args.arguments,
        count=args.count,
        environment=_env(args.env),
        directory=args.directory,
        jobtype=args.jobtype,
        mpi=args.mpi,
        hosts=args.hosts.split(",") if args.hosts else None,
    )
    job.check()
    picked = ""
    if args.site == "auto":  # MDS's use in the seed: the site that can start it now
        args.site, _ = info.pick_site(state, job.count if job.jobtype == "mpi" else 1)
        picked = f"site chosen from the grid's information: {args.site}\n"
    backend = jobs.backend(state, args.site)
    staged: list = []
    target = None
    if args.stage_in or args.stage_out:
        if args.no_wait and args.stage_out:
            raise UserError("--stage-out needs the job's end: drop --no-wait")
        target, staged = staging.stage_in(state, args.site, args.stage_in)
        job.directory = job.directory or target
    requested = time.time()
    handle = backend.submit(job)
    if args.no_wait:
        return Output(asdict(handle), json.dumps(asdict(handle)))
    with job_run(args, state, job, handle, requested) as run:
        try:
            result = jobs.wait(backend, handle, args.timeout)
            if args.stage_out and result.state == "done":
                results = args.results or f"grid-results/{Path(handle.dir).name}"
                staged += staging.stage_out(state, args.site, target, args.stage_out, results)
        finally:
            if target is not None:
                staging.remove(state, args.site, target)
        record_job(run, state, job, handle, result, staged, requested)
    record = run.record
    payload = {
        "handle": asdict(handle),
        **asdict(result),
        "staged": staging.as_dicts(staged),
        "run_id": record["id"],
    }
    lines = [
        f"{t.direction:3} {t.name} {t.bytes} B sha256 {t.sha256[:16]}... verified" for t in staged
    ]
    text = (
        f"{handle.site} ({handle.backend}) job {handle.id}: {result.state}, exit "
        f"{result.exit_status}\n{result.stdout}{result.stderr}"
    ).rstrip()
    text = picked + "\n".join([*lines, text])
    return Output(payload, text, 0 if result.state == "done" else 1)


def compare_text(records: list[dict]) -> str:
    lines = []
    for r in records:
        p, f = r["params"], r["figures"]
        if p["comparison"] == "linpack":
            best = max((s["gflops"] for s in r["samples"] if s.get("passed")), default=None)
            shown = f"N={p['n']} " + (f"{best:.3f} Gflops" if best is not None else "no result")
        else:
            lat, bw = f.get("latency_us"), f.get("bandwidth_mbps")
            shown = (
                f"{p['mode']} latency {lat:.1f} us, bandwidth {bw:.1f} Mbit/s"
                if lat is not None and bw is not None
                else "no figures"
            )
        startup = f", allocation {f['allocation_s']:.2f} s" if "allocation_s" in f else ""
        lines.append(
            f"run {r['id']}: {p['comparison']:8} {p['placement']:6} ({p['path']}, "
            f"{','.join(r['meta']['hosts'])}, {r['meta']['mpi']['flavour']}) "
            f"{shown}{startup} -> {r['status']}"
        )
        if r["error"]:
            lines.append(f"  error: {r['error'].splitlines()[0]}")
    return "\n".join(lines)


def cmd_compare(args: argparse.Namespace) -> Output:
    kinds = tuple(k.strip() for k in args.kernels.split(",") if k.strip())
    mpis = tuple(m.strip() for m in args.mpi.split(",") if m.strip())
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    cases = compare.default_cases(
        kinds, mpis, args.n, args.nb, modes, args.max_size, not args.full_sweep, args.ranks
    )
    records = compare.run_cases(args.name, open_store(args), cases, args.timeout)
    ok = all(r["status"] == "ok" for r in records)
    return Output(records, compare_text(records), 0 if ok else 1)


def add_commands(sub, common) -> None:
    store = store_parser()  # no grid action reads --cluster: the grid is --name
    p = sub.add_parser("grid", help="virtual grid: sites with their own schedulers; jobs on them")
    gsub = p.add_subparsers(dest="grid_command", required=True)

    u = gsub.add_parser("up", parents=[store], help="build a virtual grid")
    u.add_argument("--name", required=True)
    u.add_argument("--sites", type=int, default=2)
    u.add_argument("--hosts-per-site", type=int, default=2)
    u.add_argument(
        "--scheduler",
        default="slurm",
        help=f"one of {', '.join(virtual.SCHEDULERS)}, or per site: "
        "site0=slurm,site1=ssh (default slurm)",
    )
    u.add_argument("--link", default="1gbit", help="link rate of each host inside a site")
    u.add_argument("--wan-link", help="rate of the link between sites, e.g. 100mbit")
    u.add_argument("--delay-us", type=int, default=0, help="per-packet delay on each host")
    u.add_argument(
        "--wire", choices=vcluster.WIRES, default=vcluster.DEFAULT_WIRE, help=vcluster.WIRE_HELP
    )
    u.add_argument(
        "--start-timeout",
        type=positive_seconds,
        default=30.0,
        help="seconds for the daemons of a site to come up",
    )
    u.set_defaults(func=cmd_up)

    d = gsub.add_parser("down", parents=[store], help="stop the daemons, remove the grid")
    d.add_argument("--name", required=True)
    d.set_defaults(func=cmd_down)

    s = gsub.add_parser("status", parents=[store], help="the virtual grids and their daemons")
    s.set_defaults(func=cmd_status)

    i = gsub.add_parser(
        "info",
        parents=[store],
        help="resources per site: CPU, memory, load, scheduler state, MPI, links",
    )
    i.add_argument("--name", required=True)
    i.add_argument(
        "--max-age",
        type=float,
        default=30.0,
        help="answer from the cache while younger than this (s; 0: ask now)",
    )
    i.set_defaults(func=cmd_info)

    j = gsub.add_parser("submit", parents=[store], help="run a job on one site (RSL's attributes)")
    j.add_argument("--name", required=True, help="the grid")
    j.add_argument("--site", required=True, help="a site, or auto: the one with most free CPUs")
    j.add_argument("--count", type=int, default=1)
    j.add_argument("--jobtype", choices=jobs.JOBTYPES, default="single")
    j.add_argument("--mpi", choices=mpi.NAMES, default=mpi.DEFAULT.name)
    j.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    j.add_argument("--directory")
    j.add_argument("--hosts", help="hosts of the site (default: all)")
    j.add_argument("--timeout", type=positive_seconds, default=120.0)
    j.add_argument("--no-wait", action="store_true", help="print the handle and return")
    j.add_argument(
        "--stage-in",
        action="append",
        default=[],
        metavar="FILE",
        help="copy FILE to the job's run directory on the site first (checksummed)",
    )
    j.add_argument(
        "--stage-out",
        action="append",
        default=[],
        metavar="NAME",
        help="fetch NAME from the run directory after the job (checksummed)",
    )
    j.add_argument("--results", help="where --stage-out files go (default grid-results/<job>)")
    j.add_argument("executable")
    j.add_argument("arguments", nargs=argparse.REMAINDER)
    j.set_defaults(func=cmd_submit)

    c = gsub.add_parser(
        "compare", parents=[store], help="seeds/000: a kernel inside one site vs across two sites"
    )
    c.add_argument("--name", required=True, help="the grid (two sites or more)")
    c.add_argument("--kernels", default="linpack,pingpong", help="linpack, pingpong or both")
    c.add_argument(
        "--mpi",
        default=mpi.DEFAULT.name,
        help=f"{', '.join(mpi.NAMES)} or several (comma-separated)",
    )
    c.add_argument("--modes", default="pingpong", help="ping-pong modes: pingpong,nonblocking")
    c.add_argument("-N", "--n", type=int, default=2000, help="Linpack order")
    c.add_argument("--nb", type=int, default=64)
    c.add_argument(
        "--ranks",
        type=int,
        default=2,
        help="Linpack's ranks, one per host (within: that many hosts in site0)",
    )
    c.add_argument("--max-size", type=int, default=4 << 20, help="ping-pong's largest message")
    c.add_argument("--full-sweep", action="store_true", help="the ping-pong's full sweep")
    c.add_argument("--timeout", type=positive_seconds, default=300.0, help="seconds per run")
    c.set_defaults(func=cmd_compare)
