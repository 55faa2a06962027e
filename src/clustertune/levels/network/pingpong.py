"""``net pingpong``: one host pair, one layer (TCP, MPI), one stored record per run.

TCP: the server (``ct-tcp-pingpong --server``) is spawned on the second host and the
client, which drives the sweep and writes the samples, runs on the first; both are
stopped whatever happens. MPI: ``ct-mpi-pingpong`` with two ranks, one per host, through
the runner. Figures come from :func:`analysis.summarize` (definitions: docs/figures.md).
"""

from __future__ import annotations

import dataclasses
import os
import re
import select
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ... import kernels, runner
from ...cluster import Cluster
from ...errors import UserError
from ...kernels import KernelOutput
from ...launch import Completed, Launcher, launcher_for
from ...launch.process import kill_job
from ...netns import tbf_burst_bytes
from ...results import Store
from . import analysis
from .pvm import PvmMachine

LEVEL = "network"
TCP_KERNEL = "ct-tcp-pingpong"
MPI_KERNEL = "ct-mpi-pingpong"
PVM_KERNEL = "ct-pvm-pingpong"
LAYERS = ("tcp", "mpi", "pvm")
MODES = ("pingpong", "stream", "bidir", "nonblocking")
# How the TCP kernel waits for data: "block" sleeps in recv (NetPIPE's way, the default),
# "poll" spins on non-blocking calls, as the MPI libraries' progress engines do (strace:
# MPICH/UCX epoll_wait(0), OpenMPI poll(0)); MPI over TCP compares with "poll".
WAITS = ("block", "poll")
# The kernels' own names of each mode; a mode a layer lacks is absent.
KERNEL_MODES = {
    "tcp": {"pingpong": "pingpong", "stream": "stream", "bidir": "bidir"},
    "mpi": {"pingpong": "blocking", "nonblocking": "nonblocking", "bidir": "bidir"},
    "pvm": {"pingpong": "pingpong"},  # the PVM kernel has the one mode, no --mode flag
}
MAX_MESSAGE_BYTES = 1 << 30  # the kernels' limit
DEFAULT_MAX_SIZE = 8 << 20
# Bandwidth on a tbf-shaped virtual cluster: only from messages at least this many tbf
# buckets long (the bucket's bytes pass unshaped, and refill while the reply travels
# back). 16 buckets is the 256 KiB of research/virtual-cluster.md at 100 Mbit and 2 MB
# at 1 Gbit, where 256 KiB-1 MiB still read 1.1-1.7 Gbit/s.
TBF_BUCKETS = 16
SERVER_START_S = 15.0  # the TCP server must say where it listens within this
CONNECT_TIMEOUT_S = 10.0  # the client gives up on an unreachable server after this
SERVER_EXIT_S = 5.0  # the server's grace to finish after its client left


# --------------------------------------------------------------------------- choices


def parse_between(cluster: Cluster, text: str | None) -> tuple[str, str]:
    """``HOST,HOST`` -> the pair; default the first two hosts (this host twice if alone)."""
    if text is None:
        names = [h.name for h in cluster.hosts]
        return (names[0], names[1]) if len(names) > 1 else (names[0], names[0])
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise UserError(f"--between {text!r}: expected two hosts, e.g. host0,host1")
    for name in parts:
        cluster.host(name)  # names the cluster's hosts when unknown
    return parts[0], parts[1]


def check_size(max_size: int) -> None:
    if not 1 <= max_size <= MAX_MESSAGE_BYTES:
        raise UserError(f"--max-size {max_size} B: must be between 1 B and 1 GiB")


def pair_rate_bps(cluster: Cluster, a: str, b: str) -> int | None:
    """The slowest nominal link on the path a-b; None when neither is known."""
    rates = [r for r in (cluster.host(a).link_bps, cluster.host(b).link_bps) if r]
    return min(rates) if rates else None


