"""The wire of a virtual cluster: what its links do to packets, set up on a built cluster
and changed on a running one (``vcluster set``).

Links are shaped with tbf on *both* veth ends (egress shaping limits one direction).
Everything else comes from ct-nfq-delay daemons (netem does not exist on these kernels)
behind iptables NFQUEUE rules. On a host's egress (eth0) one drops its lost packets and,
with ``wire="paced"``, paces every packet at the link rate (each frame its serialisation
time, so no message size outruns the wire, as the token bucket lets mid-size ping-pong
do); tbf remains the limit of what a host takes from several senders at once. In the
switch, one per host holds what enters from that host's port for its propagation delay
and jitter. Held on the sender's egress, as it was before issue 19, a packet still
counted against the sending socket's small-queue limit (TCP lets ~1 ms of its pacing rate
wait in its host's queues), which capped one TCP flow at ~2 packets per delay: 20 Mbit/s
on a 100 Mbit link with 2 ms each way. Daemons change their parameters on SIGHUP.

Faults (docs/faults.md) are per host: loss through that host's egress daemon, delay and
jitter through its daemon in the switch, a rate below nominal through the pacer and tbf,
and a flapping link through a small process that takes the host's switch port down and
up. Per link (one pair of hosts, e.g. a bad route between them): loss through one more
egress daemon on each end, delay and jitter through one more daemon per direction in
the switch, each on its own queue, for the packets to the other end.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time

from .. import kernels, netns
from ..errors import UserError
from . import daemons
from .faults import (
    FAULT_FIELDS,
    LINK_FAULT_FIELDS,
    RATE_KEYS,
    link_key,
    merge_faults,
    merged_faults,
    parse_set_items,
)
from .state import daemon_files, running_state, save_state


def direction_rate(host: dict, direction: str) -> int | None:
    """The rate of one direction of a host's link: the slowest of its nominal link, its
    fault rate and that direction's (``tx``: what it sends, ``rx``: what it receives)."""
    rates = [
        host["link_bps"],
        *(host["faults"].get(k) for k in ("rate_bps", f"{direction}_rate_bps")),
    ]
    given = [r for r in rates if r is not None]
    return min(given) if given else None


def shape_host(state: dict, index: int) -> None:
    """tbf on both ends of a host's link: its eth0 at its sending rate, its switch port
    (the switch sending to it) at its receiving rate; and the GSO cap its pacer needs
    (:func:`netns.cap_gso`)."""
    host = state["hosts"][index]
    tx = direction_rate(host, "tx")
    netns.shape(host["namespace"], "eth0", tx)
    if state.get("wire") == "paced":
        netns.cap_gso(host["namespace"], "eth0", tx)
    netns.shape(state["switch_ns"], f"vh{index}", direction_rate(host, "rx"))


def daemon_params(state: dict, index: int) -> dict:
    """What a host's egress ct-nfq-delay applies: its wire's rate (the pacer; 0 on an
    unshaped link) and its loss. The delay and jitter of what it sends are held in the
    switch (:func:`apply_delays`)."""
    host = state["hosts"][index]
    faults = host["faults"]
    paced = state.get("wire") == "paced"
    return {
        "rate_bps": (direction_rate(host, "tx") or 0) if paced else 0,
        "delay_us": 0,
        "jitter_us": 0,
        "loss": faults.get("loss", 0.0),
        "seed": faults.get("seed", index + 1),
    }


def _link_seed(sender: int, peer: int) -> int:
    """The default seed of one direction of a faulty link's loss and jitter."""
    return 1000 * (sender + 1) + peer + 1


def host_delay(state: dict, sender: int) -> tuple[int, int, int]:
    """(delay_us, jitter_us, seed of the jitter) of what ``sender`` sends: its faults over
    the cluster-wide delay."""
    faults = state["hosts"][sender]["faults"]
    return (
        faults.get("delay_us", state["delay_us"]),
        faults.get("jitter_us", 0),
        faults.get("seed", sender + 1),
    )


def sent_delay(state: dict, sender: int, receiver: int) -> tuple[int, int, int]:
    """:func:`host_delay` of the packets ``sender`` sends to ``receiver``: their link's
    delay and jitter where it sets either, over the sender's."""
    hosts = state["hosts"]
    key = "-".join(hosts[i]["name"] for i in sorted((sender, receiver)))
    link = state.get("link_faults", {}).get(key, {})
    delay, jitter, seed = host_delay(state, sender)
    if "delay_us" in link or "jitter_us" in link:
        seed = link.get("seed", _link_seed(sender, receiver))
        return link.get("delay_us", delay), link.get("jitter_us", jitter), seed
    return delay, jitter, seed


