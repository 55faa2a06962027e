"""The embedded virtual cluster: N hosts as network namespaces on one machine.

Topology (names are per-namespace, so every cluster reuses them)::

    ns <prefix>host<i>   eth0 10.213.<site>.<10+i>/16 --veth-- vh<i> in ns <prefix>sw
    ns <prefix>sw        bridge br<site> per site; with several sites, each site bridge
                         joins bridge "wan" through a veth pair s<k>w <-> w<k>s

Links are shaped with tbf on *both* veth ends (egress shaping limits one direction).
Per-packet delay (netem does not exist on these kernels) comes from one ct-nfq-delay
daemon per host behind an iptables NFQUEUE rule on its eth0; with ``wire="paced"`` that
daemon also paces every packet at the link rate (each frame its serialisation time, so
no message size outruns the wire, as the token bucket lets mid-size ping-pong do), and
tbf remains the limit of what a host takes from several senders at once.

Faults (docs/faults.md) are per host: loss, delay and jitter through that host's daemon
(parameters changed on SIGHUP), a rate below nominal through the pacer and tbf, and a
flapping link through a small process that takes the host's switch port down and up.
Per link (one pair of hosts, e.g. a bad route between them): loss, delay and jitter
through one more daemon on each end, on its own queue, for the packets to the other end.

State lives in /run/clustertune/vcluster/<name>/state.json, written *before* anything is
created, so ``down`` can remove every piece after a crash, and ``up`` removes stale
pieces of the same name before it builds.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from . import kernels, netns
from .cluster import Cluster, Host, Site
from .errors import UserError
from .units import format_rate, parse_rate

RUN_DIR = Path(os.environ.get("CLUSTERTUNE_RUN_DIR", "/run/clustertune")) / "vcluster"
_NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,11}$")
SUBNET_PREFIX = 16
MAX_DELAY_US = 1_000_000


def prefix(name: str) -> str:
    return f"ct-{name}-"


def state_dir(name: str) -> Path:
    return RUN_DIR / name


def require_root() -> None:
    if os.geteuid() != 0:
        raise UserError(
            "a virtual cluster needs root (network namespaces need CAP_NET_ADMIN and "
            "CAP_SYS_ADMIN); without root, run commands without --cluster to use ranks on "
            "localhost"
        )


def validate_name(name: str) -> None:
    if not _NAME_RE.match(name):
        raise UserError(
            f"bad cluster name {name!r}: 1-12 lower-case letters and digits, starting with a letter"
        )


def names() -> list[str]:
    if not RUN_DIR.is_dir():
        return []
    return sorted(p.name for p in RUN_DIR.iterdir() if (p / "state.json").is_file())


def load_state(name: str) -> dict | None:
    path = state_dir(name) / "state.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def _save_state(state: dict) -> None:
    directory = state_dir(state["name"])
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / "state.json.tmp"
    tmp.write_text(json.dumps(state, indent=1))
    tmp.replace(directory / "state.json")  # atomic: a crash never leaves half a state file


# Link models. paced (the default): every packet through the host's ct-nfq-delay, charged
# its frames' time on the wire (never above nominal; docs/network.md), at the cost of
# ~20 us per hop and, on a CPU-starved machine, late releases (wire_lateness says how
# late; a run on a late wire is labelled). tbf: a token bucket per veth end; cheap and
# steady under CPU load, but a message smaller than its bucket passes at memory speed
# (mid-size ping-pong reads up to 2x nominal): rate only, for machines too busy to pace.
WIRES = ("tbf", "paced")
DEFAULT_WIRE = "paced"  # every figure read over it bounded by the link (issue 19)
WIRE_HELP = (
    "link model: paced (default: every frame its time on the wire) or tbf (rate only: "
    "mid-size messages outrun it; for machines too busy to pace); docs/network.md"
)


def plan(
    name: str,
    hosts: int,
    link_bps: int | None,
    host_links: dict[str, int | None] | None = None,
    sites: int = 1,
    wan_bps: int | None = None,
    delay_us: int = 0,
    cores: int = 1,
    host_faults: dict[str, dict] | None = None,
    wire: str = DEFAULT_WIRE,
    link_faults: dict[str, dict] | None = None,
) -> dict:
    """The state of a cluster about to be built: pure, so it can be checked without root.

    ``host_faults`` maps host names to faults as :func:`parse_faults` returns them,
    ``link_faults`` pairs ``"hostA-hostB"`` to link faults (:func:`parse_link_fault`);
    ``wire`` is the link model (:data:`WIRES`)."""
    validate_name(name)
    if wire not in WIRES:
        raise UserError(f"--wire {wire}: expected one of {', '.join(WIRES)}")
    if not 1 <= hosts <= 200:
        raise UserError(f"--hosts {hosts}: must be between 1 and 200")
    if not 1 <= sites <= min(hosts, 50):
        raise UserError(f"--sites {sites}: must be between 1 and the number of hosts ({hosts})")
    if delay_us < 0 or delay_us > MAX_DELAY_US:
        raise UserError(f"--delay-us {delay_us}: must be between 0 and {MAX_DELAY_US}")
    host_links = dict(host_links or {})
    host_faults = dict(host_faults or {})
    pre = prefix(name)
    host_list = []
    for i in range(hosts):
        site = i * sites // hosts  # contiguous blocks of hosts per site
        host_name = f"host{i}"
        host_list.append(
            {
                "name": host_name,
                "namespace": f"{pre}{host_name}",
                "address": f"10.213.{site}.{10 + i}",
                "site": f"site{site}",
                "site_index": site,
                "link_bps": host_links.pop(host_name, link_bps),
                "cores": cores,
                "faults": {},
            }
        )
        merge_faults(host_list[-1], host_faults.pop(host_name, {}))
    unknown = sorted(set(host_links) | set(host_faults))
    if unknown:
        raise UserError(
            f"--host-link names unknown host(s) {', '.join(unknown)} "
            f"(hosts are host0..host{hosts - 1})"
        )
    links: dict[str, dict] = {}
    for pair, faults in (link_faults or {}).items():
        key = link_key(host_list, pair, f"--link-fault {pair}")
        links[key] = _merged(links.get(key, {}), faults)
    return {
        "name": name,
        "status": "building",
        "switch_ns": f"{pre}sw",
        "hosts": host_list,
        "sites": sites,
        "link_bps": link_bps,
        "wan_bps": wan_bps if sites > 1 else None,
        "delay_us": delay_us,
        "wire": wire,
        "link_faults": {k: v for k, v in links.items() if v},
        "delay_pids": {},
        "flap_pids": {},
        "created": time.time(),
    }


# --- faults (docs/faults.md) ------------------------------------------------------------

FAULT_FIELDS = ("rate", "loss", "delay", "jitter", "flap", "seed", "tx-rate", "rx-rate")
LINK_FAULT_FIELDS = ("loss", "delay", "jitter", "seed")  # what a per-destination queue can do
_FAULT_KEYS = {
    "rate": "rate_bps",
    "tx-rate": "tx_rate_bps",
    "rx-rate": "rx_rate_bps",
    "loss": "loss",
    "delay": "delay_us",
    "jitter": "jitter_us",
    "flap": "flap",
    "seed": "seed",
}
# One direction of a host's port (a duplex mismatch, a bad transmit side): tx is what the
# host sends (tbf on its eth0), rx what it receives (tbf on its switch port), each below
# the host's rate and nominal link.
RATE_FIELDS = ("rate", "tx-rate", "rx-rate")
_DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)(us|ms|s)$")
_DURATION_US = {"us": 1, "ms": 1000, "s": 1_000_000}
OFF = "off"


def _number(text: str, kind=float):
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"expected {'an integer' if kind is int else 'a number'}") from None


def _duration_us(text: str) -> float:
    match = _DURATION_RE.match(text.strip().lower())
    if not match:
        raise ValueError("expected a duration with a unit (us, ms, s), e.g. 200us, 1.5ms")
    return float(match.group(1)) * _DURATION_US[match.group(2)]


def _parse_field(field: str, text: str):
    """One fault field's value; ValueError says what was expected."""
    if field in RATE_FIELDS:
        rate = parse_rate(text)  # UserError on a bad rate
        if rate is None:
            raise ValueError(f"a fault rate is a number (to remove it: {field}=off)")
        return rate
    if field == "loss":
        text = text.strip()
        percent = text.endswith("%")
        loss = _number(text[:-1]) / 100 if percent else _number(text)
        if not 0 <= loss <= 1:
            raise ValueError("expected a fraction from 0 to 1 or a percentage, e.g. 0.001 or 0.1%")
        return loss
    if field in ("delay", "jitter"):
        micros = _duration_us(text)
        if micros > MAX_DELAY_US or micros != int(micros):
            raise ValueError("expected whole microseconds, at most 1s")
        return int(micros)
    if field == "flap":
        down, sep, period = text.partition("/")
        if not sep:
            raise ValueError("expected DOWN/PERIOD, e.g. 300ms/5s")
        down_ms, period_ms = _duration_us(down) / 1000, _duration_us(period) / 1000
        if not 1 <= down_ms < period_ms <= 3_600_000:
            raise ValueError("DOWN must be at least 1ms and shorter than PERIOD (at most 1h)")
        return {"down_ms": down_ms, "period_ms": period_ms}
    seed = _number(text, int)
    if not 0 <= seed < 2**31:
        raise ValueError("expected an integer from 0 to 2147483647")
    return seed