def bandwidth_min_size(cluster: Cluster, a: str, b: str) -> int:
    """Smallest message whose throughput counts as bandwidth on this pair (0: all do).

    Only a shaped virtual cluster has the tbf artefact; real links and unshaped veths
    quote bandwidth from every size, as NetPIPE does.
    """
    rate = pair_rate_bps(cluster, a, b)
    if cluster.launcher != "vcluster" or rate is None:
        return 0
    return max(analysis.TBF_BANDWIDTH_MIN_SIZE_BYTES, TBF_BUCKETS * tbf_burst_bytes(rate))


def sweep_timeout_s(cluster: Cluster, a: str, b: str, max_size: int) -> float:
    """Generous bound for one sweep: a fixed part plus ~200 one-way times of the largest
    message at the nominal rate (the top sizes take 3 perturbations x 4 repeats x 2 ways)."""
    rate = pair_rate_bps(cluster, a, b) or 10**8
    return 120.0 + 200.0 * max_size * 8 / rate


# --------------------------------------------------------------------------- figures


def points(samples: Sequence[Mapping]) -> list[dict]:
    """The curve as the JSON carries it: size, one-way time t_min, throughput."""
    return [
        {
            "size": int(s["size"]),
            "time_s": float(s["t_min_s"]),
            "throughput_mbps": int(s["size"]) * 8 / float(s["t_min_s"]) / analysis.MBIT,
        }
        for s in samples
        if float(s["t_min_s"]) > 0
    ]


def derive_for(min_size: int):
    """The runner's ``derive``: every figure of the sweep. A finished sweep must give all
    of them (otherwise ValueError: the run is failed); a cut-off one gives what its
    points allow and says what is missing."""

    def derive(samples: list[dict], result: dict | None) -> dict:
        figures: dict = {"bandwidth_min_size_bytes": min_size}
        if result is not None:
            return figures | analysis.summarize(samples, min_size)
        try:
            curve = analysis.curve_from_points(samples)
        except ValueError as exc:
            return figures | {"unavailable": str(exc)}
        missing = []
        for name, compute in (
            ("latency_us", lambda: analysis.latency_us(curve)),
            ("bandwidth_mbps", lambda: analysis.bandwidth_mbps(curve, min_size)),
            ("saturation_point_bytes", lambda: analysis.saturation_point_bytes(curve)),
            ("n_half_bytes", lambda: analysis.n_half_bytes(curve, min_size)),
            ("dips", lambda: analysis.dips(curve)),
        ):
            try:
                figures[name] = compute()
            except ValueError as exc:
                missing.append(f"{name}: {exc}")
        if missing:
            figures["unavailable"] = "; ".join(missing)
        return figures

    return derive


# --------------------------------------------------------------------------- TCP pair


@dataclass
class TcpRun:
    """A finished client/server pair: what the runner needs to complete a record."""

    completed: Completed  # the client's; its stderr ends with the server's
    output: KernelOutput

    @property
    def unreachable(self) -> str | None:
        """The client's reason when it never reached the server (nothing measured)."""
        if self.output.samples:
            return None
        for err in self.output.errors:
            if err.startswith(("cannot connect", "cannot resolve")):
                return err
        return None


def _await_port(server, host: str) -> int:
    """The port the TCP server listens on, from its first stderr lines.

    Reads the raw pipe (no text buffering, so select() sees every byte) and gives up
    after SERVER_START_S or when the server, or the agent reaching its host, exits.
    """
    deadline = time.monotonic() + SERVER_START_S
    fd, text = server.stderr.fileno(), b""
    while (left := deadline - time.monotonic()) > 0:
        if not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        text += chunk
        match = re.search(rb"listening on port (\d+)\n", text)
        if match:
            return int(match.group(1))
    detail = text.decode(errors="replace").strip() or f"no answer within {SERVER_START_S:.0f} s"
    raise UserError(f"cannot start the TCP server on {host}: {detail[-300:]}")


