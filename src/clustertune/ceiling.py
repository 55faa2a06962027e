"""A throughput read against the payload its link can carry, and the link model a record's
cluster had: judged alike by the sections of every level that moves data over a link
(network, grid, I/O), so it lives below them."""

from __future__ import annotations

from .units import above_payload_ceiling, format_rate, payload_rate_bps


def slowest_link_bps(record: dict) -> int | None:
    """Nominal rate (bit/s) of the slowest link of the run's hosts; None: unshaped."""
    links = record["meta"]["cluster"].get("link_bps", {})
    rates = [links.get(h) for h in record["meta"]["hosts"] if links.get(h)]
    return min(rates) if rates else None


def wire(record: dict) -> str:
    """The link model the run's cluster had (records carry it since issue 19)."""
    cluster = record["meta"].get("cluster") or {}
    if "wire" not in cluster:
        return "wire not recorded"
    return f"{cluster['wire']} wire" if cluster["wire"] else "no emulated wire"


# Why a throughput above the link's payload rate was possible, by wire: only tbf's bucket
# lets a message through faster than its frames take on the wire.
ABOVE_CEILING_WHY = {
    "tbf wire": "tbf's bucket let it through faster than the wire",
    "paced wire": "impossible on a paced wire: a measurement fault",
}


def above_ceiling(record: dict, mbps: float | None, nominal_bps: int | None = None) -> str:
    """Why a throughput read over a link of the run is above the TCP payload that link can
    carry (units.payload_rate_bps), or "" when it is not (or the link is unshaped). The
    link: ``nominal_bps`` (another level's, e.g. the WAN between sites), else the run's
    slowest host link."""
    rate = nominal_bps or slowest_link_bps(record)
    if mbps is None or not rate:
        return ""
    if not above_payload_ceiling(mbps, rate):
        return ""
    ceiling = payload_rate_bps(rate) / 1e6
    model = wire(record)
    links = (record["meta"].get("cluster") or {}).get("link_bps", {})
    # pacers of the slower link beyond a host's own (its site's WAN, a slower receiver)
    paced_beyond = any(k.endswith((">wan", "<rx")) for k in record["meta"].get("wire_late", {}))
    if (
        model == "paced wire"
        and not paced_beyond
        and any((links.get(h) or 0) > rate for h in record["meta"]["hosts"])
    ):
        # records made before the WAN and receive pacers: each host was paced at its own
        # rate, a slower link beyond it (receive side, WAN) was still a tbf bucket
        why = "its hosts are paced at their faster links, this one is a tbf bucket"
    else:
        why = ABOVE_CEILING_WHY.get(model, "the wire is not recorded")
    return f"above the {ceiling:.0f} Mbit/s payload ceiling of {format_rate(rate)}: {why}"