_NEEDS_DAEMON = ("rate_bps", "delay_us", "jitter_us", "loss")


# On a paced wire with sites, what a host sends out of its site leaves through one more
# daemon (key "<host>>wan", this queue) paced at the slower of its link and the WAN: the
# host's own pacer knows only its link, and the WAN's tbf let a collective read through
# at 120 % of 1 Gbit (a bucket of 125 kB holds a 32^3 read). The WAN's tbf stays, for
# what several hosts send across at once.
WAN_QUEUE = 1000


def _paced_wan(state: dict) -> bool:
    return state.get("wire") == "paced" and state["sites"] > 1 and bool(state.get("wan_bps"))


def _wan_rate(state: dict, rate_bps: int) -> int:
    """A pacer's rate for packets crossing the WAN: its link's (0: unshaped) or the WAN's."""
    return min(r for r in (rate_bps, state["wan_bps"]) if r)


# On a paced wire, a host that receives slower than another host may send to it gets a
# pacer on what it receives too (key "<host><rx", this queue, PREROUTING): the sender's
# pacer paces at the sender's rate, and the tbf on the receiver's switch port let a 16 KiB
# ping-pong into a 100 Mbit host read 145 Mbit/s (its 15 kB bucket; helper netreport).
RX_QUEUE = 2000


def _rx_pacer_rate(state: dict, index: int) -> int:
    """The rate of a host's receive pacer: its receive rate where some other host may send
    to it faster (through the WAN at most the WAN's rate), else 0 (no pacer)."""
    host = state["hosts"][index]
    rx = direction_rate(host, "rx")
    if state.get("wire") != "paced" or rx is None:
        return 0
    for j, sender in enumerate(state["hosts"]):
        tx = direction_rate(sender, "tx") or 0  # 0: unshaped, faster than any rate
        if j != index and _paced_wan(state) and sender["site_index"] != host["site_index"]:
            tx = _wan_rate(state, tx)
        if j != index and (tx == 0 or tx > rx):
            return rx
    return 0


def apply_rx_pacer(state: dict, index: int) -> dict[str, int]:
    """Start, retune or stop a host's receive pacer (:func:`_rx_pacer_rate`)."""
    host = state["hosts"][index]
    params = dict.fromkeys(_NEEDS_DAEMON, 0) | {"seed": index + 1}
    params["rate_bps"] = _rx_pacer_rate(state, index)
    return _apply_daemon(
        state,
        f"{host['name']}<rx",
        host["namespace"],
        RX_QUEUE,
        netns.INGRESS,
        params,
        f"receive pacer on {host['name']}",
    )


# The propagation delay and jitter of what host i sends are held in the switch, as its
# packets enter from port vh<i> (key "<host>@sw", NFQUEUE i of the switch namespace); a
# faulty link's, for the packets to its peer j, by one more daemon ("<host>><peer>@sw",
# queue SWITCH_LINK_QUEUE + 256 i + j, rule ahead of the host's). There the packet no
# longer counts against its socket's small-queue limit (measured: docs/network.md,
# "Delay"). A cluster without delay or jitter has none.
SWITCH_LINK_QUEUE = 4096


def _delay_params(delay_us: int, jitter_us: int, seed: int) -> dict:
    return dict.fromkeys(_NEEDS_DAEMON, 0) | {
        "delay_us": delay_us,
        "jitter_us": jitter_us,
        "seed": seed,
    }


def apply_delays(state: dict, index: int) -> dict[str, int]:
    """Start, retune or stop the switch's daemon holding what host ``index`` sends."""
    host = state["hosts"][index]
    return _apply_daemon(
        state,
        f"{host['name']}@sw",
        state["switch_ns"],
        index,
        None,
        _delay_params(*host_delay(state, index)),
        f"delay daemon of {host['name']}",
        port=f"vh{index}",
    )


def apply_packet_faults(state: dict, index: int) -> dict[str, int]:
    """Start, retune or stop the host's egress daemon (queue 0, every packet it sends) so
    it applies daemon_params, and on a paced wire with sites its WAN daemon; returns what
    it started, for :func:`check_started`."""
    host = state["hosts"][index]
    params = daemon_params(state, index)
    started = _apply_daemon(
        state, host["name"], host["namespace"], 0, None, params, f"fault daemon on {host['name']}"
    )
    if _paced_wan(state):
        params["rate_bps"] = _wan_rate(state, params["rate_bps"])
        started |= _apply_daemon(
            state,
            f"{host['name']}>wan",
            host["namespace"],
            WAN_QUEUE,
            f"!10.213.{host['site_index']}.0/24",
            params,
            f"WAN pacer on {host['name']}",
        )
    return started


