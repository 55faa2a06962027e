"""``net pingpong``: one host pair, one layer (TCP, MPI, PVM), one stored record per run.

TCP: the server (``ct-tcp-pingpong --server``) is a service of the run on the second
host and the client, which drives the sweep and writes the samples, runs on the first;
both are stopped whatever happens. MPI: ``ct-mpi-pingpong`` with two ranks, one per
host. PVM: the PVM kernel on the first host inside a PVM virtual machine (pvm.py).
Every run goes through the runner. Figures come from :func:`analysis.summarize`
(definitions: docs/figures.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ... import kernels
from ...cluster import Cluster
from ...errors import UserError
from ...kernels import SERIAL, KernelOutput
from ...launch import mpi as mpi_flavours
from ...launch.base import Launcher
from ...launch.launchers import launcher_for
from ...netns import tbf_burst_bytes
from ...results import Store
from ...runner import Run, Step, labels_text
from . import LEVEL, MPI_KERNEL, PVM_KERNEL, TCP_KERNEL, analysis
from .pvm import PvmMachine

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
# The reachability check's connect bound: a listening peer on a LAN answers a SYN at once,
# and 4 s leaves room for three attempts (the client sends a new SYN after 0.5-1 s, then
# 1-2 s: a link down for up to ~2 s) while a dead host costs 4 s a check, not 10.
REACH_CONNECT_S = 4.0


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


def check_size(size: int, option: str = "--max-size") -> None:
    """``option`` names the size in the caller's command (net matrix: --size)."""
    if not 1 <= size <= MAX_MESSAGE_BYTES:
        raise UserError(f"{option} {size} B: must be between 1 B and 1 GiB")


SHAPED_LAUNCHERS = ("vcluster", "grid")  # hosts whose links are tbf-shaped namespaces


def pair_rate_bps(cluster: Cluster, a: str, b: str) -> int | None:
    """The slowest nominal link on the path a-b (the sites' WAN links too when a and b are
    in different sites); None when none is known."""
    links = [cluster.host(a).link_bps, cluster.host(b).link_bps]
    site_a, site_b = cluster.host(a).site, cluster.host(b).site
    if site_a != site_b:
        links += [cluster.site(site_a).wan_bps, cluster.site(site_b).wan_bps]
    rates = [r for r in links if r]
    return min(rates) if rates else None


# Launchers whose hosts all run on this machine's CPUs (namespaces, or this host alone).
SHARED_CPU_LAUNCHERS = ("vcluster", "grid", "local")
# Where the two ends of a TCP pair run: the CPU of the client's end and of the server's
# (taskset), or None for the scheduler's choice.
Placement = tuple[str, str] | None


def shares_cpus(cluster: Cluster, hosts: Sequence[str]) -> bool:
    """Whether these hosts run on the same CPUs: a cluster file saying so
    (``shared_cpus = true``), or hosts whose launcher keeps them on this machine."""
    return cluster.shared_cpus or all(cluster.launcher_of(h) in SHARED_CPU_LAUNCHERS for h in hosts)


def pinned(argv: list[str], cpu: str | None) -> list[str]:
    """``argv`` run on that CPU alone (None: wherever the scheduler puts it)."""
    return ["taskset", "-c", cpu, *argv] if cpu is not None else argv


def tbf_bucket(cluster: Cluster, hosts: Sequence[str]) -> bool:
    """Whether links of these hosts are a tbf bucket, whose mid-size messages outrun the
    wire: shaped virtual hosts (a virtual cluster or grid) unless on the paced wire."""
    shaped = any(cluster.launcher_of(h) in SHAPED_LAUNCHERS for h in hosts)
    return shaped and cluster.extra.get("wire") != "paced"


def bandwidth_min_size(cluster: Cluster, a: str, b: str) -> int:
    """Smallest message whose throughput counts as bandwidth on this pair (0: all do).

    Only a tbf bucket (:func:`tbf_bucket`) has the artefact; real links, the paced wire
    and unshaped veths quote bandwidth from every size, as NetPIPE does.
    """
    rate = pair_rate_bps(cluster, a, b)
    if not tbf_bucket(cluster, [a]) or rate is None:
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


