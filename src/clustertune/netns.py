"""Thin wrappers over iproute2/iptables for the virtual cluster: every command is checked
and its stderr becomes part of the error, so a failed step says which one it was."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from .errors import UserError

NETNS_DIR = Path("/run/netns")
NETNS_ETC = Path("/etc/netns")


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise UserError(f"{' '.join(argv)}: {proc.stderr.strip() or f'exit {proc.returncode}'}")
    return proc


def exists(ns: str) -> bool:
    return (NETNS_DIR / ns).exists()


def listed() -> list[str]:
    out = run("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def add(ns: str) -> None:
    run("ip", "netns", "add", ns)
    run("ip", "-n", ns, "link", "set", "lo", "up")


def kill_processes(ns: str) -> None:
    """Kill what still runs inside a namespace: a netns only vanishes with its last process."""
    pids = run("ip", "netns", "pids", ns, check=False).stdout.split()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


def delete(ns: str) -> None:
    """Remove a namespace with everything in it (veth ends, bridges, iptables rules)."""
    if exists(ns):
        kill_processes(ns)
        run("ip", "netns", "del", ns, check=False)
    etc = NETNS_ETC / ns
    if etc.exists():
        for child in etc.iterdir():
            child.unlink()
        etc.rmdir()


def write_hosts_file(ns: str, entries: list[tuple[str, str]]) -> None:
    """``ip netns exec`` bind-mounts /etc/netns/<ns>/hosts over /etc/hosts: names resolve."""
    etc = NETNS_ETC / ns
    etc.mkdir(parents=True, exist_ok=True)
    lines = ["127.0.0.1 localhost"] + [f"{address} {name}" for name, address in entries]
    (etc / "hosts").write_text("\n".join(lines) + "\n")


def veth(ns_a: str, name_a: str, ns_b: str, name_b: str) -> None:
    """A veth pair created directly inside both namespaces: nothing touches the root ns."""
    run(
        "ip",
        "link",
        "add",
        name_a,
        "netns",
        ns_a,
        "type",
        "veth",
        "peer",
        "name",
        name_b,
        "netns",
        ns_b,
    )


def tbf_burst_bytes(bits_per_second: int) -> int:
    """The tbf bucket of a shaped link: 1 ms at line rate and at least 10 full frames.

    Smaller buckets cost per-packet timer overhead that showed as 727 Mbit/s on a 1 Gbit
    link here. A message is not slowed by the bucket it fits in, so the network level
    quotes bandwidth only from messages many buckets long.
    """
    return max(15000, bits_per_second // 8 // 1000)


def shape(ns: str, dev: str, bits_per_second: int | None) -> None:
    """tbf on the egress of one interface (bucket: :func:`tbf_burst_bytes`); None removes shaping."""
    run("tc", "-n", ns, "qdisc", "del", "dev", dev, "root", check=False)
    if bits_per_second is None:
        return
    burst = tbf_burst_bytes(bits_per_second)
    run("tc", "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf",
        "rate", f"{bits_per_second}bit", "burst", str(burst), "latency", "20ms")  # fmt: skip
