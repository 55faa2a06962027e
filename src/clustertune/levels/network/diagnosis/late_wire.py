"""Flags that stand when the emulated wire (the virtual cluster's pacers) was late during
the re-tests, and those withheld."""

from collections.abc import Mapping
from dataclasses import dataclass

from .loss import LOSSY_MIN_RETRANS

# Flags that rest on no timing, which a late emulated wire cannot fake: a host that could
# not be reached, a link seen going down (its NIC's carrier counter, failed checks).
UNTIMED_FIGURES = ("reachable", "flapping")
# TCP resends a segment after its retransmission timeout, at least 200 ms on Linux, or on
# duplicate ACKs, which a pacer that keeps the order does not cause; the duplicates the
# receiver reports (DSACK) are not counted (counters.lost_and_resent). A wire late by less
# cannot make TCP resend.
TCP_MIN_RTO_US = 200_000.0


@dataclass(frozen=True)
class LateWire:
    """How late the emulated wire's worst pacer released packets over the re-tests, and
    how many packets its pacers released TCP_MIN_RTO_US or more late (summed over pacers:
    a packet late at two counts twice, which errs towards the wire)."""

    p99_us: float
    rto_late_packets: int
    load: float


def _resent_beyond_the_wire(flag: Mapping[str, object], late: LateWire) -> int | None:
    """The retransmissions of a flag the late wire cannot explain: each packet released
    TCP_MIN_RTO_US late can have made TCP resend once (None: the flag counts none)."""
    resent = flag.get("value")
    return None if resent is None else resent - late.rto_late_packets  # type: ignore[operator]


def _could_be_the_wire(flag: Mapping[str, object], late: LateWire) -> bool:
    """Whether a flag's evidence could be the late wire's doing: a latency whose excess
    over the reference is at most the wire's p99 lateness (a one-way time passes one
    pacer each way, so the wire adds at most about that much to it), retransmissions of
    which fewer than the loss rule's LOSSY_MIN_RETRANS are left once each packet released
    as late as TCP's timeout has explained one (one such packet no longer withholds
    hundreds; a flag that counts none, a re-test that could not run, is withheld on any
    such packet), and every other figure from timing
    (bandwidth, curve shapes, one-way streams), whose loss a late pacer's CPU starvation
    can cause."""
    figure = flag["figure"]
    if figure in UNTIMED_FIGURES:
        return False
    if figure == "retransmissions":
        beyond = _resent_beyond_the_wire(flag, late)
        return late.rto_late_packets > 0 if beyond is None else beyond < LOSSY_MIN_RETRANS
    value, median = flag.get("value"), flag.get("median")
    if figure == "latency_us" and value is not None and median is not None:
        return value - median <= late.p99_us  # type: ignore[operator]
    return True


def judged_on_late_wire(
    flagged: list[dict], late: LateWire | None
) -> tuple[list[dict], list[str], str | None]:
    """The flags that stand when the re-tests ran on an emulated wire that was late, the
    notes for those withheld, and the verdict said instead (None: nothing withheld).

    Every flag from figures was confirmed on a re-test; when the pacers released late
    during it, a flag the lateness could explain (:func:`_could_be_the_wire`) blames no
    host or link: "not judged: the emulated wire was late (p99 N µs, load L)".
    """
    if late is None:
        return flagged, [], None
    withheld = [f for f in flagged if _could_be_the_wire(f, late)]
    if not withheld:
        return flagged, [], None
    verdict = (
        f"not judged: the emulated wire was late (p99 {late.p99_us:.0f} µs, load {late.load:.1f})"
    )
    notes = [f"withheld, the wire was late: {f['reason']}" for f in withheld]
    return [f for f in flagged if f not in withheld], notes, verdict
