"""``clustertune tune linpack``: arguments, checks before anything runs, the session's
``tune`` record and its text."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ... import runner
from ...commands import Output, add_job_options, cluster_of, open_store, positive_seconds
from ...errors import UserError
from ..linpack.api import LINPACK_KERNEL, TIMEOUT_S
from ..network.api import TCP_KERNEL, parse_between
from ..qcd.api import QCD_KERNEL, parse_dims
from . import LEVEL, linpack, tcp
from .space import Config

ORDER = (
    "blas",
    "env",
    "layout",
    "N",
    "NB",
    "PxQ",
    "DEPTH",
    "BCAST",
    "SWAP",
    "PFACT",
    "RFACT",
    "NBMIN",
    "confirm",
    "at N",
)


def check(args: argparse.Namespace) -> Path:
    """Bad input as one line (exit 2) before anything is launched."""
    if args.np < 1:
        raise UserError(f"--np must be at least 1, got {args.np}")
    if not args.budget > 0:
        raise UserError(f"--budget must be a positive number of minutes, got {args.budget}")
    if not 0.0 < args.mem_fraction <= 1.0:
        raise UserError(f"--mem-fraction must be in (0, 1], got {args.mem_fraction}")
    for name in ("n_search", "n_confirm", "n_scale"):
        value = getattr(args, name)
        if value is not None and value < linpack.N_MIN:
            flag = "--" + name.replace("_", "-")
            raise UserError(f"{flag} must be at least {linpack.N_MIN}, got {value}")
    out = Path(args.out)
    parent = out.resolve().parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise UserError(f"--out {args.out}: directory {parent} is missing or not writable")
    return out


def text(summary: dict, record: dict, out: Path) -> str:
    lines = [f"tune {summary['session']} (record {record['id']}): wrote {out}"]
    lines += [f"  {key:<8} {summary['why'][key]}" for key in ORDER if key in summary["why"]]
    lines.append(
        f"  evidence: {len(summary['runs'])} stored runs "
        f"{summary['runs'][0]}..{summary['runs'][-1]} (params.tune = {summary['session']})"
    )
    return "\n".join(lines)


def cmd_linpack(args: argparse.Namespace) -> Output:
    out = check(args)
    cluster = cluster_of(args)
    store = open_store(args)
    tuner = linpack.Tuner(
        cluster,
        store,
        args.np,
        args.mpi,
        args.budget * 60.0,
        hosts=args.hosts,
        timeout=args.timeout,
        mem_fraction=args.mem_fraction,
        n_search=args.n_search,
        n_confirm=args.n_confirm,
        n_scale=args.n_scale,
        blas_filter=args.blas,
    )
    summary = tuner.tune()
    linpack.write(out, summary["hpl_dat"])
    record = store_linpack(cluster, store, tuner, summary, out, args.budget)
    return session_output(summary, record, text(summary, record, out))


def session_output(summary: dict, record: dict, text: str) -> Output:
    """Every tuner's answer: exit 1 when its session record failed (a run its choice rests
    on failed verification, or the choice was not run again), the record's error naming
    those runs under the text."""
    if record["status"] == "ok":
        return Output(summary | {"record": record["id"]}, text)
    why = f"  session {record['status']}: {record['error']}"
    return Output(summary | {"record": record["id"], "error": record["error"]}, f"{text}\n{why}", 1)


def store_linpack(
    cluster, store, tuner: linpack.Tuner, summary: dict, out: Path, budget_min: float
) -> dict:
    """The session's ``tune`` record (params.what = linpack), its HPL.dat at ``out``;
    verified by the runs the search read and the chosen configuration's runs after it."""
    summary["out"] = str(out.resolve())
    cfg = Config(**summary["config"])
    with runner.Run(
        cluster,
        store,
        level=LEVEL.name,
        kernel=LINPACK_KERNEL,
        composite=True,
        params={
            "tune": summary["session"],
            "what": "linpack",
            "np": tuner.np,
            "budget_min": budget_min,
        },
        np=cfg.ranks,
        mpi=tuner.mpi,
        env=tuner.env(tuner.blas_of(cfg.blas), cfg.threads),
    ) as run:
        run.rests_on(*tuner.evidence(cfg))
        run.result = {
            "figures": {
                "gflops_confirm": summary["gflops_confirm"],
                "gflops_search": summary["gflops_search"],
                "dgemm_gflops": summary["dgemm_gflops"],
                "n": summary["n"],
                "trials": len(summary["runs"]),
            },
            "detail": summary,
        }
    return run.record


def store_tcp(cluster, store, summary: dict) -> dict:
    """The session's ``tune`` record (params.what = tcp), verified by the ping-pongs the
    choice read: the default buffers' and every sweep run that came out ok, the chosen
    size's among them (the default's, when it is kept)."""
    a, b = summary["pair"]
    base, *sweep = [store.get(run_id) for run_id in summary["runs"]]
    kept = [base, *(r for r in sweep if r["status"] == "ok")]
    size = summary["sockbuf"]
    chosen = [base] if size is None else [r for r in sweep if r["params"].get("sockbuf") == size]
    with runner.Run(
        cluster,
        store,
        level=LEVEL.name,
        kernel=TCP_KERNEL,
        composite=True,
        params={"tune": summary["session"], "what": "tcp", "between": [a, b]},
        hosts=[a, b],
    ) as run:
        run.rests_on(kept, chosen)
        run.result = {
            "detail": summary,
            "figures": {
                "sockbuf": summary["sockbuf"],
                "mbps": summary["mbps"],
                "bdp_bytes": summary["bdp_bytes"],
            },
        }
    return run.record


