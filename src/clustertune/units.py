"""Parsing of link rates and byte counts as users write them (``100mbit``, ``64K``)."""

import re

from .errors import UserError

# tc's decimal rate units: 1 kbit = 1000 bit/s.
_RATE_UNITS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
_RATE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?bit)(?:/s|ps)?\s*$", re.IGNORECASE)

# Byte sizes use binary multiples, as message sizes and buffers do.
_SIZE_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([kmg]?)(?:i?b)?\s*$", re.IGNORECASE)

UNLIMITED = "unlimited"


def parse_rate(text: str) -> int | None:
    """Bits per second of a link rate such as ``100mbit``, ``1gbit``, ``2.5Gbit/s``.

    ``unlimited`` gives None (no shaping).
    """
    if text.strip().lower() == UNLIMITED:
        return None
    match = _RATE_RE.match(text)
    if not match:
        raise UserError(
            f"bad link rate {text!r}: expected a number with a unit "
            "(bit, kbit, mbit, gbit, tbit), e.g. 100mbit, 1gbit, or 'unlimited'"
        )
    bits = float(match.group(1)) * _RATE_UNITS[match.group(2).lower()]
    if bits < 8000:
        raise UserError(f"bad link rate {text!r}: below 8kbit, too slow to shape sensibly")
    return int(bits)


def format_rate(bits_per_second: int | None) -> str:
    """Inverse of :func:`parse_rate`, choosing the largest exact unit."""
    if bits_per_second is None:
        return UNLIMITED
    for unit in ("tbit", "gbit", "mbit", "kbit"):
        if bits_per_second % _RATE_UNITS[unit] == 0:
            return f"{bits_per_second // _RATE_UNITS[unit]}{unit}"
    return f"{bits_per_second}bit"


def parse_size(text: str) -> int:
    """Bytes of a size such as ``4096``, ``64K``, ``8M``, ``1GiB`` (binary multiples)."""
    match = _SIZE_RE.match(str(text))
    if not match:
        raise UserError(f"bad size {text!r}: expected bytes with an optional K, M or G suffix")
    return int(match.group(1)) * _SIZE_UNITS[match.group(2).lower()]


def parse_size_list(text: str) -> list[int]:
    """Comma-separated sizes: ``4K,8K,256K``."""
    items = [item for item in text.split(",") if item.strip()]
    if not items:
        raise UserError(f"bad size list {text!r}: expected e.g. 4K,8K,64K")
    return [parse_size(item) for item in items]


# What an Ethernet link of MTU 1500 carries of TCP/IPv4 payload: each frame is 1538 B on
# the wire (the 1500 B packet, header 14, FCS 4, preamble 8, inter-frame gap 12) and
# carries the packet less its IPv4 (20) and TCP (20) headers and, with timestamps (Linux's
# default), 12 B of TCP options. The paced wire charges exactly this (ct-nfq-delay's
# wire_bytes), so no figure read over it can be above it.
ETHERNET_FRAMING_BYTES = 38
TCP_IPV4_HEADER_BYTES = 40
TCP_TIMESTAMP_OPTION_BYTES = 12


def payload_rate_bps(link_bps: float, *, timestamps: bool = True, mtu: int = 1500) -> float:
    """The most TCP/IPv4 payload a link of nominal ``link_bps`` carries per second: its
    ceiling (1448/1538 of nominal at MTU 1500 with timestamps, 1460/1538 without)."""
    headers = TCP_IPV4_HEADER_BYTES + (TCP_TIMESTAMP_OPTION_BYTES if timestamps else 0)
    return link_bps * (mtu - headers) / (mtu + ETHERNET_FRAMING_BYTES)


# How far above the payload ceiling (with timestamps) a throughput may read before it is
# judged above it: a stack without TCP timestamps carries 1460 rather than 1448 B per
# frame (+0.8 %), and a timed best-of-region figure has about 0.2 % of clock and rounding
# in it. Anything beyond is more than the link's frames can carry (a tbf bucket's burst or
# a measurement fault). The one rule for every level's table and first-screen row.
ABOVE_CEILING_TOLERANCE = 0.01


def above_payload_ceiling(mbps: float, link_bps: float) -> bool:
    """Whether ``mbps`` (Mbit/s of payload) is more than a link of nominal ``link_bps`` can
    carry (payload_rate_bps with ABOVE_CEILING_TOLERANCE)."""
    return mbps * 1e6 > payload_rate_bps(link_bps) * (1 + ABOVE_CEILING_TOLERANCE)