def link_params(state: dict, sender: int, peer: int, faults: dict, seed: int) -> dict:
    """What the egress daemon for one direction of a lossy link applies: the sender's own
    egress daemon's parameters (its packets to that peer no longer pass that daemon) and
    both losses. Its delay and jitter are held in the switch (:func:`apply_link_faults`)."""
    params = daemon_params(state, sender)
    params["loss"] = 1 - (1 - params["loss"]) * (1 - faults.get("loss", 0.0))
    params["seed"] = faults.get("seed", seed)
    if (
        _paced_wan(state)
        and state["hosts"][sender]["site_index"] != state["hosts"][peer]["site_index"]
    ):
        params["rate_bps"] = _wan_rate(state, params["rate_bps"])
    return params


def apply_link_faults(state: dict, key: str) -> dict[str, int]:
    """Start, retune or stop the daemons of link ``key``, for the packets from each end
    to the other: its loss on the sender's egress (queue 1 + the peer's index), its delay
    and jitter in the switch (:data:`SWITCH_LINK_QUEUE`)."""
    index = {h["name"]: i for i, h in enumerate(state["hosts"])}
    faults = state.get("link_faults", {}).get(key)
    started: dict[str, int] = {}
    a, b = key.split("-")
    for src, dst in ((a, b), (b, a)):
        i, j = index[src], index[dst]
        if not (faults or {}).get("loss"):
            params = dict.fromkeys(_NEEDS_DAEMON, 0)
        else:
            params = link_params(state, i, j, faults, seed=_link_seed(i, j))
        started |= _apply_daemon(
            state,
            f"{src}>{dst}",
            state["hosts"][i]["namespace"],
            1 + j,
            state["hosts"][j]["address"],
            params,
            f"fault daemon of link {key} on {src}",
        )
        # a link's delay or jitter, even 0, replaces its hosts' for the packets between them
        held = faults is not None and bool({"delay_us", "jitter_us"} & set(faults))
        started |= _apply_daemon(
            state,
            f"{src}>{dst}@sw",
            state["switch_ns"],
            SWITCH_LINK_QUEUE + 256 * i + j,
            state["hosts"][j]["address"],
            _delay_params(*sent_delay(state, i, j)),
            f"delay daemon of link {key} from {src}",
            port=f"vh{i}",
            needed=held,
        )
    return started


def _apply_daemon(
    state: dict,
    key: str,
    namespace: str,
    queue: int,
    dest: str | None,
    params: dict,
    what: str,
    port: str | None = None,
    needed: bool | None = None,
) -> dict[str, int]:
    """One ct-nfq-delay (state["delay_pids"][key]) behind its NFQUEUE rule
    (:func:`netns.nfqueue`): started when it is ``needed`` (by default: when ``params``
    do anything), retuned by SIGHUP, stopped with its rule when no longer. Returns what
    it started, for :func:`check_started`."""
    if needed is None:
        needed = any(params[k] for k in _NEEDS_DAEMON)
    pid = state["delay_pids"].get(key)
    params_file, stats_file = daemon_files(state, key)
    if pid is not None and needed:
        params_file.write_text("".join(f"{k}={v}\n" for k, v in params.items()))
        os.kill(pid, signal.SIGHUP)
        return {}
    if pid is not None:
        netns.nfqueue(namespace, False, queue, dest, port)
        daemons.stop([pid], grace_s=2)
        del state["delay_pids"][key]
        save_state(state)
        return {}
    if not needed:
        return {}
    if shutil.which("iptables") is None:
        raise UserError(
            "a shaped link, delay, jitter and loss need iptables (NFQUEUE): install it with 'make setup'"
        )
    netns.nfqueue(namespace, True, queue, dest, port)
    daemon = kernels.kernel_path("ct-nfq-delay", "serial")
    options = {
        "--rate-bps": params["rate_bps"],
        "--jitter-us": params["jitter_us"],
        "--loss": params["loss"],
        "--seed": params["seed"],
        "--params": params_file,
        "--stats": stats_file,
    }
    argv = [str(daemon), str(queue), str(params["delay_us"])]
    argv += [word for option, value in options.items() for word in (option, str(value))]
    state["delay_pids"][key] = _start_in(namespace, argv)
    save_state(state)
    return {what: state["delay_pids"][key]}


