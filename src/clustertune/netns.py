"""Thin wrappers over iproute2/iptables for the virtual cluster: every command is checked
and its stderr becomes part of the error, so a failed step says which one it was."""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from .errors import UserError

NETNS_DIR = Path("/run/netns")
NETNS_ETC = Path("/etc/netns")
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_IFREQ = struct.Struct("16sH22x")  # struct ifreq with ifr_flags


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
    run(
        "tc",
        "-n",
        ns,
        "qdisc",
        "add",
        "dev",
        dev,
        "root",
        "tbf",
        "rate",
        f"{bits_per_second}bit",
        "burst",
        str(burst),
        "latency",
        "20ms",
    )


# The pacer (ct-nfq-delay) charges a GSO packet its whole wire time and releases it at
# once; packets of up to 64 KiB then arrive in lumps that TCP's small-queue limit turns
# into a mid-size dip (100 Mbit: 52 % of nominal at 64 KiB). A cap at ~100 us of wire
# time keeps the lumps short (one frame at 100 Mbit, ~8 at 1 Gbit) and the packet rate
# one daemon can pace (~10k/s at 1 Gbit; one frame each would cap 1 Gbit near 600 Mbit/s).
GSO_WIRE_TIME_S = 100e-6
GSO_MIN, GSO_MAX = 1514, 65536


def gso_cap_bytes(bits_per_second: int | None) -> int:
    """The largest GSO packet of an interface paced at this rate (64 KiB: no cap)."""
    if bits_per_second is None:
        return GSO_MAX
    return int(min(GSO_MAX, max(GSO_MIN, bits_per_second * GSO_WIRE_TIME_S / 8)))


def cap_gso(ns: str, dev: str, bits_per_second: int | None) -> None:
    run(
        "ip",
        "-n",
        ns,
        "link",
        "set",
        "dev",
        dev,
        "gso_max_size",
        str(gso_cap_bytes(bits_per_second)),
    )


def bridge(ns: str, name: str, filtered: bool = True) -> None:
    """A bridge, up. ``filtered``: its IPv4 packets pass iptables (br_netfilter's
    per-bridge nf_call_iptables, whatever the namespace's bridge-nf-call-iptables says),
    so that a wire daemon can hold what enters the switch from one port (:func:`nfqueue`
    ``port``); a bridge no daemon holds anything on (the grid's WAN) is not."""
    calls = ("nf_call_iptables", "1") if filtered else ()
    run("ip", "-n", ns, "link", "add", name, "type", "bridge", *calls)
    run("ip", "-n", ns, "link", "set", name, "up")


INGRESS = "<in"  # nfqueue's dest for the packets arriving on eth0

# Present while the kernel's bridge netfilter (br_netfilter) is active, in every namespace.
BRIDGE_NETFILTER = Path("/proc/sys/net/bridge")
# What a bridge outside the project does under br_netfilter: the module turns these on in
# every namespace when it loads, which would send the host's own bridges (docker0, virbr0,
# a VM bridge) through the host's iptables; ours ask for it per bridge (:func:`bridge`).
BRIDGE_NETFILTER_CALLS = (
    "bridge-nf-call-iptables",
    "bridge-nf-call-ip6tables",
    "bridge-nf-call-arptables",
)


def _add_physdev_rule(add_rule, remove_rule) -> None:
    """Add a physdev rule (``add_rule()``), whose first use makes the kernel load
    br_netfilter where it is a module. If it was not active before, the host's namespace
    gets back the bridges it had (no bridge filtering: :data:`BRIDGE_NETFILTER_CALLS` 0);
    if it is still not active, a delay held in the switch would silently not be: the
    rule is removed (``remove_rule()``) and the delay refused."""
    active_before = BRIDGE_NETFILTER.is_dir()
    add_rule()
    if active_before:
        return
    if not BRIDGE_NETFILTER.is_dir():
        remove_rule()
        raise UserError(
            "a delay or jitter is held in the virtual switch, which needs the kernel's bridge "
            "netfilter: load it with 'modprobe br_netfilter' (or build the cluster without "
            "delay and jitter)"
        )
    for name in BRIDGE_NETFILTER_CALLS:
        (BRIDGE_NETFILTER / name).write_text("0\n")