def parse_faults(items: list[str], where: str, fields: tuple[str, ...] = FAULT_FIELDS) -> dict:
    """FIELD=VALUE items into faults (state keys); ``FIELD=off`` maps to None (remove).

    A bad item raises a one-line UserError naming ``where`` and the field."""
    faults: dict = {}
    for item in items:
        field, sep, text = item.partition("=")
        field = field.strip().lower()
        if field not in fields or not sep:
            raise UserError(
                f"{where}: {item!r}: expected FIELD=VALUE with FIELD one of {', '.join(fields)}"
            )
        if text.strip().lower() == OFF:
            faults[_FAULT_KEYS[field]] = None
            continue
        try:
            faults[_FAULT_KEYS[field]] = _parse_field(field, text)
        except (ValueError, UserError) as exc:
            raise UserError(f"{where}: {field}: {exc}, got {text!r}") from None
    return faults


def parse_host_link(text: str) -> tuple[str, dict]:
    """``HOST=RATE[,FIELD=VALUE...]`` or ``HOST=FIELD=VALUE[,...]`` -> (host, changes), the
    changes holding ``link_bps`` when a nominal rate is given and the faults under "faults"."""
    where = f"--host-link {text!r}"
    host, sep, spec = text.partition("=")
    if not sep or not host or not spec:
        raise UserError(f"{where}: expected HOST=RATE[,FIELD=VALUE...], e.g. host2=1gbit,loss=0.1%")
    items = [item for item in spec.split(",") if item.strip()]
    changes: dict = {}
    if items and "=" not in items[0]:
        try:
            changes["link_bps"] = parse_rate(items.pop(0))
        except UserError as exc:
            raise UserError(f"{where}: link: {exc}") from None
    changes["faults"] = parse_faults(items, where)
    return host.strip(), changes