def apply_flap(state: dict, index: int) -> dict[str, int]:
    """Stop the host's flapping process if any, and start one if its faults say so;
    returns what it started, for :func:`check_started`."""
    host = state["hosts"][index]
    pid = state["flap_pids"].pop(host["name"], None)
    if pid is not None:
        daemons.stop([pid], grace_s=2)  # it leaves the port up
    flap = host["faults"].get("flap")
    if flap is not None:
        argv = [
            sys.executable,
            "-m",
            "clustertune.netns",
            "flap",
            f"vh{index}",
            str(flap["down_ms"] / 1000),
            str(flap["period_ms"] / 1000),
        ]
        state["flap_pids"][host["name"]] = _start_in(state["switch_ns"], argv)
    save_state(state)
    return (
        {}
        if flap is None
        else {f"link flapping of {host['name']}": state["flap_pids"][host["name"]]}
    )


def _start_in(ns: str, argv: list[str]) -> int:
    """A process in namespace ns that outlives this command; down() kills it."""
    return daemons.start(["ip", "netns", "exec", ns, *argv])


def check_started(started: dict[str, int]) -> None:
    """Give processes just started 0.2 s (once, for all), then fail naming one that died."""
    if not started:
        return
    time.sleep(0.2)
    for what, pid in started.items():
        if not daemons.alive(pid):
            raise UserError(f"{what} exited at start (NFQUEUE unavailable?)")


def set_faults(name: str, host_name: str, items: list[str]) -> dict:
    """``vcluster set``: change one host's faults on a running cluster. ``clear`` (first)
    removes them all; FIELD=VALUE items then set fields and FIELD=off removes one."""
    state = running_state(name)
    index = next((i for i, h in enumerate(state["hosts"]) if h["name"] == host_name), None)
    if index is None:
        raise UserError(
            f"vcluster set: --host {host_name!r} is not a host of {name} "
            f"(hosts are host0..host{len(state['hosts']) - 1})"
        )
    clear, faults = parse_set_items(items, FAULT_FIELDS)
    host = state["hosts"][index]
    before = dict(host["faults"])
    if clear:
        host["faults"] = {}
    merge_faults(host, faults, "vcluster set")
    save_state(state)
    changed = {
        k for k in set(before) | set(host["faults"]) if before.get(k) != host["faults"].get(k)
    }
    try:
        _apply_host_faults(state, index, changed)
    except UserError:
        # refused (no bridge netfilter for a delay, a daemon that died at start): the
        # cluster goes back to the faults it ran with, and its saved state says so
        host["faults"] = before
        save_state(state)
        _apply_host_faults(state, index, changed)
        raise
    return state


def _apply_host_faults(state: dict, index: int, changed: set[str]) -> None:
    """Rebuild what carries host ``index``'s ``changed`` fault fields, as its state says."""
    host_name = state["hosts"][index]["name"]
    started: dict[str, int] = {}
    if changed & RATE_KEYS:
        shape_host(state, index)
        for i in range(len(state["hosts"])):  # who needs a receive pacer may have changed
            started |= apply_rx_pacer(state, i)
    if changed & {*RATE_KEYS, "delay_us", "jitter_us", "loss", "seed"}:
        started |= apply_packet_faults(state, index) | apply_delays(state, index)
        for key in state.get("link_faults", {}):  # they build on the host's own
            if host_name in key.split("-"):
                started |= apply_link_faults(state, key)
    if "flap" in changed:
        started |= apply_flap(state, index)
    check_started(started)


def set_link_faults(name: str, pair: str, items: list[str]) -> tuple[dict, str]:
    """``vcluster set --link A-B``: change one link's faults on a running cluster, as
    :func:`set_faults` does a host's (``clear`` first removes them all); the state and the
    link's key (its hosts in the cluster's order)."""
    state = running_state(name)
    key = link_key(state["hosts"], pair, f"vcluster set --link {pair}")
    clear, faults = parse_set_items(items, LINK_FAULT_FIELDS)
    links = state.setdefault("link_faults", {})
    before = links.get(key, {})
    links[key] = merged_faults({} if clear else before, faults)
    if not links[key]:
        del links[key]
    save_state(state)
    try:
        check_started(apply_link_faults(state, key))
    except UserError:  # refused: back to what the link ran with, as set_faults does
        if before:
            links[key] = before
        else:
            links.pop(key, None)
        save_state(state)
        apply_link_faults(state, key)
        raise
    return state, key