def derive_for(min_size: int, mode: str = "pingpong"):
    """The runner's ``derive``: every figure the sweep's curve supports
    (:func:`analysis.summarize`); the others are null and ``unavailable`` says why. A
    finished sweep without a latency or a bandwidth was set up wrong (ValueError: the run
    is failed); a cut-off one keeps what its points allow."""
    latency_floor = mode != "stream"  # a stream's t amortises one ack over R messages

    def derive(samples: list[dict], result: dict | None) -> dict:
        figures: dict = {"bandwidth_min_size_bytes": min_size}
        try:
            figures |= analysis.summarize(samples, min_size, latency_floor)
        except ValueError as exc:  # no curve at all
            if result is not None:
                raise
            return figures | {"unavailable": str(exc)}
        needed = ("latency_us", "bandwidth_mbps") if latency_floor else ("bandwidth_mbps",)
        if result is not None and any(figures[name] is None for name in needed):
            raise ValueError(figures["unavailable"])
        return figures

    return derive


# --------------------------------------------------------------------------- TCP pair

READY_PORT = re.compile(rb"listening on port (\d+)\n")  # the TCP server's first line


def tcp_server_argv(sockbuf: int | None = None) -> list[str]:
    argv = [
        str(kernels.kernel_path(TCP_KERNEL, SERIAL)),
        "--server",
        "--port",
        "0",
        "--accept-timeout",
        str(CONNECT_TIMEOUT_S + 20),
    ]
    return argv + (["--sockbuf", str(sockbuf)] if sockbuf else [])


def tcp_client_argv(
    cluster: Cluster,
    b: str,
    port: int,
    args: list[str],
    sockbuf: int | None = None,
    connect_s: float = CONNECT_TIMEOUT_S,
) -> list[str]:
    address = cluster.host(b).address or b
    peer = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    argv = [
        str(kernels.kernel_path(TCP_KERNEL, SERIAL)),
        "--connect",
        peer,
        "--connect-timeout",
        str(connect_s),
        *args,
    ]
    return argv + (["--sockbuf", str(sockbuf)] if sockbuf else [])


def unreachable(output: KernelOutput) -> str | None:
    """The client's reason when it never reached the server (nothing measured)."""
    if output.samples:
        return None
    for err in output.errors:
        if err.startswith(("cannot connect", "cannot resolve")):
            return err
    return None


def tcp_pair(
    run: Run,
    a: str,
    b: str,
    client_args: list[str],
    timeout: float,
    sockbuf: int | None = None,
    tag: dict | None = None,
    what: str | None = None,
    cpus: Placement = None,
) -> Step:
    """Server on ``b`` beside the client on ``a`` (connecting to b's address), both steps
    of ``run``; the client's step, whose samples are the measurement and whose result's
    detail gains the server's TCP counters (``server_tcp_info``) beside its own. ``cpus``
    pins the client's end and the server's."""
    client_cpu, server_cpu = cpus or (None, None)
    service = run.service(
        b,
        pinned(tcp_server_argv(sockbuf), server_cpu),
        ready=READY_PORT,
        what=f"server on {b}",
        start_timeout=SERVER_START_S,
        stop_grace=SERVER_EXIT_S,
    )
    with service as server:
        port = int(server.ready_match.group(1))
        argv = pinned(tcp_client_argv(run.cluster, b, port, client_args, sockbuf), client_cpu)
        client = run.program(a, argv, timeout=timeout, what=what or f"client on {a}", tag=tag)
        if unreachable(client.output):  # no client is coming: no grace for the server
            server.stop(grace=0.0)
    served = service.step.output.result if service.step else None
    if client.output.result is not None and served is not None:
        detail = client.output.result.setdefault("detail", {})
        detail["server_tcp_info"] = (served.get("detail") or {}).get("tcp_info")
    return client


def both_ends(detail: dict, counter: str) -> int | None:
    """A TCP_INFO counter of a run (``total_retrans``, ``data_segs_out``) summed over both
    ends; None if neither end said (an old kernel, or not a TCP run)."""
    counts = [
        info[counter]
        for info in (detail.get("tcp_info"), detail.get("server_tcp_info"))
        if isinstance(info, dict) and counter in info
    ]
    return sum(counts) if counts else None


def reachable(launcher: Launcher, a: str, b: str) -> None:
    """A one-byte TCP exchange from a to b, so an unreachable host is a quick user error
    rather than an MPI job waiting for its timeout. A check, not a measurement: nothing
    is stored."""
    if a == b:
        return
    with launcher.service(
        b,
        tcp_server_argv(),
        ready=READY_PORT,
        start_timeout=SERVER_START_S,
        what=f"TCP server on {b}",
    ) as server:
        port = int(server.ready_match.group(1))
        args = ["--max-size", "1", "--perturbation", "0", "--trials", "3"]
        argv = tcp_client_argv(launcher.cluster, b, port, args, connect_s=REACH_CONNECT_S)
        done = launcher.run_on_host(a, argv, 60.0)
        reason = unreachable(kernels.parse_output(done.stdout))
        if reason:  # no client is coming: no grace for the server
            server.stop(grace=0.0)
    if reason:
        raise UserError(f"{b} is unreachable from {a}: {reason}")


