"""The fault grammar (docs/faults.md): ``FIELD=VALUE`` items of ``--host-link``,
``--link-fault``, ``vcluster set`` and studies parsed into a host's or a link's faults
(the keys the state file keeps), merged over earlier ones, and formatted back as typed.
Pure: nothing here touches a namespace."""

from __future__ import annotations

import re

from ..errors import UserError
from ..units import format_rate, parse_rate

MAX_DELAY_US = 1_000_000  # a delay or jitter, and the cluster-wide --delay-us
FAULT_FIELDS = ("rate", "loss", "delay", "jitter", "flap", "seed", "tx-rate", "rx-rate")
LINK_FAULT_FIELDS = ("loss", "delay", "jitter", "seed")  # what a per-destination queue can do
FAULT_KEYS = {
    "rate": "rate_bps",
    "tx-rate": "tx_rate_bps",
    "rx-rate": "rx_rate_bps",
    "loss": "loss",
    "delay": "delay_us",
    "jitter": "jitter_us",
    "flap": "flap",
    "seed": "seed",
}
# One direction of a host's port (a duplex mismatch, a bad transmit side): tx is what the
# host sends (tbf on its eth0), rx what it receives (tbf on its switch port), each below
# the host's rate and nominal link.
RATE_FIELDS = ("rate", "tx-rate", "rx-rate")
RATE_KEYS = {FAULT_KEYS[f] for f in RATE_FIELDS}
_DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)(us|ms|s)$")
_DURATION_US = {"us": 1, "ms": 1000, "s": 1_000_000}
OFF = "off"


def _number(text: str, kind=float):
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"expected {'an integer' if kind is int else 'a number'}") from None


def _duration_us(text: str) -> float:
    match = _DURATION_RE.match(text.strip().lower())
    if not match:
        raise ValueError("expected a duration with a unit (us, ms, s), e.g. 200us, 1.5ms")
    return float(match.group(1)) * _DURATION_US[match.group(2)]


def _parse_field(field: str, text: str):
    """One fault field's value; ValueError says what was expected."""
    if field in RATE_FIELDS:
        rate = parse_rate(text)  # UserError on a bad rate
        if rate is None:
            raise ValueError(f"a fault rate is a number (to remove it: {field}=off)")
        return rate
    if field == "loss":
        text = text.strip()
        percent = text.endswith("%")
        loss = _number(text[:-1]) / 100 if percent else _number(text)
        if not 0 <= loss <= 1:
            raise ValueError("expected a fraction from 0 to 1 or a percentage, e.g. 0.001 or 0.1%")
        return loss
    if field in ("delay", "jitter"):
        micros = _duration_us(text)
        if micros > MAX_DELAY_US or micros != int(micros):
            raise ValueError("expected whole microseconds, at most 1s")
        return int(micros)
    if field == "flap":
        down, sep, period = text.partition("/")
        if not sep:
            raise ValueError("expected DOWN/PERIOD, e.g. 300ms/5s")
        down_ms, period_ms = _duration_us(down) / 1000, _duration_us(period) / 1000
        if not 1 <= down_ms < period_ms <= 3_600_000:
            raise ValueError("DOWN must be at least 1ms and shorter than PERIOD (at most 1h)")
        return {"down_ms": down_ms, "period_ms": period_ms}
    seed = _number(text, int)
    if not 0 <= seed < 2**31:
        raise ValueError("expected an integer from 0 to 2147483647")
    return seed


def parse_faults(items: list[str], where: str, fields: tuple[str, ...] = FAULT_FIELDS) -> dict:
    """FIELD=VALUE items into faults (state keys); ``FIELD=off`` maps to None (remove).

    A bad item raises a one-line UserError naming ``where`` and the field."""
    faults: dict = {}
    for item in items:
        field, sep, text = item.partition("=")
        field = field.strip().lower()
        if field not in fields or not sep:
            raise UserError(
                f"{where}: {item!r}: expected FIELD=VALUE with FIELD one of {', '.join(fields)}"
            )
        if text.strip().lower() == OFF:
            faults[FAULT_KEYS[field]] = None
            continue
        try:
            faults[FAULT_KEYS[field]] = _parse_field(field, text)
        except (ValueError, UserError) as exc:
            raise UserError(f"{where}: {field}: {exc}, got {text!r}") from None
    return faults


