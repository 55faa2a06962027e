"""``clustertune io netcdf``: the seeds/004 measurement on a cluster, and its `results`.

One run of ct-io-netcdf (every size, op, mode and variant asked for) is one record. The
kernel verifies what it reads; this module then checks every netCDF file the kernel kept
(validate.py) inside the same run, so a file that ncvalidator, ncdump or netCDF4 rejects
fails the record, and removes the files afterwards unless asked to keep them.

The MPI-IO driver is chosen, never left to chance: OpenMPI's default OMPIO was measured
3-10x slower than ROMIO on small files here (../shared/research/parallel-io.md), so the
level pins ROMIO (``OMPI_MCA_io=romio321``) unless ``--driver ompio``; the kernel reports
the driver it ran with (detail.mpiio_driver) and the record keeps the variable.
Definitions of every figure: docs/io.md.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from ... import kernels, security
from ...cluster import Cluster
from ...commands import Output, cluster_of, open_store
from ...errors import UserError
from ...launch import mpi as mpi_flavours
from ...results import Store
from ...runner import Run
from ...units import format_rate, parse_size
from . import FORWARD_KERNEL, LEVEL, NETCDF_KERNEL, validate
from . import remote as fwd

SIZES = (16, 64, 100, 128, 256)
MAX_SIZE = 2048  # the kernel's limit
MODES = ("collective", "independent", "both")
OPS = ("write", "read")
FORMATS = ("cdf1", "cdf2", "cdf5")
VARIANTS = ("netcdf", "raw", "rawswap")  # the format; the same bytes raw; raw + byte swap
REPS = 20
TIMEOUT_S = 1800.0
CHECK_TIMEOUT_S = 120.0
# the `results` fields of the JSON contract, then ours
RESULT_KEYS = (
    "size",
    "op",
    "mode",
    "np",
    "remote",
    "open_to_close_s_min",
    "io_only_s_min",
    "mbps",
    "valid",
)


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or not all(1 <= s <= MAX_SIZE for s in sizes):
        raise UserError(f"--sizes {text!r}: expected sizes N (1..{MAX_SIZE}) separated by commas")
    return sizes


def parse_ops(text: str) -> list[str]:
    ops = [o.strip() for o in text.split(",")]
    if not ops or any(o not in OPS for o in ops):
        raise UserError(f"--ops {text!r}: expected write, read or write,read")
    return [o for o in OPS if o in ops]


def kernel_args(
    sizes: list[int],
    mode: str,
    ops: list[str],
    fmt: str,
    reps: int,
    directory: str,
    raw: bool,
    inject_fault: bool = False,
    variants: list[str] | None = None,
    warmup: int = 0,
) -> list[str]:
    """``variants``: which run and in what order (netcdf, raw, rawswap); default netcdf, then
    raw and rawswap when ``raw``."""
    args = [
        "--dir",
        directory,
        "--sizes",
        ",".join(map(str, sizes)),
        "--mode",
        mode,
        "--ops",
        ",".join(ops),
        "--format",
        fmt,
        "--reps",
        str(reps),
        "--keep",
    ]
    if variants:
        args += ["--variants", ",".join(variants)]
    if warmup:
        args += ["--warmup", str(warmup)]
    return args + ["--raw"] * raw + ["--inject-fault"] * inject_fault


def driver_env(mpi: str, driver: str) -> dict[str, str]:
    """The MPI-IO driver pinned for the job (MPICH has ROMIO only)."""
    return mpi_flavours.flavour(mpi).io_driver_env(driver)


# a result's times and rates; an invalid result has none (it is reported failed)
MEASURED = (
    "open_to_close_s_min",
    "io_only_s_min",
    "mbps",
    "open_to_close_s_median",
    "io_only_s_median",
    "mbps_io",
    "cpu_s_min",
    "cpu_s_median",
)


def failed_checks(sample: dict, files: dict[str, dict]) -> list[str]:
    """Why a sample is not valid (empty: valid): the kernel's own check of the data, then
    each check of the netCDF file it wrote."""
    checks = files.get(sample.get("file"), {})
    kernel = [] if sample.get("verified") else ["kernel check"]
    return kernel + [name for name, ok in checks.items() if ok is False]


def derive(samples: list[dict], result: dict | None, files: dict[str, dict] | None = None) -> dict:
    """Per size: netCDF collective write time over raw MPI-IO + swap of the same bytes
    (open-to-close minimums; the bench criterion is <= 1.2 from 8 MB); None for a size
    where either is not valid (``files``: the checks of the files, by path)."""
    best = {
        (s["variant"], s["size"]): None
        if failed_checks(s, files or {})
        else s["open_to_close_s"]["min"]
        for s in samples
        if s.get("op") == "write" and s.get("mode") == "collective"
    }
    ratios = {}
    for (variant, size), t in best.items():
        if variant == "netcdf" and ("rawswap", size) in best:
            swap = best[("rawswap", size)]
            ratios[str(size)] = t / swap if t and swap else None
    return {"write_over_rawswap": ratios} if ratios else {}


def check_files(run: Run, host: str, samples: list[dict]) -> dict[str, dict]:
    """ncvalidator and ncdump -h on ``host``, a netCDF4 read-back here when visible; every
    failure becomes a problem of the run. Returns each file's verdicts."""
    verdicts: dict[str, dict] = {}
    for s in samples:
        path = s.get("file")
        if not path or path in verdicts:
            continue
        n = s["size"]
        v = run.program(host, ["ncvalidator", "-q", path], timeout=CHECK_TIMEOUT_S)
        dump = run.program(host, ["ncdump", "-h", path], timeout=CHECK_TIMEOUT_S)
        header = dump.completed.returncode == 0 and validate.header_ok(dump.completed.stdout, n)
        if dump.completed.returncode == 0 and not header:
            run.problems.append(f"{path}: ncdump -h does not show int data(z, y, x) of {n}^3")
        back = validate.readback(Path(path), n) if Path(path).is_file() else "not visible here"
        if back and back != "not visible here":
            run.problems.append(f"{path}: netCDF4 read-back: {back}")
        verdicts[path] = {
            "ncvalidator": v.completed.returncode == 0,
            "ncdump": header,
            "netcdf4": None if back == "not visible here" else back is None,
        }
    return verdicts


