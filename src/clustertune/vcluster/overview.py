"""``vcluster status``: every known virtual cluster, its health and its daemons' figures,
and the text block that shows one."""

from __future__ import annotations

from ..units import format_rate
from .faults import format_faults
from .lateness import fresh_stats, summary, without_hist
from .planning import DEFAULT_WIRE
from .state import daemon_files, is_healthy, load_state, names


def status() -> list[dict]:
    """Every known virtual cluster with a health flag."""
    result = []
    for name in names():
        state = load_state(name)
        if state is None:
            continue
        state["healthy"] = is_healthy(state)
        daemons = {
            key: (daemon_files(state, key)[1], pid)
            for key, pid in state.get("delay_pids", {}).items()
        }
        stats = fresh_stats(daemons) if state["healthy"] else {}
        late = {
            key: summary(daemon.pop("late_hist", []), daemon.pop("late_max_ns", None))
            for key, daemon in stats.items()
        }
        for host in state["hosts"]:
            if host["name"] in stats:
                host["daemon"] = stats[host["name"]] | {"late": without_hist(late)[host["name"]]}
        # every daemon's lateness: the hosts' own and the WAN, receive and link pacers
        state["wire_late"] = without_hist(late)
        result.append(state)
    return result


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