def _stop(server, grace: float) -> tuple[str, str]:
    """Let the server finish (it exits after its client's goodbye), else kill its job."""
    try:
        out, err = server.communicate(timeout=grace)
    except subprocess.TimeoutExpired:  # still running: the client died or never came
        kill_job(server, server.job_id)
        out, err = server.communicate()
    return out or "", err or ""


def run_tcp_pair(
    launcher: Launcher,
    a: str,
    b: str,
    client_args: list[str],
    timeout: float,
    sockbuf: int | None = None,
) -> TcpRun:
    """Server on ``b``, client on ``a`` (connecting to b's address); always cleaned up."""
    kernel = str(kernels.kernel_path(TCP_KERNEL, "serial"))
    address = launcher.cluster.host(b).address or b
    server_argv = [
        kernel,
        "--server",
        "--port",
        "0",
        "--accept-timeout",
        str(CONNECT_TIMEOUT_S + 20),
    ]
    if sockbuf:
        server_argv += ["--sockbuf", str(sockbuf)]
    server = launcher.spawn_on_host(b, server_argv)
    grace = 0.0  # kill at once unless a client ran
    try:
        port = _await_port(server, b)
        peer = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
        argv = [
            kernel,
            "--connect",
            peer,
            "--connect-timeout",
            str(CONNECT_TIMEOUT_S),
            *client_args,
        ]
        if sockbuf:
            argv += ["--sockbuf", str(sockbuf)]
        completed = launcher.run_on_host(a, argv, timeout)
        grace = SERVER_EXIT_S
    finally:
        server_out, server_err = _stop(server, grace)
    output = kernels.parse_output(completed.stdout)
    served = kernels.parse_output(server_out)
    output.errors += [f"server on {b}: {e}" for e in served.errors]
    if served.result and served.result.get("verification") == "failed" and output.result:
        output.result["verification"] = "failed"  # the server saw corrupt data
    if output.result is not None:
        output.result.setdefault("detail", {})["server"] = served.result and served.result.get(
            "detail"
        )
    if server_err.strip():  # e.g. the server's own verification message: keep it with the run
        joined = f"{completed.stderr.rstrip()}\n[server on {b}] {server_err.strip()}".lstrip()
        completed = dataclasses.replace(completed, stderr=joined)
    return TcpRun(completed, output)


# --------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class PingpongSpec:
    layer: str
    a: str
    b: str
    mode: str = "pingpong"
    mpi: str = "openmpi"
    max_size: int = DEFAULT_MAX_SIZE
    sockbuf: int | None = None
    nagle: bool = False
    timeout: float | None = None
    wait: str = "block"  # TCP only: see WAITS
    extra_args: tuple[str, ...] = ()  # sweep options passed through (tests, demo)

    def params(self, min_size: int) -> dict:
        return {
            "command": "pingpong",
            "layer": self.layer,
            "mode": self.mode,
            "between": [self.a, self.b],
            "mpi": self.mpi if self.layer == "mpi" else None,
            "max_size": self.max_size,
            "sockbuf": self.sockbuf,
            "nagle": self.nagle,
            "wait": self.wait if self.layer == "tcp" else None,
            "bandwidth_min_size": min_size,
            "extra_args": list(self.extra_args),
        }