def nfqueue(
    ns: str, on: bool, queue: int = 0, dest: str | None = None, port: str | None = None
) -> None:
    """Send (or stop sending) IPv4 packets to an NFQUEUE: those leaving the namespace's
    eth0, all of them to queue 0, or (``dest``) those to one address or subnet
    (``!SUBNET``: those not to it) to their own queue, ahead of the rule for all; ``dest``
    INGRESS: those arriving on eth0 instead. ``port`` (in a switch namespace): those its
    bridge takes in from that port instead (``dest`` as above), seen by iptables through
    br_netfilter (:func:`bridge`) and matched by physdev. ``--queue-bypass`` lets packets
    through while no daemon listens."""
    target = ("-j", "NFQUEUE", "--queue-num", str(queue), "--queue-bypass")
    if dest == INGRESS:
        rule = ("-A" if on else "-D", "PREROUTING", "-i", "eth0", *target)
        run("ip", "netns", "exec", ns, "iptables", "-t", "mangle", *rule)
        return
    negate = ("!",) if dest and dest.startswith("!") else ()
    to = (*negate, "-d", dest.removeprefix("!")) if dest else ()
    if port is None:
        chain, match = "POSTROUTING", ("-o", "eth0", *to)
    else:
        chain, match = "PREROUTING", ("-m", "physdev", "--physdev-in", port, *to)
    if not on:
        where: tuple[str, ...] = ("-D", chain)
    else:  # a rule for one address goes first, or the rule for all would take its packets
        where = ("-I", chain, "1") if dest else ("-A", chain)
    iptables = ("ip", "netns", "exec", ns, "iptables", "-t", "mangle")
    if port is not None and on:
        _add_physdev_rule(
            lambda: run(*iptables, *where, *match, *target),
            lambda: run(*iptables, "-D", chain, *match, *target),
        )
    else:
        run(*iptables, *where, *match, *target)


def set_link_up(sock: socket.socket, dev: str, up: bool) -> None:
    """ip link set DEV up/down in the caller's namespace, by ioctl (no process per flip)."""
    name = dev.encode()
    flags = _IFREQ.unpack(fcntl.ioctl(sock, _SIOCGIFFLAGS, _IFREQ.pack(name, 0)))[1]
    flags = flags | _IFF_UP if up else flags & ~_IFF_UP
    fcntl.ioctl(sock, _SIOCSIFFLAGS, _IFREQ.pack(name, flags))


FLAP_PRIORITY = 50  # SCHED_FIFO: above the wire daemons (1), below the kernel's IRQ threads


def flap(dev: str, down_s: float, period_s: float) -> None:
    """Take DEV down for down_s at the start of every period_s (on a fixed schedule, so
    the period does not drift) until SIGTERM, which leaves it up. Run inside the
    namespace: ``ip netns exec NS python -m clustertune.netns flap DEV DOWN_S PERIOD_S``."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # real-time, as a switch port's timer is: at normal priority a loaded machine took the
    # port down up to 84 ms late (load 11-15) and cut short 8 of 20 flap tests at load 21-31
    with contextlib.suppress(OSError):  # without the privilege it flaps on schedule less well
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(FLAP_PRIORITY))
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    start = time.monotonic()
    try:
        for k in range(sys.maxsize):
            for at, up in ((start + k * period_s, False), (start + k * period_s + down_s, True)):
                time.sleep(max(0.0, at - time.monotonic()))
                set_link_up(sock, dev, up)
    finally:
        set_link_up(sock, dev, True)


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] != "flap":
        sys.exit("usage: python -m clustertune.netns flap DEV DOWN_S PERIOD_S")
    flap(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]))