def parse_link_fault(text: str) -> tuple[str, dict]:
    """``HOSTA-HOSTB=FIELD=VALUE[,...]`` -> (pair as given, faults of LINK_FAULT_FIELDS)."""
    where = f"--link-fault {text!r}"
    pair, sep, spec = text.partition("=")
    if not sep or "-" not in pair or not spec:
        raise UserError(
            f"{where}: expected HOSTA-HOSTB=FIELD=VALUE[,...], e.g. host1-host2=loss=0.1%"
        )
    items = [item for item in spec.split(",") if item.strip()]
    return pair.strip(), parse_faults(items, where, LINK_FAULT_FIELDS)


def link_key(hosts: list[dict], pair: str, where: str) -> str:
    """``hostA-hostB`` of two different hosts of the cluster, lower index first."""
    index = {h["name"]: i for i, h in enumerate(hosts)}
    ends = pair.split("-")
    if len(ends) != 2 or ends[0] == ends[1] or not all(e in index for e in ends):
        raise UserError(
            f"{where}: expected two different hosts of the cluster joined by '-', e.g. "
            f"host0-host1 (hosts are host0..host{len(hosts) - 1})"
        )
    return "-".join(sorted(ends, key=index.get))


def merge_faults(host: dict, faults: dict, where: str = "--host-link") -> None:
    """Apply parsed faults to a host of the state (None removes a field) and check them."""
    host["faults"] = _merged(host["faults"], faults)
    nominal = host["link_bps"]
    for field in RATE_FIELDS:
        rate = host["faults"].get(_FAULT_KEYS[field])
        if rate is not None and nominal is not None and rate > nominal:
            raise UserError(
                f"{where}: {field}: {format_rate(rate)} on {host['name']} is above its nominal "
                f"link {format_rate(nominal)} (a fault rate is below nominal)"
            )


