"""Dips and jags of a link's mid-size curve (seeds/002 fig. 8): a lossy link."""

from collections.abc import Callable, Mapping, Sequence

from ..analysis import Curve, dips, jagged
from .blame import Pair, hosts_or_links, links_of


def shape_findings(curve: Curve) -> dict[str, list[dict[str, float]]]:
    """The dips and the jagged sizes of one link's sweep (only those found)."""
    found = {"dips": dips(curve), "jagged": jagged(curve)}
    return {k: v for k, v in found.items() if v}


def _shape_evidence(pair: Pair, found: Mapping[str, list[dict[str, float]]]) -> str:
    points = sorted(
        {(p["size"], p["throughput_mbps"], p["depth_ratio"]) for v in found.values() for p in v}
    )
    where = ", ".join(f"{s} B {t:.0f} Mbit/s ({r:.2f})" for s, t, r in points)
    return f"{'-'.join(pair)} {' and '.join(found)} at {where}"


def diagnose_shapes(
    hosts: Sequence[str],
    curves: Mapping[Pair, Curve],
    remeasure: Callable[[list[Pair]], Mapping[Pair, Curve]],
) -> list[dict[str, object]]:
    """A dip or a jagged curve on a link (the sweep between latency and bandwidth sizes)
    is a finding of its own: the throughput of some mid sizes collapses while the sizes
    around it do not, the lossy-link picture of seeds/002 fig. 8. A link is bad only when
    its re-measured sweep (``remeasure``) shows it again; then, as for loss, a host with at
    least two bad links, more than half of its own, is named, else each link. Each flag's
    evidence lists the sizes: throughput and its ratio to the level around it."""
    first = {p: f for p, c in curves.items() if (f := shape_findings(c))}
    if not first:
        return []
    again = remeasure(sorted(first))
    bad = {p: f for p, c in again.items() if p in first and (f := shape_findings(c))}
    blamed, pairs = hosts_or_links(links_of(hosts, curves), bad)
    flags: list[dict[str, object]] = []
    for host, own in blamed.items():
        flags.append(
            {
                "host": host,
                "figure": "dips",
                "value": None,
                "median": None,
                "reason": f"{host}: throughput dips or jags on {len(own)} of its links, re-tested ("
                + "; ".join(_shape_evidence(p, bad[p]) for p in own)
                + f") — suspect {host}'s NIC or cable (packet loss)",
            }
        )
    for pair in pairs:
        flags.append(
            {
                "pair": list(pair),
                "figure": "dips",
                "value": None,
                "median": None,
                "reason": f"{_shape_evidence(pair, bad[pair])}, re-tested — suspect the cable or "
                "switch ports between them (packet loss)",
            }
        )
    return flags
