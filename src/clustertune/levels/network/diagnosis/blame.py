"""Who a set of bad links blames, and how the flags of different diagnoses combine.

A host is blamed when at least two of its links, and more than half, are bad; every other
bad link is blamed on itself (the cable or switch ports between its two hosts).
"""

from collections.abc import Collection, Iterable, Mapping, Sequence
from itertools import combinations

Pair = tuple[str, str]


def links_of(hosts: Sequence[str], pairs: Iterable[Pair]) -> dict[str, list[Pair]]:
    """Each host's measured links (pairs in sorted order)."""
    links: dict[str, list[Pair]] = {h: [] for h in hosts}
    for a, b in pairs:
        links[a].append((a, b))
        links[b].append((a, b))
    return links


def hosts_or_links(
    links: Mapping[str, list[Pair]], bad: Collection[Pair]
) -> tuple[dict[str, list[Pair]], list[Pair]]:
    """Who a set of bad links blames: each host with at least two bad links, more than half
    of its own (with the links), and every bad link touching none of those hosts."""
    hosts = {}
    for host, mine in links.items():
        own = [p for p in mine if p in bad]
        if len(own) >= 2 and 2 * len(own) > len(mine):
            hosts[host] = own
    return hosts, [p for p in bad if not set(hosts) & set(p)]


def pairs_to_hosts(hosts: Sequence[str], flagged: list[dict]) -> tuple[list[dict], list[str]]:
    """Pair flags of any figures that, together, put a host at fault: at least two of its
    links and more than half are flagged (a flapping host2 showed as host2-host3 failing a
    check and host1-host2 retransmitting). Returns the flags with such pairs replaced by
    a flag on their host, and a note for each pair replaced."""
    bad = {tuple(sorted(f["pair"])): f for f in flagged if "pair" in f}
    pairs = list(combinations(sorted(hosts), 2))
    blamed, _ = hosts_or_links(links_of(hosts, pairs), bad)
    out = [f for f in flagged if "pair" not in f or not blamed.keys() & set(f["pair"])]
    notes = []
    for host, own in blamed.items():
        figures = [bad[p]["figure"] for p in own]
        out.append(
            {
                "host": host,
                "figure": "flapping" if "flapping" in figures else figures[0],
                "value": None,
                "median": None,
                "reason": f"{host}: {len(own)} of its links flagged ("
                + "; ".join(bad[p]["reason"] for p in own)
                + f") — suspect {host}'s NIC, cable or switch port",
            }
        )
        notes += [f"part of {host}'s finding: {bad[p]['reason']}" for p in own]
    return out, notes


def symptoms(blaming: list[dict], found: list[dict]) -> tuple[list[dict], list[str]]:
    """The flags of ``found`` that blame no host or pair a flag of ``blaming`` already
    blames, and a note for each of the others: that finding's symptom (a lossy or slow
    link's curve jags; a flapping host's links retransmit; a host that could not connect
    only with a flapping host is left out for that host's fault)."""
    blamed = [culprits_of(f) for f in blaming if "fabric" not in f]
    kept, notes = [], []
    for f in found:
        peers = set(f.get("peers", ()))
        # that host, or that very pair; or every peer it failed with is the one blamed
        if any(b <= culprits_of(f) or (peers and peers <= b) for b in blamed):
            notes.append(f"goes with the finding there: {f['reason']}")
        else:
            kept.append(f)
    return kept, notes


def verdict(
    hosts: Sequence[str], flagged: list[dict], downs: list[dict]
) -> tuple[list[dict], list[str]]:
    """Every diagnosis's flags as one verdict, and a note for each flag folded into another.

    A flag on a host explains what the links of that host showed (a flapping host's pair
    that failed a check, a slow host's jagged curve): pairs that together put a host at
    fault become its flag (:func:`pairs_to_hosts`), and a pair touching a blamed host is
    that host's symptom. A link seen going down (``downs``, from its NIC's counter) is the
    finding, and what its host's traffic met is its symptom. Flags on hosts come first."""
    flagged, notes = pairs_to_hosts(hosts, flagged)
    flagged, on_downs = symptoms(downs, flagged)
    flagged = downs + flagged
    on_hosts = [f for f in flagged if "host" in f]
    on_links, on_blamed = symptoms(on_hosts, [f for f in flagged if "host" not in f])
    return on_hosts + on_links, notes + on_downs + on_blamed


def culprits_of(flag: Mapping[str, object]) -> set[str]:
    """The hosts a flag blames: its host, or the two of its pair."""
    return {str(flag["host"])} if "host" in flag else set(flag.get("pair", ()))  # type: ignore[arg-type]