def measure(
    cluster: Cluster,
    store: Store,
    *,
    np: int,
    mpi: str,
    sizes: list[int],
    mode: str,
    ops: list[str],
    fmt: str,
    reps: int,
    raw: bool = True,
    driver: str = "romio",
    hosts: list[str] | None = None,
    timeout: float = TIMEOUT_S,
    directory: str | None = None,
    keep_files: bool = False,
    inject_fault: bool = False,
    remote: str | None = None,
    servers: int | None = None,
    batch: bool = True,
    session: str = "job",
    ca_dir: Path | None = None,
    identity: str = "client",
    server_round: int | None = None,
    variants: list[str] | None = None,
    warmup: int = 0,
) -> dict:
    """One stored record: ct-io-netcdf (or, with ``remote``, ct-io-fwd against ct-io-server)
    on ``np`` ranks, then the checks of its files. ``variants``: local runs only, which of
    netcdf, raw, rawswap and in what order (bench/io_local_vs_raw.py alternates it)."""
    if variants and (remote or any(v not in VARIANTS for v in variants)):
        raise UserError(f"variants {variants}: local runs of {', '.join(VARIANTS)} only")
    site = address = None
    if remote:
        site, address = fwd.parse_remote(cluster, remote)
        # absolute: the client and server are started in other working directories
        ca_dir = Path(ca_dir or security.default_dir()).resolve()
        creds = fwd.prepare_ca(ca_dir, identity) if site else security.credentials(ca_dir, identity)
        if site:
            server_host, client_hosts = fwd.site_hosts(cluster, site)
            hosts = hosts or client_hosts
        raw = False
    kernel = FORWARD_KERNEL if remote else NETCDF_KERNEL
    made = directory is None and not address
    if site:
        workdir = str(fwd.export_dir())
    elif address:
        workdir = directory or "."  # relative to the server's area for this identity
    else:
        workdir = tempfile.mkdtemp(prefix="clustertune-io-", dir="/tmp") if made else directory
        Path(workdir).chmod(0o755)
    params = {
        "sizes": sizes,
        "mode": mode,
        "ops": ops,
        "format": fmt,
        "reps": reps,
        "raw": raw,
        "driver": driver,
        "remote": remote,
        "dir": workdir,
    }
    if variants:
        params["variants"] = variants
    if warmup:
        params["warmup"] = warmup
    if remote:
        params.update(servers=servers or np, batch=batch, session=session, identity=identity)
        if site:
            params["server_round"] = server_round
    env = {} if remote else driver_env(mpi, driver)
    args = kernel_args(
        sizes, mode, ops, fmt, reps, workdir, raw and not variants, inject_fault, variants, warmup
    )
    files: dict[str, dict] = {}  # the checks of the files, filled before the record ends

    def ratios(samples: list[dict], result: dict | None) -> dict:
        return derive(samples, result, files)

    try:
        with Run.for_job(
            cluster,
            store,
            level=LEVEL.name,
            kernel=kernel,
            np=np,
            mpi=mpi,
            hosts=hosts,
            params=params,
            env=env,
            derive=ratios,
        ) as run:
            if not remote:
                step = run.mpi(kernel, np=np, mpi=mpi, hosts=hosts, timeout=timeout, args=args)
                files.update(check_files(run, run.record["meta"]["hosts"][0], step.output.samples))
                run.figures["files"] = files
            elif address:
                client = fwd.client_env(creds, address, batch, session)
                run.env.update(client)
                run.record["meta"]["env"].update(client)
                step = run.mpi(kernel, np=np, mpi=mpi, hosts=hosts, timeout=timeout, args=args)
            else:
                argv = fwd.server_argv(
                    servers or np,
                    Path(workdir),
                    ca_dir,
                    sessions=1 if session == "job" else 0,
                    env=fwd.server_env(driver),
                    round_bytes=server_round,
                )
                with run.service(
                    server_host,
                    argv,
                    ready=fwd.READY,
                    env=fwd.server_env(driver),
                    start_timeout=fwd.SERVER_START_S,
                    stop_grace=2.0,
                    what=f"ct-io-server on {server_host}",
                ) as server:
                    assert server.ready_match is not None
                    port = int(server.ready_match.group(1))
                    at = f"{fwd.address_of(cluster, server_host)}:{port}"
                    client = fwd.client_env(creds, at, batch, session)
                    run.env.update(client)
                    run.record["meta"]["env"].update(client)
                    step = run.mpi(kernel, np=np, mpi=mpi, hosts=hosts, timeout=timeout, args=args)
                files.update(check_files(run, server_host, step.output.samples))
                run.figures["files"] = files
                if cluster.wan_bps:
                    run.figures["wan_bps"] = cluster.wan_bps
                    valid = [s for s in step.output.samples if not failed_checks(s, files)]
                    run.figures["link_share"] = fwd.link_shares(valid, cluster.wan_bps)
    finally:
        if not keep_files and not address:
            if made or site:
                shutil.rmtree(workdir, ignore_errors=True)
            else:
                for f in Path(workdir).glob("ct_io_*"):
                    f.unlink(missing_ok=True)
    return run.record