def format_faults(faults: dict) -> str:
    """The faults in the syntax they are given in (``rate=...,loss=...``); "" for none."""

    def duration(micros: float) -> str:
        for unit in ("s", "ms"):
            if micros >= _DURATION_US[unit] and micros % (_DURATION_US[unit] // 10) == 0:
                return f"{micros / _DURATION_US[unit]:g}{unit}"
        return f"{micros:g}us"

    parts = []
    for field in FAULT_FIELDS:
        value = faults.get(_FAULT_KEYS[field])
        if value is None:
            continue
        if field in RATE_FIELDS:
            value = format_rate(value)
        elif field == "loss":
            value = f"{value * 100:g}%"
        elif field in ("delay", "jitter"):
            value = duration(value)
        elif field == "flap":
            value = f"{duration(value['down_ms'] * 1000)}/{duration(value['period_ms'] * 1000)}"
        parts.append(f"{field}={value}")
    return ",".join(parts)


def set_faults(name: str, host_name: str, items: list[str]) -> dict:
    """``vcluster set``: change one host's faults on a running cluster. ``clear`` (first)
    removes them all; FIELD=VALUE items then set fields and FIELD=off removes one."""
    state = _running_state(name)
    index = next((i for i, h in enumerate(state["hosts"]) if h["name"] == host_name), None)
    if index is None:
        raise UserError(
            f"vcluster set: --host {host_name!r} is not a host of {name} "
            f"(hosts are host0..host{len(state['hosts']) - 1})"
        )
    clear, faults = _set_items(items, FAULT_FIELDS)
    host = state["hosts"][index]
    before = dict(host["faults"])
    if clear:
        host["faults"] = {}
    merge_faults(host, faults, "vcluster set")
    _save_state(state)
    changed = {
        k for k in set(before) | set(host["faults"]) if before.get(k) != host["faults"].get(k)
    }
    started: dict[str, int] = {}
    if changed & _RATE_KEYS:
        _shape(state, index)
        for i in range(len(state["hosts"])):  # who needs a receive pacer may have changed
            started |= _apply_rx_pacer(state, i)
    if changed & {*_RATE_KEYS, "delay_us", "jitter_us", "loss", "seed"}:
        started |= _apply_packet_faults(state, index)
        for key in state.get("link_faults", {}):  # they build on the host's own
            if host_name in key.split("-"):
                started |= _apply_link_faults(state, key)
    if "flap" in changed:
        started |= _apply_flap(state, index)
    _check_started(started)
    return state


def set_link_faults(name: str, pair: str, items: list[str]) -> tuple[dict, str]:
    """``vcluster set --link A-B``: change one link's faults on a running cluster, as
    :func:`set_faults` does a host's (``clear`` first removes them all); the state and the
    link's key (its hosts in the cluster's order)."""
    state = _running_state(name)
    key = link_key(state["hosts"], pair, f"vcluster set --link {pair}")
    clear, faults = _set_items(items, LINK_FAULT_FIELDS)
    links = state.setdefault("link_faults", {})
    links[key] = _merged({} if clear else links.get(key, {}), faults)
    if not links[key]:
        del links[key]
    _save_state(state)
    _check_started(_apply_link_faults(state, key))
    return state, key


def _running_state(name: str) -> dict:
    """The state of running cluster ``name``, for ``vcluster set``."""
    require_root()
    validate_name(name)
    state = load_state(name)
    if state is None or not _is_healthy(state):
        raise UserError(f"no running virtual cluster {name!r} (see 'clustertune vcluster status')")
    return state


def _set_items(items: list[str], fields: tuple[str, ...]) -> tuple[bool, dict]:
    """``vcluster set`` items: whether ``clear`` is among them, and the parsed rest."""
    if not items:
        raise UserError("vcluster set: nothing to change: give FIELD=VALUE items or clear")
    clear = [item for item in items if item.strip().lower() == "clear"]
    return bool(clear), parse_faults([i for i in items if i not in clear], "vcluster set", fields)


_ZERO_IS_OFF = ("loss", "jitter_us")


def _merged(old: dict, new: dict) -> dict:
    """Faults ``new`` over ``old``: a field set to off (None) is gone, and so is a loss or
    jitter of 0 (no such fault); a delay of 0 (overrides a default) and a seed of 0 stay."""
    merged = {**old, **new}
    return {k: v for k, v in merged.items() if v is not None and not (k in _ZERO_IS_OFF and v == 0)}


def _all_namespaces(state: dict) -> list[str]:
    return [h["namespace"] for h in state["hosts"]] + [state["switch_ns"]]


def _is_healthy(state: dict) -> bool:
    return state.get("status") == "up" and all(netns.exists(ns) for ns in _all_namespaces(state))


def up(state: dict) -> dict:
    """Build the cluster described by :func:`plan`; removes stale pieces of the same name."""
    require_root()
    for tool in ("ip", "tc", "unshare"):
        if shutil.which(tool) is None:
            raise UserError(f"{tool} not found: install iproute2 and util-linux (make setup)")
    name = state["name"]
    old = load_state(name)
    if old is not None and _is_healthy(old):
        raise UserError(
            f"virtual cluster {name!r} is already up; run 'clustertune vcluster down --name {name}' first"
        )
    _remove(name, old)
    _save_state(state)
    try:
        _build(state)
    except BaseException:
        _remove(name, state)
        raise
    state["status"] = "up"
    _save_state(state)
    return state


def _build(state: dict) -> None:
    sw = state["switch_ns"]
    netns.add(sw)
    for site in range(state["sites"]):
        netns.run("ip", "-n", sw, "link", "add", f"br{site}", "type", "bridge")
        netns.run("ip", "-n", sw, "link", "set", f"br{site}", "up")
    if state["sites"] > 1:
        netns.run("ip", "-n", sw, "link", "add", "wan", "type", "bridge")
        netns.run("ip", "-n", sw, "link", "set", "wan", "up")
        for site in range(state["sites"]):
            site_end, wan_end = f"s{site}w", f"w{site}s"
            netns.veth(sw, site_end, sw, wan_end)
            netns.run("ip", "-n", sw, "link", "set", site_end, "master", f"br{site}", "up")
            netns.run("ip", "-n", sw, "link", "set", wan_end, "master", "wan", "up")
            netns.shape(sw, site_end, state["wan_bps"])
            netns.shape(sw, wan_end, state["wan_bps"])
    entries = [(h["name"], h["address"]) for h in state["hosts"]]
    for i, host in enumerate(state["hosts"]):
        ns, port = host["namespace"], f"vh{i}"
        netns.add(ns)
        netns.veth(sw, port, ns, "eth0")
        netns.run("ip", "-n", sw, "link", "set", port, "master", f"br{host['site_index']}", "up")
        netns.run(
            "ip", "-n", ns, "addr", "add", f"{host['address']}/{SUBNET_PREFIX}", "dev", "eth0"
        )
        netns.run("ip", "-n", ns, "link", "set", "eth0", "up")
        _shape(state, i)
        netns.write_hosts_file(ns, entries)
    _write_agent(state)
    started: dict[str, int] = {}
    for i in range(len(state["hosts"])):
        started |= _apply_packet_faults(state, i) | _apply_flap(state, i)
    for i in range(len(state["hosts"])):
        started |= _apply_rx_pacer(state, i)
    for key in state.get("link_faults", {}):
        started |= _apply_link_faults(state, key)
    _check_started(started)


def _write_agent(state: dict) -> None:
    """The ssh stand-in that MPI launchers call as ``agent HOST COMMAND...``.

    It enters the host's namespace and a private UTS namespace named after the host, so
    gethostname(), OpenMPI session directories and shared-memory segment names differ
    per virtual host. Like ssh, it joins its arguments and runs them with ``sh -c``.
    """
    cases = "\n".join(
        f"  {h['name']}|{h['address']}) ns={h['namespace']}; name={h['name']} ;;"
        for h in state["hosts"]
    )
    script = f"""#!/bin/sh
# clustertune virtual cluster {state["name"]}: ssh replacement for MPI launchers
while [ $# -gt 0 ]; do case "$1" in -x|-n|-T|-q) shift ;; -o|-p|-l) shift 2 ;; *) break ;; esac; done
case "$1" in
{cases}
  *) echo "clustertune agent: unknown host '$1' in virtual cluster {state["name"]}" >&2; exit 255 ;;
esac
shift
exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$name" "$*"
"""
    path = state_dir(state["name"]) / "agent"
    path.write_text(script)
    path.chmod(0o755)
    state["agent"] = str(path)


_RATE_KEYS = {_FAULT_KEYS[f] for f in RATE_FIELDS}


def _direction_rate(host: dict, direction: str) -> int | None:
    """The rate of one direction of a host's link: the slowest of its nominal link, its
    fault rate and that direction's (``tx``: what it sends, ``rx``: what it receives)."""
    rates = [
        host["link_bps"],
        *(host["faults"].get(k) for k in ("rate_bps", f"{direction}_rate_bps")),
    ]
    given = [r for r in rates if r is not None]
    return min(given) if given else None


def _shape(state: dict, index: int) -> None:
    """tbf on both ends of a host's link: its eth0 at its sending rate, its switch port
    (the switch sending to it) at its receiving rate; and the GSO cap its pacer needs
    (:func:`netns.cap_gso`)."""
    host = state["hosts"][index]
    tx = _direction_rate(host, "tx")
    netns.shape(host["namespace"], "eth0", tx)
    if state.get("wire") == "paced":
        netns.cap_gso(host["namespace"], "eth0", tx)
    netns.shape(state["switch_ns"], f"vh{index}", _direction_rate(host, "rx"))


def _daemon_params(state: dict, index: int) -> dict:
    """What a host's ct-nfq-delay applies: its wire's rate (the pacer; 0 on an unshaped
    link), its faults over the cluster-wide delay."""
    host = state["hosts"][index]
    faults = host["faults"]
    paced = state.get("wire") == "paced"
    return {
        "rate_bps": (_direction_rate(host, "tx") or 0) if paced else 0,
        "delay_us": faults.get("delay_us", state["delay_us"]),
        "jitter_us": faults.get("jitter_us", 0),
        "loss": faults.get("loss", 0.0),
        "seed": faults.get("seed", index + 1),
    }


def _daemon_files(state: dict, key: str) -> tuple[Path, Path]:
    directory = state_dir(state["name"])
    return directory / f"{key}.nfq", directory / f"{key}.nfq.json"


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
    rx = _direction_rate(host, "rx")
    if state.get("wire") != "paced" or rx is None:
        return 0
    for j, sender in enumerate(state["hosts"]):
        tx = _direction_rate(sender, "tx") or 0  # 0: unshaped, faster than any rate
        if j != index and _paced_wan(state) and sender["site_index"] != host["site_index"]:
            tx = _wan_rate(state, tx)
        if j != index and (tx == 0 or tx > rx):
            return rx
    return 0


def _apply_rx_pacer(state: dict, index: int) -> dict[str, int]:
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


def _apply_packet_faults(state: dict, index: int) -> dict[str, int]:
    """Start, retune or stop the host's daemon (queue 0, every packet it sends) so it
    applies _daemon_params, and on a paced wire with sites its WAN daemon; returns what
    it started, for :func:`_check_started`."""
    host = state["hosts"][index]
    params = _daemon_params(state, index)
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


def _link_params(state: dict, sender: int, peer: int, faults: dict, seed: int) -> dict:
    """What the daemon for one direction of a faulty link applies: the sender's own
    daemon's parameters (its packets to that peer no longer pass that daemon), the
    link's delay and jitter in place of the host's, and both losses."""
    params = _daemon_params(state, sender)
    for key in ("delay_us", "jitter_us"):
        params[key] = faults.get(key, params[key])
    params["loss"] = 1 - (1 - params["loss"]) * (1 - faults.get("loss", 0.0))
    params["seed"] = faults.get("seed", seed)
    if (
        _paced_wan(state)
        and state["hosts"][sender]["site_index"] != state["hosts"][peer]["site_index"]
    ):
        params["rate_bps"] = _wan_rate(state, params["rate_bps"])
    return params


def _apply_link_faults(state: dict, key: str) -> dict[str, int]:
    """Start, retune or stop the two daemons of link ``key``: one per end, on queue
    1 + the peer's index, for the packets to the peer."""
    index = {h["name"]: i for i, h in enumerate(state["hosts"])}
    faults = state.get("link_faults", {}).get(key)
    started: dict[str, int] = {}
    a, b = key.split("-")
    for src, dst in ((a, b), (b, a)):
        i, j = index[src], index[dst]
        if faults is None:
            params = dict.fromkeys(_NEEDS_DAEMON, 0)
        else:
            params = _link_params(state, i, j, faults, seed=1000 * (i + 1) + j + 1)
        started |= _apply_daemon(
            state,
            f"{src}>{dst}",
            state["hosts"][i]["namespace"],
            1 + j,
            state["hosts"][j]["address"],
            params,
            f"fault daemon of link {key} on {src}",
        )
    return started


def _apply_daemon(
    state: dict, key: str, namespace: str, queue: int, dest: str | None, params: dict, what: str
) -> dict[str, int]:
    """One ct-nfq-delay (state["delay_pids"][key]) behind its NFQUEUE rule: started when
    ``params`` need it, retuned by SIGHUP, stopped with its rule when they no longer do.
    Returns what it started, for :func:`_check_started`."""
    needed = any(params[k] for k in _NEEDS_DAEMON)
    pid = state["delay_pids"].get(key)
    params_file, stats_file = _daemon_files(state, key)
    if pid is not None and needed:
        params_file.write_text("".join(f"{k}={v}\n" for k, v in params.items()))
        os.kill(pid, signal.SIGHUP)
        return {}
    if pid is not None:
        netns.nfqueue(namespace, False, queue, dest)
        _stop(pid)
        del state["delay_pids"][key]
        _save_state(state)
        return {}
    if not needed:
        return {}
    if shutil.which("iptables") is None:
        raise UserError(
            "a shaped link, delay, jitter and loss need iptables (NFQUEUE): install it with 'make setup'"
        )
    netns.nfqueue(namespace, True, queue, dest)
    daemon = kernels.kernel_path("ct-nfq-delay", "serial")
    argv = [
        str(daemon),
        str(queue),
        str(params["delay_us"]),
        "--rate-bps",
        str(params["rate_bps"]),
        "--jitter-us",
        str(params["jitter_us"]),
        "--loss",
        repr(params["loss"]),
        "--seed",
        str(params["seed"]),
        "--params",
        str(params_file),
        "--stats",
        str(stats_file),
    ]
    state["delay_pids"][key] = _start_beside(namespace, argv)
    _save_state(state)
    return {what: state["delay_pids"][key]}


def _apply_flap(state: dict, index: int) -> dict[str, int]:
    """Stop the host's flapping process if any, and start one if its faults say so;
    returns what it started, for :func:`_check_started`."""
    host = state["hosts"][index]
    pid = state["flap_pids"].pop(host["name"], None)
    if pid is not None:
        _stop(pid)  # it leaves the port up
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
        state["flap_pids"][host["name"]] = _start_beside(state["switch_ns"], argv)
    _save_state(state)
    return (
        {}
        if flap is None
        else {f"link flapping of {host['name']}": state["flap_pids"][host["name"]]}
    )


def _start_beside(ns: str, argv: list[str]) -> int:
    """A process in namespace ns that outlives this command; down() kills it."""
    proc = subprocess.Popen(
        ["ip", "netns", "exec", ns, *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    return proc.pid


def _check_started(started: dict[str, int]) -> None:
    """Give processes just started 0.2 s (once, for all), then fail naming one that died."""
    if not started:
        return
    time.sleep(0.2)
    for what, pid in started.items():
        if not _alive(pid):
            raise UserError(f"{what} exited at start (NFQUEUE unavailable?)")


def _stop(pid: int) -> None:
    """SIGTERM and wait (up to 2 s, then SIGKILL): the process undoes its effect first."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 2
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)
        return finished == 0
    except ChildProcessError:  # not our child (another command started it)
        return Path(f"/proc/{pid}").exists()


def _remove(name: str, state: dict | None) -> None:
    """Delete every namespace of cluster ``name``: those in its state and any stray one
    carrying its prefix (a crash between creating a namespace and saving state)."""
    pre = prefix(name)
    spaces = set(_all_namespaces(state)) if state else set()
    spaces.update(ns for ns in netns.listed() if ns.startswith(pre))
    state = state or {}
    for pid in [*state.get("delay_pids", {}).values(), *state.get("flap_pids", {}).values()]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    for ns in sorted(spaces):
        netns.delete(ns)
    directory = state_dir(name)
    if directory.exists():
        shutil.rmtree(directory)


def down(name: str) -> bool:
    """Tear a cluster down; True if there was anything to remove. Idempotent."""
    require_root()
    validate_name(name)
    state = load_state(name)
    stray = [ns for ns in netns.listed() if ns.startswith(prefix(name))]
    if state is None and not stray:
        return False
    _remove(name, state)
    return True


def status() -> list[dict]:
    """Every known virtual cluster with a health flag."""
    result = []
    for name in names():
        state = load_state(name)
        if state is None:
            continue
        state["healthy"] = _is_healthy(state)
        daemons = {
            key: (_daemon_files(state, key)[1], pid)
            for key, pid in state.get("delay_pids", {}).items()
        }
        stats = _fresh_stats(daemons) if state["healthy"] else {}
        late = {
            key: _summary(daemon.pop("late_hist", []), daemon.pop("late_max_ns", None))
            for key, daemon in stats.items()
        }
        for host in state["hosts"]:
            if host["name"] in stats:
                host["daemon"] = stats[host["name"]] | {"late": without_hist(late)[host["name"]]}
        # every daemon's lateness: the hosts' own and the WAN, receive and link pacers
        state["wire_late"] = without_hist(late)
        result.append(state)
    return result


# --- the pacer's own check (kernels/vcluster/nfq_delay.c) -------------------------------
# Each daemon counts how late every packet it let through left against the time it was
# due, in a histogram of nanoseconds with 8 buckets per power of two; these read it.
# The form of one daemon's figures (wire_lateness, lateness_delta, record meta "wire_late"):
LATENESS_FIELDS = ("packets", "p50_us", "p99_us", "max_us")
_STATS_WAIT_S = 1.0  # a daemon rewrites its stats within one loop (<= 0.2 s idle) of SIGUSR1


def _bucket_upper_ns(index: int) -> int:
    """The top of histogram bucket ``index`` (see the daemon's header comment)."""
    if index < 8:
        return index + 1
    magnitude, step = divmod(index, 8)
    return (9 + step) << (magnitude - 3)


def _summary(hist: list[int], max_ns: int | None = None) -> dict:
    """packets, p50/p99 (the top of the bucket holding them: at most 1/8 over) and max, in
    us, of one lateness histogram; ``max_ns`` (exact) bounds the histogram's top bucket."""
    total = sum(hist)
    result: dict = {"packets": total, "p50_us": None, "p99_us": None, "max_us": None, "hist": hist}
    if not total:
        return result
    top = max(i for i, n in enumerate(hist) if n)
    limit = _bucket_upper_ns(top) if max_ns is None else min(max_ns, _bucket_upper_ns(top))
    for key, fraction in (("p50_us", 0.5), ("p99_us", 0.99)):
        seen = 0
        for i, n in enumerate(hist):
            seen += n
            if seen >= fraction * total:
                result[key] = round(min(_bucket_upper_ns(i), limit) / 1000, 1)
                break
    result["max_us"] = round(limit / 1000, 1)
    return result


def _fresh_stats(daemons: dict[str, tuple[Path, int]]) -> dict[str, dict]:
    """Each daemon's stats ({key: (stats file, pid)}) after asking them all (SIGUSR1) to
    rewrite them now; a daemon that does not answer within _STATS_WAIT_S gives its older
    file, one with no file is left out."""
    waiting = {}
    for key, (path, pid) in daemons.items():
        before = path.stat().st_ino if path.exists() else None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGUSR1)
            waiting[key] = before
    deadline = time.monotonic() + _STATS_WAIT_S
    while waiting and time.monotonic() < deadline:
        for key, before in list(waiting.items()):
            with contextlib.suppress(FileNotFoundError):
                if daemons[key][0].stat().st_ino != before:  # a rename gives a new inode
                    del waiting[key]
        time.sleep(0.005)
    result = {}
    for key, (path, _) in daemons.items():
        with contextlib.suppress(FileNotFoundError, json.JSONDecodeError):
            result[key] = json.loads(path.read_text())
    return result


def wire_lateness(state: dict) -> dict[str, dict]:
    """How late each running ct-nfq-delay of the cluster has released packets so far:
    ``{daemon: {"packets", "p50_us", "p99_us", "max_us", "hist"}}``, the daemon named by
    its host ("host3"; its WAN pacer "host3>wan", its receive pacer "host3<rx", a link
    fault's daemon "host1>host2"). Hosts without a daemon (an
    unshaped link without faults, or the tbf wire without faults) are left out. Pass two
    of these to :func:`lateness_delta` for an interval."""
    daemons = {
        key: (_daemon_files(state, key)[1], pid) for key, pid in state.get("delay_pids", {}).items()
    }
    return {
        key: _summary(stats["late_hist"], stats.get("late_max_ns"))
        for key, stats in _fresh_stats(daemons).items()
        if "late_hist" in stats
    }


def lateness_delta(before: dict[str, dict], after: dict[str, dict]) -> dict[str, dict]:
    """The lateness of the packets released between two :func:`wire_lateness` readings,
    per daemon of ``after`` (one started or restarted between them counts from its start)."""
    result = {}
    for key, late in after.items():
        old = before.get(key, {}).get("hist", [])
        hist = [n - (old[i] if i < len(old) else 0) for i, n in enumerate(late["hist"])]
        if len(old) > len(hist) or any(n < 0 for n in hist):  # a new daemon since ``before``
            hist = late["hist"]
        exact_max = late["max_us"]  # the daemon's whole life: bounds the interval's top bucket
        result[key] = _summary(hist, None if exact_max is None else round(exact_max * 1000))
    return result


def without_hist(lateness: dict[str, dict]) -> dict[str, dict]:
    """The figures only (LATENESS_FIELDS), as records and ``vcluster status`` show them."""
    return {key: {f: late[f] for f in LATENESS_FIELDS} for key, late in lateness.items()}


def cluster_from_state(state: dict) -> Cluster:
    hosts = tuple(
        Host(
            name=h["name"],
            address=h["address"],
            cores=h["cores"],
            site=h["site"],
            link_bps=h["link_bps"],
            namespace=h["namespace"],
        )
        for h in state["hosts"]
    )
    # every site has hosts (contiguous blocks), so the hosts name all of them, in order
    site_names = dict.fromkeys(h.site for h in hosts)
    return Cluster(
        name=state["name"],
        hosts=hosts,
        sites=tuple(Site(name, "vcluster", state["wan_bps"]) for name in site_names),
        source=f"vcluster:{state['name']}",
        delay_us=state["delay_us"],
        extra={
            "agent": state["agent"],
            "state_dir": str(state_dir(state["name"])),
            "wire": state.get("wire", DEFAULT_WIRE),
            # per host and per link ("hostA-hostB"), as `vcluster set` last left them
            "faults": {h["name"]: h["faults"] for h in state["hosts"] if h.get("faults")}
            | state.get("link_faults", {}),
        },
    )


class Source:
    """``--cluster NAME``: a virtual cluster that ``vcluster up`` left on disk (see
    :mod:`clustertune.sources`, which registers it; this module must not import that)."""

    name = "vcluster"

    def claims(self, spec: str | None) -> bool:
        return spec in names()  # only what `vcluster up` left: "../x" names nothing

    def resolve(self, spec: str) -> Cluster:
        return cluster_from_state(load_state(spec))

    def not_found(self) -> str:
        known = ", ".join(names()) or "none is up"
        hint = "" if os.geteuid() == 0 else "; they need root, without it use no --cluster"
        return f"no virtual cluster of that name (virtual clusters: {known}{hint})"


def describe(state: dict) -> str:
    """One human-readable block per cluster for ``vcluster status``."""
    lines = [
        f"{state['name']}: {len(state['hosts'])} hosts, {state['sites']} site(s), "
        f"link {format_rate(state['link_bps'])}, wire {state.get('wire', DEFAULT_WIRE)}"
        + (f", wan {format_rate(state['wan_bps'])}" if state["sites"] > 1 else "")
        + (f", delay {state['delay_us']} us/host" if state["delay_us"] else "")
        + ("" if state.get("healthy", True) else "  [BROKEN: run vcluster down]")
    ]
    for h in state["hosts"]:
        faults = format_faults(h.get("faults", {}))
        daemon = h.get("daemon")
        lines.append(
            f"  {h['name']:8} {h['address']:15} {h['site']:6} {format_rate(h['link_bps']):>10}"
            f"  netns {h['namespace']}"
            + (f"  faults {faults}" if faults else "")
            + (
                f" (daemon: {daemon['packets']} packets, {daemon['dropped']} dropped"
                f"{_late_text(daemon['late'])})"
                if daemon
                else ""
            )
        )
    for key, faults in state.get("link_faults", {}).items():
        lines.append(f"  link {key}  faults {format_faults(faults)}")
    host_names = {h["name"] for h in state["hosts"]}
    for key, late in state.get("wire_late", {}).items():
        if key not in host_names and late["packets"]:
            lines.append(f"  pacer {key}: {late['packets']} packets{_late_text(late)}")
    return "\n".join(lines)


def _late_text(late: dict) -> str:
    if not late["packets"]:
        return ""
    return (
        f", released late p50 {late['p50_us']:g} / p99 {late['p99_us']:g} / "
        f"max {late['max_us']:g} us"
    )


def exec_argv(state_or_cluster: Cluster, host: str, argv: list[str]) -> list[str]:
    """argv that runs ``argv`` on one virtual host through the agent."""
    agent = state_or_cluster.extra["agent"]
    return [agent, host, shlex.join(argv)]