def tcp_text(summary: dict, record: dict) -> str:
    a, b = summary["pair"]
    head = f"tune tcp {summary['session']} (record {record['id']}) {a} -> {b}"
    lines = [head, *("  " + line for line in summary["lines"]), *summary["sysctl"]]
    lines.append(f"  evidence: runs {', '.join(map(str, summary['runs']))}")
    return "\n".join(lines)


def cmd_tcp(args: argparse.Namespace) -> Output:
    cluster = cluster_of(args)
    a, b = parse_between(cluster, args.between)
    if a == b:
        raise UserError("tune tcp needs two hosts (--cluster with two or more, or --between)")
    store = open_store(args)
    try:
        summary = tcp.tune(cluster, store, a, b, args.timeout)
    except tcp.BaseFailed as failed:
        return Output(
            {"error": str(failed), "runs": [failed.record["id"]]}, f"tune tcp: {failed}", 1
        )
    record = store_tcp(cluster, store, summary)
    return session_output(summary, record, tcp_text(summary, record))


def cmd_qcd(args: argparse.Namespace) -> Output:
    from . import qcd

    lattice = parse_dims(args.lattice, "--lattice")
    if args.np < 1:
        raise UserError(f"--np must be at least 1, got {args.np}")
    qcd.candidates(args.np, lattice)  # no grid divides the lattice: one line, nothing run
    cluster = cluster_of(args)
    store = open_store(args)
    summary = qcd.tune(
        cluster,
        store,
        lattice=lattice,
        np=args.np,
        mpi=args.mpi,
        sweeps=args.sweeps,
        or_steps=args.or_steps,
        timeout=args.timeout,
        hosts=args.hosts,
        max_candidates=args.max_candidates,
    )
    record = store_qcd(cluster, store, summary, args.sweeps)
    return session_output(summary, record, qcd_text(summary, record))


def store_qcd(cluster, store, summary: dict, sweeps: int) -> dict:
    """The session's ``tune`` record (params.what = qcd), verified by the runs the choice
    read (every ok one) and the chosen grid's; failed verification also if the plaquette
    series differed between grids."""
    runs = [store.get(run_id) for run_id in summary["runs"]]
    chosen_ids = next(c["runs"] for c in summary["candidates"] if c["grid"] == summary["grid"])
    with runner.Run(
        cluster,
        store,
        level=LEVEL.name,
        kernel=QCD_KERNEL,
        composite=True,
        params={
            "tune": summary["session"],
            "what": "qcd",
            "np": summary["np"],
            "lattice": summary["lattice"],
            "sweeps": sweeps,
        },
        np=summary["np"],
        mpi=summary["mpi"],
        hosts=summary["hosts"],
    ) as run:
        run.rests_on(
            [r for r in runs if r["status"] == "ok"], [r for r in runs if r["id"] in chosen_ids]
        )
        run.result = {
            # the level's own check beside the runs': the same series from every grid
            **({"verification": "failed"} if summary["series_identical"] is False else {}),
            "detail": summary,
            "figures": {
                "gflops": summary["gflops"],
                "split_dims": summary["split_dims"],
                "no_overlap_gflops": summary["no_overlap_gflops"],
            },
        }
    return run.record


def qcd_text(summary: dict, record: dict) -> str:
    return "\n".join(
        [
            f"tune qcd {summary['session']} (record {record['id']})",
            *("  " + line for line in summary["lines"]),
            f"  run: {summary['command']}",
            f"  evidence: runs {', '.join(map(str, summary['runs']))} "
            f"(params.tune = {summary['session']})",
        ]
    )


def add_commands(sub, common) -> None:
    t = sub.add_parser("tune", help="measure and write tuned settings")
    tsub = t.add_subparsers(dest="tune_command", required=True)
    p = tsub.add_parser("linpack", parents=[common], help="search HPL.dat settings, write HPL.dat")
    add_job_options(p, timeout=TIMEOUT_S)
    p.add_argument("--budget", type=float, default=10.0, help="minutes for the search (10)")
    p.add_argument("--out", default="HPL.dat", help="the tuned HPL.dat (./HPL.dat)")
    p.add_argument(
        "--mem-fraction",
        type=float,
        default=0.8,
        help="N of the HPL.dat: this share of the hosts' memory (0.8)",
    )
    p.add_argument("--blas", help="only these BLAS candidates (names or directories)")
    p.add_argument("--n-search", type=int, help="N of the search trials (default: from budget)")
    p.add_argument("--n-confirm", type=int, help="N of the confirmation (default: from budget)")
    p.add_argument(
        "--n-scale", type=int, help="N where layout and NB are judged again (default: from budget)"
    )
    p.set_defaults(func=cmd_linpack)

    q = tsub.add_parser(
        "qcd",
        parents=[common],
        help="QCD decomposition for a lattice and rank count on this network",
    )
    add_job_options(q, timeout=600.0)
    q.add_argument("--lattice", default="8x8x8x8", help="XxYxZxT (default 8x8x8x8)")
    q.add_argument("--sweeps", type=int, default=2, help="sweeps per candidate (default 2)")
    q.add_argument(
        "--or-steps",
        type=int,
        default=4,
        help="over-relaxation passes per heat-bath pass (default 4)",
    )
    q.add_argument(
        "--max-candidates",
        type=int,
        default=6,
        help="decompositions measured, least halo first (default 6)",
    )
    q.set_defaults(func=cmd_qcd)

    c = tsub.add_parser("tcp", parents=[common], help="TCP socket buffer size for a host pair")
    c.add_argument("--between", metavar="HOST,HOST", help="the pair (default: first two hosts)")
    c.add_argument(
        "--timeout", type=positive_seconds, help="seconds per ping-pong (default: from the link)"
    )
    c.set_defaults(func=cmd_tcp)