def validate(cluster: Cluster, spec: PingpongSpec) -> int:
    """Reject what cannot run before anything starts; returns the bandwidth min size."""
    if spec.layer == "pvm":
        path = kernels.build_dir() / "serial" / "bin" / PVM_KERNEL
        if not path.is_file():
            raise UserError(f"PVM kernel not built ({path} missing): --layer pvm is not available")
    if spec.layer not in KERNEL_MODES:
        raise UserError(f"--layer {spec.layer!r}: expected one of {', '.join(LAYERS)}")
    if spec.mode not in KERNEL_MODES[spec.layer]:
        known = ", ".join(KERNEL_MODES[spec.layer])
        raise UserError(
            f"--mode {spec.mode} does not exist for --layer {spec.layer} (known: {known})"
        )
    check_size(spec.max_size)
    if spec.sockbuf is not None:
        if spec.layer != "tcp":
            raise UserError(
                "--sockbuf sets the TCP kernel's socket buffers: use it with --layer tcp"
            )
        if not 1 <= spec.sockbuf <= 2**31 - 1:
            raise UserError(f"--sockbuf {spec.sockbuf} B: must be between 1 B and 2 GiB")
    if spec.nagle and spec.layer != "tcp":
        raise UserError("--nagle applies to --layer tcp only")
    if spec.wait not in WAITS:
        raise UserError(f"--wait {spec.wait!r}: expected one of {', '.join(WAITS)}")
    if spec.wait != "block" and spec.layer != "tcp":
        raise UserError(
            "--wait applies to --layer tcp only (an MPI library waits its own way: it polls)"
        )
    cluster.host(spec.a), cluster.host(spec.b)
    min_size = bandwidth_min_size(cluster, spec.a, spec.b)
    if spec.max_size < 2 * min_size:
        raise UserError(
            f"--max-size {spec.max_size} B is too short for this shaped virtual cluster: its "
            f"bandwidth is read from messages >= {min_size} B (tbf artefact); use "
            f"--max-size {_round_up_pow2(2 * min_size)} or more"
        )
    return min_size


def _round_up_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length()


def _sweep_args(spec: PingpongSpec) -> list[str]:
    args = ["--max-size", str(spec.max_size)]
    if spec.layer != "pvm":
        args = ["--mode", KERNEL_MODES[spec.layer][spec.mode], *args]
    if spec.nagle:
        args.append("--nagle")
    if spec.layer == "tcp" and spec.wait != "block":
        args += ["--wait", spec.wait]
    return args + list(spec.extra_args)


def reachable(cluster: Cluster, a: str, b: str) -> None:
    """A one-byte TCP exchange from a to b, so an unreachable host is a quick user error
    rather than an MPI job waiting for its timeout."""
    if a == b:
        return
    run = run_tcp_pair(
        launcher_for(cluster),
        a,
        b,
        ["--max-size", "1", "--perturbation", "0", "--trials", "3"],
        60.0,
    )
    if run.unreachable:
        raise UserError(f"{b} is unreachable from {a}: {run.unreachable}")


def run_pingpong(cluster: Cluster, store: Store, spec: PingpongSpec) -> dict:
    """One sweep on one pair; the record is stored whatever the outcome."""
    min_size = validate(cluster, spec)
    timeout = spec.timeout or sweep_timeout_s(cluster, spec.a, spec.b, spec.max_size)
    derive = derive_for(min_size)
    if spec.layer == "mpi":
        reachable(cluster, spec.a, spec.b)
        hosts = [spec.a] if spec.a == spec.b else [spec.a, spec.b]
        return runner.run_kernel(
            cluster, store, level=LEVEL, kernel=MPI_KERNEL, np=2, mpi=spec.mpi,
            args=_sweep_args(spec), params=spec.params(min_size), hosts=hosts,
            timeout=timeout, derive=derive,
        )  # fmt: skip
    kernel = TCP_KERNEL if spec.layer == "tcp" else PVM_KERNEL
    hosts = list(dict.fromkeys([spec.a, spec.b]))
    record = runner.new_record(LEVEL, kernel, cluster, spec.params(min_size), hosts)
    if spec.layer == "tcp":
        run = run_tcp_pair(
            launcher_for(cluster), spec.a, spec.b, _sweep_args(spec), timeout, spec.sockbuf
        )
        if run.unreachable:
            raise UserError(f"{spec.b} is unreachable from {spec.a}: {run.unreachable}")
        completed, output = run.completed, run.output
    else:
        reachable(cluster, spec.a, spec.b)
        path = kernels.kernel_path(PVM_KERNEL, "serial")
        with PvmMachine(cluster, hosts, path.parent) as machine:
            completed = launcher_for(cluster).run_on_host(
                spec.a, [str(path), "--host", spec.b, *_sweep_args(spec)], timeout,
                machine.env(spec.a),
            )  # fmt: skip
        output = kernels.parse_output(completed.stdout)
    runner.complete_record(record, completed, output, derive)
    store.save(record)
    return record


