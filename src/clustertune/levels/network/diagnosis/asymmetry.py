"""One direction of a link much slower than the other, from the TCP matrix's one-way streams."""

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from .blame import Pair, links_of

# One direction of a pair's one-way streams below this fraction of the other: asymmetric.
# Healthy 8-host 1 Gbit matrix at load 24: 0.62 at worst; a 100 Mbit transmit side: 0.1.
ASYMMETRY_MAX_RATIO = 0.4


def one_way_grid(hosts: Sequence[str], measured: Iterable[Mapping]) -> list[list] | None:
    """n x n one-way stream throughputs, Mbit/s, row host sending to column host (None
    where unmeasured; None when no pair has them: an MPI matrix)."""
    index = {h: i for i, h in enumerate(hosts)}
    grid: list[list[float | None]] = [[None] * len(hosts) for _ in hosts]
    ways = [w for m in measured for w in (m.get("one_way_mbps") or {}).items()]
    for way, mbps in ways:
        src, dst = way.split(">")
        grid[index[src]][index[dst]] = mbps
    return grid if ways else None


def _slow_way(m: Mapping) -> tuple[str, str, float, float] | None:
    """(sender, receiver, its rate, the other way's) of a pair one of whose directions
    streams below ASYMMETRY_MAX_RATIO x the other; None for a symmetric pair."""
    rates = m.get("one_way_mbps") or {}
    if len(rates) != 2:
        return None
    (slow_way, slow), (_, fast) = sorted(rates.items(), key=lambda kv: kv[1])
    if slow >= ASYMMETRY_MAX_RATIO * fast:
        return None
    src, dst = slow_way.split(">")
    return src, dst, slow, fast


def _ways(w: tuple[str, str, float, float]) -> str:
    src, dst, slow, fast = w
    return f"{src}->{dst} {slow:.1f}, {dst}->{src} {fast:.1f} Mbit/s"


def diagnose_asymmetry(
    hosts: Sequence[str],
    measured: Iterable[Mapping[str, object]],
    remeasure: Callable[[list[Pair]], Iterable[Mapping[str, object]]],
) -> list[dict[str, object]]:
    """One direction of a link much slower than the other (the one-way streams of the TCP
    matrix): a duplex mismatch, a bad transmit or receive side of a port. Suspect pairs
    are streamed again (``remeasure``) and only a direction slow both times counts. A host
    slow in the same role (sending, or receiving) on at least two of its links and more
    than half is blamed for that side; any other such pair is flagged as the pair."""
    measured = list(measured)
    first = {tuple(sorted(m["pair"])): w for m in measured if (w := _slow_way(m))}
    if not first:
        return []
    again = {tuple(sorted(m["pair"])): _slow_way(m) for m in remeasure(sorted(first))}
    slow = {p: w for p, w in again.items() if w and p in first and first[p][:2] == w[:2]}
    links = links_of(hosts, (tuple(sorted(m["pair"])) for m in measured if m.get("one_way_mbps")))
    flags: list[dict[str, object]] = []
    for host, mine in links.items():
        for end, side in ((0, "transmit"), (1, "receive")):
            own = [p for p in mine if p in slow and slow[p][end] == host]
            if len(own) >= 2 and 2 * len(own) > len(mine):
                flags.append(
                    {
                        "host": host,
                        "figure": "asymmetric",
                        "value": float(np.median([slow[p][2] for p in own])),
                        "median": float(np.median([slow[p][3] for p in own])),
                        "reason": f"{host}: asymmetric: "
                        + "; ".join(_ways(slow[p]) for p in own)
                        + f" (re-tested) — {host}'s {side} side is slow on {len(own)} of its "
                        f"{len(mine)} links: suspect its NIC or switch port ({side} side, a duplex "
                        "mismatch)",
                    }
                )
    blamed = {f["host"] for f in flags}
    for pair, w in slow.items():
        if not blamed & set(w[:2]):
            flags.append(
                {
                    "pair": list(pair),
                    "figure": "asymmetric",
                    "value": w[2],
                    "median": w[3],
                    "reason": f"asymmetric: {_ways(w)} (re-tested) — suspect {w[0]}'s transmit or "
                    f"{w[1]}'s receive side (NIC, cable or switch port, a duplex mismatch)",
                }
            )
    return flags