def parse_host_link(text: str) -> tuple[str, dict]:
    """``HOST=RATE[,FIELD=VALUE...]`` or ``HOST=FIELD=VALUE[,...]`` -> (host, changes), the
    changes holding ``link_bps`` when a nominal rate is given and the faults under "faults"."""
    where = f"--host-link {text!r}"
    host, sep, spec = text.partition("=")
    if not sep or not host or not spec:
        raise UserError(f"{where}: expected HOST=RATE[,FIELD=VALUE...], e.g. host2=1gbit,loss=0.1%")
    items = [item for item in spec.split(",") if item.strip()]
    changes: dict = {}
    if items and "=" not in items[0]:
        try:
            changes["link_bps"] = parse_rate(items.pop(0))
        except UserError as exc:
            raise UserError(f"{where}: link: {exc}") from None
    changes["faults"] = parse_faults(items, where)
    return host.strip(), changes


def parse_link_fault(text: str) -> tuple[str, dict]:
    """``HOSTA-HOSTB=FIELD=VALUE[,...]`` -> (pair as given, faults of LINK_FAULT_FIELDS)."""
    where = f"--link-fault {text!r}"
    pair, sep, spec = text.partition("=")
    if not sep or "-" not in pair or not spec:
        raise UserError(
            f"{where}: expected HOSTA-HOSTB=FIELD=VALUE[,...], e.g. host1-host2=loss=0.1%"
        )
    items = [item for item in spec.split(",") if item.strip()]
    return pair.strip(), parse_faults(items, where, LINK_FAULT_FIELDS)


def link_key(hosts: list[dict], pair: str, where: str) -> str:
    """``hostA-hostB`` of two different hosts of the cluster, lower index first."""
    index = {h["name"]: i for i, h in enumerate(hosts)}
    ends = pair.split("-")
    if len(ends) != 2 or ends[0] == ends[1] or not all(e in index for e in ends):
        raise UserError(
            f"{where}: expected two different hosts of the cluster joined by '-', e.g. "
            f"host0-host1 (hosts are host0..host{len(hosts) - 1})"
        )
    return "-".join(sorted(ends, key=index.get))


def merge_faults(host: dict, faults: dict, where: str = "--host-link") -> None:
    """Apply parsed faults to a host of the state (None removes a field) and check them."""
    host["faults"] = merged_faults(host["faults"], faults)
    nominal = host["link_bps"]
    for field in RATE_FIELDS:
        rate = host["faults"].get(FAULT_KEYS[field])
        if rate is not None and nominal is not None and rate > nominal:
            raise UserError(
                f"{where}: {field}: {format_rate(rate)} on {host['name']} is above its nominal "
                f"link {format_rate(nominal)} (a fault rate is below nominal)"
            )


def format_faults(faults: dict) -> str:
    """The faults in the syntax they are given in (``rate=...,loss=...``); "" for none."""

    def duration(micros: float) -> str:
        for unit in ("s", "ms"):
            if micros >= _DURATION_US[unit] and micros % (_DURATION_US[unit] // 10) == 0:
                return f"{micros / _DURATION_US[unit]:g}{unit}"
        return f"{micros:g}us"

    parts = []
    for field in FAULT_FIELDS:
        value = faults.get(FAULT_KEYS[field])
        if value is None:
            continue
        if field in RATE_FIELDS:
            value = format_rate(value)
        elif field == "loss":
            value = f"{value * 100:g}%"
        elif field in ("delay", "jitter"):
            value = duration(value)
        elif field == "flap":
            value = f"{duration(value['down_ms'] * 1000)}/{duration(value['period_ms'] * 1000)}"
        parts.append(f"{field}={value}")
    return ",".join(parts)


def parse_set_items(items: list[str], fields: tuple[str, ...]) -> tuple[bool, dict]:
    """``vcluster set`` items: whether ``clear`` is among them, and the parsed rest."""
    if not items:
        raise UserError("vcluster set: nothing to change: give FIELD=VALUE items or clear")
    clear = [item for item in items if item.strip().lower() == "clear"]
    return bool(clear), parse_faults([i for i in items if i not in clear], "vcluster set", fields)


_ZERO_IS_OFF = ("loss", "jitter_us")


def merged_faults(old: dict, new: dict) -> dict:
    """Faults ``new`` over ``old``: a field set to off (None) is gone, and so is a loss or
    jitter of 0 (no such fault); a delay of 0 (overrides a default) and a seed of 0 stay."""
    merged = {**old, **new}
    return {k: v for k, v in merged.items() if v is not None and not (k in _ZERO_IS_OFF and v == 0)}