def results(record: dict) -> list[dict]:
    """The record's `results` list (issue contract): one entry per sample."""
    files = record["figures"].get("files", {})
    remote = record["params"].get("remote")
    out = []
    for s in record["samples"]:
        if "open_to_close_s" not in s:
            continue
        failed = failed_checks(s, files)
        row = {
            "size": s["size"],
            "op": s["op"],
            "mode": s["mode"],
            "np": s["np"],
            "remote": remote,
            "open_to_close_s_min": s["open_to_close_s"]["min"],
            "io_only_s_min": s["io_only_s"]["min"],
            "mbps": s["mbps"],
            "valid": not failed,
            "variant": s["variant"],
            "format": s["format"],
            "bytes": s["bytes"],
            "reps": s["reps"],
            "open_to_close_s_median": s["open_to_close_s"]["median"],
            "io_only_s_median": s["io_only_s"]["median"],
            "mbps_io": s["mbps_io"],
            # records stored before the kernel measured CPU time have none
            "cpu_s_min": s.get("cpu_s", {}).get("min"),
            "cpu_s_median": s.get("cpu_s", {}).get("median"),
            "failed_checks": failed,
        }
        # a result that failed a check is reported failed, never as a number
        out.append(row | dict.fromkeys(MEASURED) if failed else row)
    return out


