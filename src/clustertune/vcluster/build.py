"""Bringing a virtual cluster up and taking it down.

Topology (names are per-namespace, so every cluster reuses them)::

    ns <prefix>host<i>   eth0 10.213.<site>.<10+i>/16 --veth-- vh<i> in ns <prefix>sw
    ns <prefix>sw        bridge br<site> per site; with several sites, each site bridge
                         joins bridge "wan" through a veth pair s<k>w <-> w<k>s

The state (:mod:`.state`) is saved before anything is created and after each daemon
starts, so ``down`` removes every piece after a crash, and ``up`` removes stale pieces
of the same name before it builds. What the links do is :mod:`.wire`'s.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal

from .. import netns
from ..errors import UserError
from .state import (
    all_namespaces,
    is_healthy,
    load_state,
    prefix,
    require_root,
    save_state,
    state_dir,
    validate_name,
)
from .wire import (
    apply_delays,
    apply_flap,
    apply_link_faults,
    apply_packet_faults,
    apply_rx_pacer,
    check_started,
    shape_host,
)

SUBNET_PREFIX = 16
# The agent runs a host's commands on one CPU when the variable of that host is set.
CPU_ENV_PREFIX = "CLUSTERTUNE_CPU_"


def up(state: dict) -> dict:
    """Build the cluster described by :func:`plan`; removes stale pieces of the same name."""
    require_root()
    for tool in ("ip", "tc", "unshare"):
        if shutil.which(tool) is None:
            raise UserError(f"{tool} not found: install iproute2 and util-linux (make setup)")
    name = state["name"]
    old = load_state(name)
    if old is not None and is_healthy(old):
        raise UserError(
            f"virtual cluster {name!r} is already up; run 'clustertune vcluster down --name {name}' first"
        )
    _remove(name, old)
    save_state(state)
    try:
        _build(state)
    except BaseException:
        _remove(name, state)
        raise
    state["status"] = "up"
    save_state(state)
    return state


def _build(state: dict) -> None:
    sw = state["switch_ns"]
    netns.add(sw)
    for site in range(state["sites"]):
        netns.bridge(sw, f"br{site}")
    if state["sites"] > 1:
        netns.bridge(sw, "wan", filtered=False)  # no delay is held on WAN ports
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
        shape_host(state, i)
        netns.write_hosts_file(ns, entries)
    _write_agent(state)
    started: dict[str, int] = {}
    for i in range(len(state["hosts"])):
        started |= apply_packet_faults(state, i) | apply_flap(state, i)
    for i in range(len(state["hosts"])):
        started |= apply_rx_pacer(state, i)
    for key in state.get("link_faults", {}):
        started |= apply_link_faults(state, key)
    for i in range(len(state["hosts"])):
        started |= apply_delays(state, i)
    check_started(started)


def _write_agent(state: dict) -> None:
    """The ssh stand-in that MPI launchers call as ``agent HOST COMMAND...``.

    It enters the host's namespace and a private UTS namespace named after the host, so
    gethostname(), OpenMPI session directories and shared-memory segment names differ
    per virtual host. Like ssh, it joins its arguments and runs them with ``sh -c``.
    With ``CLUSTERTUNE_CPU_<host>`` in its environment it runs them on that CPU alone
    (``taskset``): an MPI launcher passes its environment to the agents it starts, so a
    job's rank on each host runs where asked (``net matrix``'s MPI re-test).
    """
    cases = "\n".join(
        f"  {h['name']}|{h['address']}) ns={h['namespace']}; name={h['name']}; "
        f"cpu=${{{CPU_ENV_PREFIX}{h['name']}:-}} ;;"
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
exec ${{cpu:+taskset -c $cpu}} ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$name" "$*"
"""
    path = state_dir(state["name"]) / "agent"
    path.write_text(script)
    path.chmod(0o755)
    state["agent"] = str(path)


def _remove(name: str, state: dict | None) -> None:
    """Delete every namespace of cluster ``name``: those in its state and any stray one
    carrying its prefix (a crash between creating a namespace and saving state)."""
    pre = prefix(name)
    spaces = set(all_namespaces(state)) if state else set()
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