def run_pingpongs(
    cluster: Cluster, store: Store, spec: PingpongSpec, sockbufs: list[int] | None
) -> list[dict]:
    """One run, or one per socket-buffer size of a sweep (each its own record)."""
    if not sockbufs:
        return [run_pingpong(cluster, store, spec)]
    specs = [
        PingpongSpec(**{**spec.__dict__, "sockbuf": size})  # frozen: copy with the size
        for size in sockbufs
    ]
    for s in specs:
        validate(cluster, s)  # every size is checked before the first run starts
    return [run_pingpong(cluster, store, s) for s in specs]


# --------------------------------------------------------------------------- output


FIGURE_KEYS = (
    "latency_us", "bandwidth_mbps", "saturation_point_bytes", "n_half_bytes",
    "preferred_block_range_bytes", "dips", "bandwidth_min_size_bytes",
)  # fmt: skip


def run_json(record: dict) -> dict:
    """The ``net pingpong --json`` document of one run."""
    p, f = record["params"], record["figures"]
    return {
        "run_id": record["id"],
        "status": record["status"],
        "error": record["error"],
        "cluster": record["meta"]["cluster"]["name"],
        "layer": p["layer"],
        "mode": p["mode"],
        "mpi": p["mpi"],
        "between": p["between"],
        "sockbuf": p["sockbuf"],
        "nagle": p["nagle"],
        "wait": p.get("wait"),
        **{k: f.get(k) for k in FIGURE_KEYS},
        "points": points(record["samples"]),
    }


def _fmt(value, spec: str, unit: str) -> str:
    return "n/a" if value is None else f"{value:{spec}} {unit}"


def run_text(record: dict) -> str:
    j = run_json(record)
    layer = j["layer"] + (f" ({j['mpi']})" if j["mpi"] else "")
    low_high = j["preferred_block_range_bytes"] or [None, None]
    lines = [
        f"run {j['run_id']}: {layer} {j['mode']} {'-'.join(j['between'])} on {j['cluster']}"
        + (f", wait {j['wait']}" if j["wait"] and j["wait"] != "block" else "")
        + (f", sockbuf {j['sockbuf']} B" if j["sockbuf"] else "")
        + f" -> {j['status']}",
        f"  latency          {_fmt(j['latency_us'], '.1f', 'µs')}",
        f"  bandwidth        {_fmt(j['bandwidth_mbps'], '.1f', 'Mbit/s')}"
        + (
            f" (messages >= {j['bandwidth_min_size_bytes']} B)"
            if j["bandwidth_min_size_bytes"]
            else ""
        ),
        f"  saturation point {_fmt(j['saturation_point_bytes'], '.0f', 'B')}",
        f"  n½               {_fmt(j['n_half_bytes'], '.0f', 'B')}",
        f"  preferred blocks {_fmt(low_high[0], '.0f', 'B')} .. {_fmt(low_high[1], '.0f', 'B')}",
        f"  dips             {len(j['dips'] or [])}"
        + "".join(f"\n    at {d['size']} B: {d['throughput_mbps']:.1f} Mbit/s, "
                  f"{100 * d['depth_ratio']:.0f} % of the envelope" for d in j["dips"] or []),
        f"  points           {len(j['points'])}",
    ]  # fmt: skip
    if record["error"]:
        lines.append(f"  error: {record['error']}")
    return "\n".join(lines)
