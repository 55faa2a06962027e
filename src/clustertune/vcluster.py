"""The embedded virtual cluster: N hosts as network namespaces on one machine.

Topology (names are per-namespace, so every cluster reuses them)::

    ns <prefix>host<i>   eth0 10.213.<site>.<10+i>/16 --veth-- vh<i> in ns <prefix>sw
    ns <prefix>sw        bridge br<site> per site; with several sites, each site bridge
                         joins bridge "wan" through a veth pair s<k>w <-> w<k>s

Every link is shaped with tbf on *both* veth ends (egress shaping limits one direction
only). Per-packet delay (netem does not exist on these kernels) comes from one
ct-nfq-delay daemon per host behind an iptables NFQUEUE rule.

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
import time
from pathlib import Path

from . import kernels, netns
from .cluster import Cluster, Host, Site
from .errors import UserError
from .units import format_rate

RUN_DIR = Path(os.environ.get("CLUSTERTUNE_RUN_DIR", "/run/clustertune")) / "vcluster"
_NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,11}$")
SUBNET_PREFIX = 16
NFQUEUE_NUM = "0"


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


def plan(
    name: str,
    hosts: int,
    link_bps: int | None,
    host_links: dict[str, int | None] | None = None,
    sites: int = 1,
    wan_bps: int | None = None,
    delay_us: int = 0,
    cores: int = 1,
) -> dict:
    """The state of a cluster about to be built: pure, so it can be checked without root."""
    validate_name(name)
    if not 1 <= hosts <= 200:
        raise UserError(f"--hosts {hosts}: must be between 1 and 200")
    if not 1 <= sites <= min(hosts, 50):
        raise UserError(f"--sites {sites}: must be between 1 and the number of hosts ({hosts})")
    if delay_us < 0 or delay_us > 1_000_000:
        raise UserError(f"--delay-us {delay_us}: must be between 0 and 1000000")
    host_links = dict(host_links or {})
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
            }
        )
    if host_links:
        raise UserError(
            f"--host-link names unknown host(s) {', '.join(sorted(host_links))} "
            f"(hosts are host0..host{hosts - 1})"
        )
    return {
        "name": name,
        "status": "building",
        "switch_ns": f"{pre}sw",
        "hosts": host_list,
        "sites": sites,
        "link_bps": link_bps,
        "wan_bps": wan_bps if sites > 1 else None,
        "delay_us": delay_us,
        "delay_pids": {},
        "created": time.time(),
    }


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
        netns.shape(ns, "eth0", host["link_bps"])
        netns.shape(sw, port, host["link_bps"])
        netns.write_hosts_file(ns, entries)
    _write_agent(state)
    if state["delay_us"]:
        _start_delay(state)


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


def _start_delay(state: dict) -> None:
    if shutil.which("iptables") is None:
        raise UserError("--delay-us needs iptables (NFQUEUE): install it with 'make setup'")
    daemon = kernels.kernel_path("ct-nfq-delay", "serial")
    for host in state["hosts"]:
        ns = host["namespace"]
        netns.run("ip", "netns", "exec", ns, "iptables", "-t", "mangle", "-A", "POSTROUTING",
                  "-o", "eth0", "-j", "NFQUEUE", "--queue-num", NFQUEUE_NUM, "--queue-bypass")  # fmt: skip
        proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, str(daemon), NFQUEUE_NUM, str(state["delay_us"])],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # outlives this command; down() kills it
        )
        state["delay_pids"][host["name"]] = proc.pid
        _save_state(state)
    time.sleep(0.2)
    for host_name, pid in state["delay_pids"].items():
        if not _alive(pid):
            raise UserError(f"delay daemon on {host_name} exited at start (NFQUEUE unavailable?)")


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
    for pid in (state or {}).get("delay_pids", {}).values():
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
        result.append(state)
    return result


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
        extra={"agent": state["agent"], "state_dir": str(state_dir(state["name"]))},
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
        f"link {format_rate(state['link_bps'])}"
        + (f", wan {format_rate(state['wan_bps'])}" if state["sites"] > 1 else "")
        + (f", delay {state['delay_us']} us/host" if state["delay_us"] else "")
        + ("" if state.get("healthy", True) else "  [BROKEN: run vcluster down]")
    ]
    for h in state["hosts"]:
        lines.append(
            f"  {h['name']:8} {h['address']:15} {h['site']:6} {format_rate(h['link_bps']):>10}"
            f"  netns {h['namespace']}"
        )
    return "\n".join(lines)


def exec_argv(state_or_cluster: Cluster, host: str, argv: list[str]) -> list[str]:
    """argv that runs ``argv`` on one virtual host through the agent."""
    agent = state_or_cluster.extra["agent"]
    return [agent, host, shlex.join(argv)]
