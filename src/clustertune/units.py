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