def text(record: dict) -> str:
    rows = results(record)
    detail = record["detail"]
    where = record["params"].get("remote") or "local"
    lines = [
        f"run {record['id']}: io/{record['kernel']} on {record['meta']['cluster']['name']} "
        f"({where}), np={record['meta']['np']}, MPI-IO driver "
        f"{detail.get('mpiio_driver', '?')} -> {record['status']}, "
        f"verification {record['verification']}",
        f"{'N':>5} {'MiB':>7} {'op':<5} {'mode':<11} {'variant':<8} {'open-close ms':>13} "
        f"{'median':>8} {'I/O ms':>8} {'median':>8} {'MB/s':>8}  valid",
    ]
    for r in rows:
        if r["valid"]:
            measured = (
                f"{1e3 * r['open_to_close_s_min']:>13.3f} {1e3 * r['open_to_close_s_median']:>8.3f}"
                f" {1e3 * r['io_only_s_min']:>8.3f} {1e3 * r['io_only_s_median']:>8.3f}"
                f" {r['mbps']:>8.1f}  yes"
            )
        else:  # where the times and the rate would be: failed, and which checks
            measured = f"{'FAILED (' + ', '.join(r['failed_checks']) + ')':>49}  NO"
        lines.append(
            f"{r['size']:>5} {r['bytes'] / 2**20:>7.2f} {r['op']:<5} {r['mode']:<11} "
            f"{r['variant']:<8} {measured}"
        )
    ratios = record["figures"].get("write_over_rawswap") or {}
    if ratios:
        lines.append(
            "netCDF collective write / raw MPI-IO + swap (valid rows only): "
            + ", ".join(
                f"N={k}: {v:.2f}" if v is not None else f"N={k}: none (a row is not valid)"
                for k, v in ratios.items()
            )
        )
    shares = record["figures"].get("link_share") or {}
    if shares:
        lines.append(
            f"share of the {format_rate(record['figures']['wan_bps'])} inter-site link "
            "(collective, open-to-close min): "
            + ", ".join(f"N={n} {op} {v:.0%}" for n, ops in shares.items() for op, v in ops.items())
        )
    if record["error"]:
        lines.append(f"error: {record['error']}")
    return "\n".join(lines)


def cmd_netcdf(args: argparse.Namespace) -> Output:
    sizes = parse_sizes(args.sizes)
    ops = parse_ops(args.ops)
    if args.reps < 1:
        raise UserError(f"--reps {args.reps}: must be at least 1")
    if args.np < 1:
        raise UserError(f"--np {args.np}: must be at least 1")
    if args.dir is not None and not args.remote and not Path(args.dir).is_dir():
        raise UserError(f"--dir {args.dir}: not a directory")
    # built for this MPI? (PnetCDF, so ct-io-netcdf: OpenMPI only; ct-io-fwd: both)
    kernels.kernel_path(FORWARD_KERNEL if args.remote else NETCDF_KERNEL, args.mpi)
    if args.servers is not None and args.servers < 1:
        raise UserError(f"--servers {args.servers}: must be at least 1")
    cluster = cluster_of(args)
    if args.remote:
        fwd.parse_remote(cluster, args.remote)
    record = measure(
        cluster,
        open_store(args),
        np=args.np,
        mpi=args.mpi,
        sizes=sizes,
        mode=args.mode,
        ops=ops,
        fmt=args.format,
        reps=args.reps,
        raw=not args.no_raw,
        driver=args.driver,
        hosts=args.hosts,
        timeout=args.timeout,
        directory=args.dir,
        keep_files=args.keep_files,
        inject_fault=args.inject_fault,
        remote=args.remote,
        servers=args.servers,
        batch=not args.no_batch,
        session=args.session,
        ca_dir=Path(args.ca_dir) if args.ca_dir else None,
        identity=args.identity,
        server_round=None if args.server_round is None else parse_size(args.server_round),
    )
    payload = {
        "run": record["id"],
        "status": record["status"],
        "verification": record["verification"],
        "mpiio_driver": record["detail"].get("mpiio_driver"),
        "results": results(record),
        "error": record["error"],
    }
    return Output(payload, text(record), 0 if record["status"] == "ok" else 1)
