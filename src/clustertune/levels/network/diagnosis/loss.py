"""Packet loss, from TCP's own retransmission counters, and which of loss and a low
bandwidth is the cause where both touch a host or link."""

from collections.abc import Callable, Iterable, Mapping, Sequence

from .blame import Pair, culprits_of, hosts_or_links, links_of

LOSSY_MIN_RETRANS = 2  # per pair and run: a healthy link (tbf-shaped or real) shows 0


def _lossy(measured: Iterable[Mapping[str, object]]) -> dict[Pair, Mapping[str, object]]:
    """Pairs (in sorted order) whose runs retransmitted at least LOSSY_MIN_RETRANS segments."""
    return {
        tuple(sorted(m["pair"])): m  # type: ignore[misc,arg-type]
        for m in measured
        if isinstance(m.get("retransmissions"), int) and m["retransmissions"] >= LOSSY_MIN_RETRANS  # type: ignore[operator]
    }


def _evidence(pair: Pair, m: Mapping[str, object] | None) -> str:
    if m is None:
        return f"{'-'.join(pair)} no re-test (the run failed: the link went down)"
    segs = m.get("data_segments")
    share = f" of {segs} segments ({100 * m['retransmissions'] / segs:.2g} %)" if segs else ""  # type: ignore[operator]
    return f"{'-'.join(pair)} {m['retransmissions']}{share}"


def diagnose_loss(
    hosts: Sequence[str],
    measured: Iterable[Mapping[str, object]],
    remeasure: Callable[[list[Pair]], Iterable[Mapping[str, object]]],
    suspects: Iterable[str] = (),
) -> list[dict[str, object]]:
    """Packet loss from TCP's own retransmission counters, which a marginal cable raises
    long before the throughput of a few sizes shows it.

    The matrix's short runs only select: every link of a host touched by a pair that
    retransmitted is measured again, longer (``remeasure``), and the verdict rests on that
    re-test alone (a handful of retransmissions in a short run is as likely to miss a
    lossy link as a lone burst is to accuse a healthy one). The links of ``suspects`` (the
    hosts of a link seen flapping) are re-tested too: a link down 300 ms a second may
    slip between short runs, a 1-s run does not; and a link of theirs whose re-test could
    not run counts as lossy. A host is the culprit when at least two of its links, and
    more than half, retransmit on the re-test; else each such link is.
    """
    measured = list(measured)
    first = _lossy(measured)
    suspects = set(suspects)
    if not first and not suspects:
        return []
    links = links_of(hosts, (tuple(sorted(m["pair"])) for m in measured))  # type: ignore[arg-type]
    touched = {h for p in first for h in p} | suspects
    asked = sorted({p for h in touched for p in links[h]})
    again = list(remeasure(asked))
    lossy: dict[Pair, Mapping[str, object] | None] = dict(_lossy(again))
    # a link of a host seen flapping whose long re-test could not even run went down
    # meanwhile: as bad as a lossy one (elsewhere a failed run, e.g. a server that did not
    # start on a busy machine, is no evidence of loss)
    done = {tuple(sorted(m["pair"])) for m in again}  # type: ignore[arg-type]
    lossy |= {p: None for p in asked if p not in done and suspects & set(p)}
    blamed, pairs = hosts_or_links(links, lossy)
    flags: list[dict[str, object]] = []
    for host, bad in blamed.items():
        counts = ", ".join(_evidence(p, lossy[p]) for p in bad)
        resent = [m["retransmissions"] for p in bad if (m := lossy[p]) is not None]
        flags.append(
            {
                "host": host,
                "figure": "retransmissions",
                "value": sum(resent) if resent else None,  # type: ignore[arg-type]
                "median": 0,
                "reason": f"{host}: TCP retransmissions on {len(bad)} of its {len(links[host])} "
                f"links, re-tested ({counts}) — packet loss: suspect {host}'s NIC or cable",
            }
        )
    for pair in pairs:
        m = lossy[pair]
        flags.append(
            {
                "pair": list(pair),
                "figure": "retransmissions",
                "value": None if m is None else m["retransmissions"],
                "median": 0,
                "reason": f"{_evidence(pair, m)} — suspect a link going down and up between them"
                if m is None
                else f"{_evidence(pair, m)} TCP retransmissions, re-tested — "
                "packet loss: suspect the cable or switch ports between them",
            }
        )
    return flags


# Below this share of the others' (or the nominal) bandwidth a link runs at a lower rate
# (mis-negotiated, shaped: 100 Mbit on a 1 Gbit fabric is 10 %) and drops at its queue;
# above it, with retransmissions, the loss is what slows it (0.1 % loss: ~75 %).
LOWER_RATE_SHARE = 0.5


def with_loss(flagged: list[dict], loss: list[dict]) -> tuple[list[dict], list[str]]:
    """The other figures' flags and the loss flags as one verdict, and notes.

    Which is cause and which symptom where both touch a host or pair: a link at a lower
    rate (bandwidth under LOWER_RATE_SHARE of the median) drops at its queue, so its
    retransmissions are its symptom (on such a host not every link need retransmit: a pair
    verdict is its symptom too); a link slowed less than that, retransmitting, is slowed by
    the loss. Latency flags touching a host blamed for loss are the loss's symptom too: a
    retransmission costs a timeout."""

    def lower_rate(f: Mapping[str, object]) -> bool:
        return f["value"] is not None and f["value"] < LOWER_RATE_SHARE * f["median"]  # type: ignore[operator]

    bandwidth = [f for f in flagged if f["figure"] == "bandwidth_mbps"]
    slow = set().union(*(culprits_of(f) for f in bandwidth if lower_rate(f)))
    notes = []
    kept_loss = []
    for f in loss:
        if culprits_of(f) & slow:
            notes.append(f"goes with the low bandwidth there: {f['reason']}")
        else:
            kept_loss.append(f)
    lossy_hosts = {f["host"] for f in kept_loss if "host" in f}
    lossy_pairs = [culprits_of(f) for f in kept_loss if "pair" in f]
    kept = []
    for f in flagged:
        if f["figure"] == "latency_us" and culprits_of(f) & lossy_hosts:
            touched = culprits_of(f) & lossy_hosts
            notes.append(
                f"explained by the packet loss at {', '.join(sorted(touched))}: {f['reason']}"
            )
        elif (
            f["figure"] == "bandwidth_mbps"
            and not lower_rate(f)
            and (culprits_of(f) & lossy_hosts or culprits_of(f) in lossy_pairs)
        ):
            notes.append(f"slowed by the packet loss there: {f['reason']}")
        else:
            kept.append(f)
    return kept_loss + kept, notes
