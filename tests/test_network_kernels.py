"""The ping-pong kernels run directly on loopback: ct-tcp-pingpong (server + client on
127.0.0.1) and ct-mpi-pingpong (two local ranks). Checks the sweep shape, verification,
and the fault paths: unreachable peer, impossible sizes, a peer killed mid-sweep, and
bad arguments (one message naming flag and value, exit status 2, in every kernel)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

BUILD = Path(os.environ.get("CLUSTERTUNE_BUILD_DIR", Path(__file__).resolve().parents[1] / "build"))
SERIAL = BUILD / "serial" / "bin"
TCP = SERIAL / "ct-tcp-pingpong"
MPI = {flavour: BUILD / flavour / "bin" / "ct-mpi-pingpong" for flavour in ("openmpi", "mpich")}
QUICK = ["--point-time", "0.02"]  # keeps a 64 KiB sweep around a second

needs_tcp = pytest.mark.skipif(not TCP.is_file(), reason="ct-tcp-pingpong not built (make kernels)")


def lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def of_type(records: list[dict], kind: str) -> list[dict]:
    return [r for r in records if r["type"] == kind]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, *extra: str) -> subprocess.Popen:
    server = subprocess.Popen(
        [str(TCP), "--server", "--port", str(port), "--accept-timeout", "20", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return server


def run_client(port: int, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(TCP), "--connect", f"127.0.0.1:{port}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def check_sweep(samples: list[dict], max_size: int, min_size: int = 1) -> None:
    sizes = [s["size"] for s in samples]
    assert sizes == sorted(set(sizes)), "sizes strictly increasing"
    assert sizes[0] == min_size and sizes[-1] == max_size
    assert {13, 16, 19, 1021, 1024, 1027} <= set(sizes), "perturbed points around 16 and 1 KiB"
    for s in samples:
        assert 0 < s["t_min_s"] <= s["t_med_s"] <= s["t_max_s"]
        assert s["repeats"] >= 1 and s["trials"] >= 3


@needs_tcp
@pytest.mark.parametrize("mode", ["pingpong", "stream", "bidir"])
def test_tcp_sweep_verifies(mode: str) -> None:
    port = free_port()
    server = start_server(port)
    client = run_client(port, "--mode", mode, "--max-size", "64K", *QUICK)
    server_out, _ = server.communicate(timeout=10)
    assert client.returncode == 0, client.stderr
    records = lines(client.stdout)
    check_sweep(of_type(records, "sample"), 65536)
    result = of_type(records, "result")[0]
    assert result["verification"] == "passed"
    assert result["detail"]["mode"] == mode and result["detail"]["nodelay"] is True
    assert server.returncode == 0
    assert of_type(lines(server_out), "result")[0]["verification"] == "passed"


@needs_tcp
@pytest.mark.parametrize("mode", ["pingpong", "stream", "bidir"])
def test_tcp_corrupted_payload_fails_the_run(mode: str) -> None:
    port = free_port()
    server = start_server(port, "--inject-fault")
    client = run_client(port, "--mode", mode, "--max-size", "4K", *QUICK)
    server_out, server_err = server.communicate(timeout=10)
    assert client.returncode == 1
    assert of_type(lines(client.stdout), "result")[0]["verification"] == "failed"
    assert "payload verification failed at 1 bytes" in client.stderr  # the first trial's size
    assert server.returncode == 1
    assert of_type(lines(server_out), "result")[0]["verification"] == "failed"


@needs_tcp
def test_tcp_sockbuf_and_nagle_reported() -> None:
    port = free_port()
    server = start_server(port)
    client = run_client(port, "--sockbuf", "64K", "--nagle", "--max-size", "4K", *QUICK)
    server.communicate(timeout=10)
    assert client.returncode == 0, client.stderr
    detail = of_type(lines(client.stdout), "result")[0]["detail"]
    assert detail["nodelay"] is False and detail["sockbuf_requested"] == 65536
    # Linux doubles the request for its bookkeeping; the effective value is what it reports
    for key in ("sockbuf_effective_snd", "sockbuf_effective_rcv", "server_sockbuf_effective_rcv"):
        assert 65536 <= detail[key] <= 4 * 65536


@needs_tcp
@pytest.mark.parametrize("mode", ["pingpong", "stream", "bidir"])
def test_tcp_busy_poll_wait_verifies_and_is_recorded(mode: str) -> None:
    """--wait poll spins on non-blocking calls on both ends (the client tells the server);
    the default stays a blocking recv, and both ends say which they used."""
    port = free_port()
    server = start_server(port)
    client = run_client(port, "--wait", "poll", "--mode", mode, "--max-size", "64K", *QUICK)
    server_out, _ = server.communicate(timeout=10)
    assert client.returncode == 0, client.stderr
    records = lines(client.stdout)
    check_sweep(of_type(records, "sample"), 65536)
    result = of_type(records, "result")[0]
    assert result["verification"] == "passed" and result["detail"]["wait"] == "poll"
    served = of_type(lines(server_out), "result")[0]
    assert served["verification"] == "passed" and served["detail"]["wait"] == "poll"

    port = free_port()
    server = start_server(port)
    client = run_client(port, "--max-size", "16", *QUICK)
    server.communicate(timeout=10)
    assert of_type(lines(client.stdout), "result")[0]["detail"]["wait"] == "block"


@needs_tcp
def test_tcp_busy_poll_still_times_out_on_a_silent_peer() -> None:
    """SO_RCVTIMEO does not bound a spin: the poll loop keeps its own --io-timeout."""
    port = free_port()
    server = start_server(port)
    client = subprocess.Popen(
        [
            str(TCP),
            "--connect",
            f"127.0.0.1:{port}",
            "--wait",
            "poll",
            "--io-timeout",
            "1",
            "--max-size",
            "64K",
            "--point-time",
            "2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.0)  # connected and sweeping
        server.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        out, _ = client.communicate(timeout=15)
        elapsed = time.monotonic() - stopped
    finally:
        server.kill()
        server.communicate()
        if client.poll() is None:
            client.kill()
    assert client.returncode != 0 and elapsed < 8
    messages = [e["message"] for e in of_type(lines(out), "error")]
    assert messages and "timed out" in messages[0], messages


@needs_tcp
def test_tcp_min_size_bounds_every_point() -> None:
    """--min-size bounds the perturbed points too (base+P of a base below it was measured)."""
    port = free_port()
    server = start_server(port)
    client = run_client(port, "--min-size", "1000", "--max-size", "4K", *QUICK)
    server.communicate(timeout=10)
    assert client.returncode == 0, client.stderr
    sizes = [s["size"] for s in of_type(lines(client.stdout), "sample")]
    assert sizes[0] == 1000 and sizes[-1] == 4096
    assert {1021, 1024, 1027, 2045, 2048, 2051} <= set(sizes)


@needs_tcp
def test_tcp_refused_peer_errors_in_bounded_time() -> None:
    start = time.monotonic()
    client = run_client(free_port(), "--connect-timeout", "1")
    assert time.monotonic() - start < 5
    assert client.returncode != 0
    error = of_type(lines(client.stdout), "error")[0]
    assert "cannot connect" in error["message"] and "refused" in error["message"]


@needs_tcp
def test_tcp_silent_peer_times_out() -> None:
    # A listener whose accept queue is full drops further SYNs: the connect never completes.
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        filler = socket.create_connection(("127.0.0.1", port), timeout=5)  # queue now full
        start = time.monotonic()
        client = run_client(port, "--connect-timeout", "1.5")
        elapsed = time.monotonic() - start
        filler.close()
    assert client.returncode != 0 and elapsed < 6
    assert "within 1.5 s" in of_type(lines(client.stdout), "error")[0]["message"]


@needs_tcp
@pytest.mark.parametrize(
    "args",
    [
        ["--max-size", "0"],
        ["--max-size", "2G"],
        ["--max-size", "12Q"],
        ["--min-size", "100", "--max-size", "10"],
        ["--min-size", "0"],
        ["--trials", "1"],
        ["--wait", "spin"],
    ],
)
def test_tcp_impossible_sizes_rejected(args: list[str]) -> None:
    client = run_client(free_port(), *args, timeout=5)
    assert client.returncode == 2
    assert of_type(lines(client.stdout), "error")


@needs_tcp
def test_tcp_server_killed_mid_sweep_keeps_samples() -> None:
    port = free_port()
    server = start_server(port)
    client = subprocess.Popen(
        [str(TCP), "--connect", f"127.0.0.1:{port}", "--max-size", "8M", "--io-timeout", "5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = []
    assert client.stdout is not None
    while len(seen) < 5:  # samples arrive one by one, as they are measured
        line = client.stdout.readline()
        assert line, "client ended before 5 samples"
        seen.append(json.loads(line))
    server.send_signal(signal.SIGKILL)
    server.wait()
    rest, _ = client.communicate(timeout=10)
    records = seen + lines(rest)
    assert client.returncode != 0
    assert len(of_type(records, "sample")) >= 5
    assert of_type(records, "error") and not of_type(records, "result")


def mpirun(flavour: str, np: int, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    if flavour == "openmpi":
        launcher = ["mpirun.openmpi", "--oversubscribe", "--mca", "mpi_yield_when_idle", "1"]
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        argv = [*launcher, "-np", str(np), str(MPI[flavour]), *args]
    else:
        env = dict(os.environ)
        argv = ["mpiexec.mpich", "-n", str(np), str(MPI[flavour]), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)


def needs_mpi(flavour: str):
    return pytest.mark.skipif(not MPI[flavour].is_file(), reason=f"{flavour} kernels not built")


@needs_mpi("openmpi")
@pytest.mark.parametrize("mode", ["blocking", "nonblocking", "bidir"])
def test_mpi_sweep_verifies(mode: str) -> None:
    run = mpirun("openmpi", 2, "--mode", mode, "--min-size", "0", "--max-size", "16K", *QUICK)
    assert run.returncode == 0, run.stderr
    records = lines(run.stdout)
    samples = of_type(records, "sample")
    check_sweep(samples, 16384, min_size=0)
    result = of_type(records, "result")[0]
    assert result["verification"] == "passed" and result["detail"]["mode"] == mode


@pytest.mark.parametrize("flavour", ["openmpi", "mpich"])
def test_help_under_the_launcher_is_printed_once(flavour: str) -> None:
    """--help reads no MPI (it must work without a launcher), yet a job of 3 prints it once."""
    if not MPI[flavour].is_file():
        pytest.skip(f"{flavour} kernels not built")
    run = mpirun(flavour, 3, "--help", timeout=30)
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("usage: mpirun -np N ct-mpi-pingpong") == 1, run.stdout


@pytest.mark.parametrize("flavour", ["openmpi", "mpich"])
@pytest.mark.parametrize(
    "args", [["--mode", "blocking"], ["--mode", "bidir"], ["--pairs-round-robin"]]
)
def test_mpi_corrupted_payload_fails_the_run(flavour: str, args: list[str]) -> None:
    if not MPI[flavour].is_file():
        pytest.skip(f"{flavour} kernels not built")
    run = mpirun(flavour, 2, *args, "--inject-fault", "--max-size", "4K", *QUICK)
    assert run.returncode == 1
    records = lines(run.stdout)
    assert of_type(records, "sample"), "the points measured are still reported"
    assert of_type(records, "result")[0]["verification"] == "failed"


@needs_mpi("mpich")
def test_mpi_sweep_mpich() -> None:
    run = mpirun("mpich", 2, "--max-size", "4K", *QUICK)
    assert run.returncode == 0, run.stderr
    result = of_type(lines(run.stdout), "result")[0]
    assert result["verification"] == "passed" and "MPICH" in result["detail"]["mpi_library"]


@needs_mpi("openmpi")
def test_mpi_pairs_round_robin_covers_every_pair_once() -> None:
    run = mpirun("openmpi", 3, "--pairs-round-robin", "--max-size", "64K", *QUICK)
    assert run.returncode == 0, run.stderr
    records = lines(run.stdout)
    samples = of_type(records, "sample")
    pairs = {(s["a"], s["b"]) for s in samples}
    assert pairs == {(0, 1), (0, 2), (1, 2)}  # 3 ranks: 3 rounds, one sits out each
    assert sorted(s["size"] for s in samples) == [1, 1, 1, 65536, 65536, 65536]
    rounds = {(s["a"], s["b"]): s["round"] for s in samples}
    assert sorted(rounds.values()) == [0, 1, 2]
    assert all(s["host_a"] and s["host_b"] for s in samples)
    result = of_type(records, "result")[0]
    assert result["verification"] == "passed" and result["detail"]["rounds"] == 3


@needs_mpi("openmpi")
def test_mpi_impossible_sizes_rejected() -> None:
    run = mpirun("openmpi", 2, "--max-size", "0", timeout=30)
    assert run.returncode != 0
    assert of_type(lines(run.stdout), "error")


@pytest.mark.parametrize(
    "kernel,args,line",
    [
        (
            "ct-tcp-pingpong",
            ["--connect", "h:1", "--trials", "x"],
            "--trials: expected an integer from 3 to 64, got 'x'",
        ),
        (
            "ct-tcp-pingpong",
            ["--connect", "h:1", "--wait", "spin"],
            "--wait: expected one of block, poll, got 'spin'",
        ),
        (
            "ct-tcp-pingpong",
            ["--connect", "h:1", "--sockbuf", "4G"],
            "--sockbuf: expected a byte count such as 4096, 64K or 8M (at most 2147483647), got '4G'",
        ),
        ("ct-tcp-pingpong", ["--server", "--port"], "--port needs a value (see --help)"),
        ("ct-tcp-pingpong", ["--server", "--fast"], "unknown option '--fast' (see --help)"),
        (
            "ct-pvm-pingpong",
            ["--route", "moon"],
            "--route: expected one of direct, daemon, got 'moon'",
        ),
        (
            "ct-nfq-delay",
            ["70000", "50"],
            "QUEUE: expected an integer from 0 to 65535, got '70000'",
        ),
        ("ct-nfq-delay", ["7"], "missing DELAY_US (see --help)"),
    ],
)
def test_bad_arguments_name_flag_and_value(kernel: str, args: list[str], line: str) -> None:
    path = SERIAL / kernel
    if not path.is_file():
        pytest.skip(f"{kernel} not built")
    proc = subprocess.run([str(path), *args], capture_output=True, text=True, timeout=10)
    assert proc.returncode == 2
    assert f"{kernel}: {line}" in proc.stderr.splitlines()[0]


@pytest.mark.parametrize("flavour", ["openmpi", "mpich"])
def test_mpi_bad_argument_is_one_error_line(flavour: str) -> None:
    if not MPI[flavour].is_file():
        pytest.skip(f"{flavour} kernels not built")
    run = mpirun(flavour, 2, "--mode", "spin", timeout=30)
    assert run.returncode == 2
    records = lines(run.stdout)
    assert [r["type"] for r in records] == ["error"]
    expected = "ct-mpi-pingpong: --mode: expected one of blocking, nonblocking, bidir, got 'spin'"
    assert records[0]["message"] == expected


@needs_mpi("mpich")
def test_mpi_pairs_round_robin_default_max_size() -> None:
    """Without --max-size the all-pairs mode measures 1 MiB, not the sweep's 8 MiB."""
    run = mpirun("mpich", 2, "--pairs-round-robin", *QUICK)
    assert run.returncode == 0, run.stderr
    assert [s["size"] for s in of_type(lines(run.stdout), "sample")] == [1, 1 << 20]