# --------------------------------------------------------------------------- runs


@dataclass(frozen=True)
class PingpongSpec:
    layer: str
    a: str
    b: str
    mode: str = "pingpong"
    mpi: str = mpi_flavours.DEFAULT.name
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


def run_pingpong(cluster: Cluster, store: Store, spec: PingpongSpec) -> dict:
    """One sweep on one pair; the record is stored whatever the outcome."""
    min_size = validate(cluster, spec)
    timeout = spec.timeout or sweep_timeout_s(cluster, spec.a, spec.b, spec.max_size)
    hosts = list(dict.fromkeys([spec.a, spec.b]))
    kernel = {"tcp": TCP_KERNEL, "mpi": MPI_KERNEL, "pvm": PVM_KERNEL}[spec.layer]
    reachable(launcher_for(cluster), spec.a, spec.b)  # before the run: nothing stored
    with Run(
        cluster,
        store,
        level=LEVEL.name,
        kernel=kernel,
        params=spec.params(min_size),
        hosts=hosts,
        np=2 if spec.layer == "mpi" else None,
        mpi=spec.mpi if spec.layer == "mpi" else None,
        derive=derive_for(min_size, spec.mode),
    ) as run:
        if spec.layer == "mpi":
            run.mpi(
                MPI_KERNEL, np=2, mpi=spec.mpi, args=_sweep_args(spec), hosts=hosts, timeout=timeout
            )
        elif spec.layer == "tcp":
            client = tcp_pair(run, spec.a, spec.b, _sweep_args(spec), timeout, spec.sockbuf)
            if reason := unreachable(client.output):
                raise UserError(f"{spec.b} is unreachable from {spec.a}: {reason}")
        else:
            path = kernels.kernel_path(PVM_KERNEL, SERIAL)
            with PvmMachine(run, hosts, path.parent) as machine:
                run.program(
                    spec.a,
                    [str(path), "--host", spec.b, *_sweep_args(spec)],
                    timeout=timeout,
                    env=machine.env(spec.a),
                )
    return run.record


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
    "latency_us",
    "latency_us_spread",
    "bandwidth_mbps",
    "bandwidth_mbps_spread",
    "saturation_point_bytes",
    "saturation_point_bytes_spread",
    "n_half_bytes",
    "n_half_bytes_spread",
    "preferred_block_range_bytes",
    "dips",
    "bandwidth_min_size_bytes",
    "unavailable",
)


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

    def figure(key: str, spec: str, unit: str) -> str:
        spread = j[f"{key}_spread"]
        return _fmt(j[key], spec, unit) + (
            f"  ({spread['min']:{spec}} .. {spread['max']:{spec}}, median "
            f"{spread['median']:{spec}})"
            if spread
            else ""
        )

    lines = [
        f"run {j['run_id']}: {layer} {j['mode']} {'-'.join(j['between'])} on {j['cluster']}"
        + (f", wait {j['wait']}" if j["wait"] and j["wait"] != "block" else "")
        + (f", sockbuf {j['sockbuf']} B" if j["sockbuf"] else "")
        + f" -> {j['status']}",
        f"  latency          {figure('latency_us', '.1f', 'µs')}",
        f"  bandwidth        {figure('bandwidth_mbps', '.1f', 'Mbit/s')}"
        + (
            f" (messages >= {j['bandwidth_min_size_bytes']} B)"
            if j["bandwidth_min_size_bytes"]
            else ""
        ),
        f"  saturation point {figure('saturation_point_bytes', '.0f', 'B')}",
        f"  n½               {figure('n_half_bytes', '.0f', 'B')}",
        f"  preferred blocks {_fmt(low_high[0], '.0f', 'B')} .. {_fmt(low_high[1], '.0f', 'B')}",
        f"  dips             {len(j['dips'] or [])}"
        + "".join(
            f"\n    at {d['size']} B: {d['throughput_mbps']:.1f} Mbit/s, "
            f"{100 * d['depth_ratio']:.0f} % of the envelope"
            for d in j["dips"] or []
        ),
        f"  points           {len(j['points'])}",
    ]
    if j["unavailable"]:
        lines.append(f"  not determined: {j['unavailable']}")
    if labels := labels_text(record):
        lines.append(f"  labels: {labels}")
    if record["error"]:
        lines.append(f"  error: {record['error']}")
    return "\n".join(lines)
