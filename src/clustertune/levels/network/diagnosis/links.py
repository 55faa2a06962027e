"""Bandwidth and latency of every link, judged against the others (or a nominal figure,
one for every link or each link's own).

A bad link is far from the reference and an outlier of the healthy links' spread
(:class:`Rules`); a host all of whose links are bad is named, else the pair. Suspects are
measured again before anyone is blamed (:func:`diagnose_with_retest`).
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from math import isfinite

import numpy as np

from .blame import Pair

FIGURES = ("bandwidth_mbps", "latency_us")
# A figure's nominal reference: one value for every link, or an n x n matrix of each link's
# own (hosts of different link rates: a pair's nominal is its slower end's).
Nominal = float | np.ndarray
_WORDS = {"bandwidth_mbps": ("bandwidth", "Mbit/s"), "latency_us": ("latency", "µs")}


@dataclass(frozen=True)
class LinkMatrix:
    """Per-pair figures as n x n matrices: symmetric, NaN on the diagonal and where unmeasured."""

    hosts: tuple[str, ...]
    bandwidth_mbps: np.ndarray
    latency_us: np.ndarray

    def figure(self, name: str) -> np.ndarray:
        return {"bandwidth_mbps": self.bandwidth_mbps, "latency_us": self.latency_us}[name]

    def to_json(self) -> dict[str, object]:
        """Matrices as nested lists, null on the diagonal and for unmeasured pairs."""

        def rows(m: np.ndarray) -> list[list[float | None]]:
            return [[None if np.isnan(v) else float(v) for v in row] for row in m]

        return {
            "hosts": list(self.hosts),
            "bandwidth_mbps": rows(self.bandwidth_mbps),
            "latency_us": rows(self.latency_us),
        }


def _positive(v: object) -> bool:
    """A finite number above 0 (not a bool): a figure or a run's latency."""
    return isinstance(v, int | float) and not isinstance(v, bool) and isfinite(v) and v > 0


def _pair_entries(
    hosts: Sequence[str], measurements: Iterable[Mapping[str, object]]
) -> dict[tuple[int, int], dict[str, float | list[float]]]:
    """Validate measurements {"pair": [a, b], "bandwidth_mbps": x, "latency_us": y}, and
    each run's latency (``"latency_runs_us": [...]``) where a re-test gives them."""
    index = {h: i for i, h in enumerate(hosts)}
    entries: dict[tuple[int, int], dict[str, float | list[float]]] = {}
    for k, m in enumerate(measurements):
        pair = m.get("pair") if isinstance(m, Mapping) else None
        if not isinstance(pair, Sequence) or isinstance(pair, str) or len(pair) != 2:
            raise ValueError(f"measurement {k}: expected 'pair': [host, host], got {pair!r}")
        a, b = pair
        for h in (a, b):
            if h not in index:
                raise ValueError(f"measurement {k}: unknown host {h!r} (hosts: {list(hosts)})")
        if a == b:
            raise ValueError(f"measurement {k}: pair {a!r}-{b!r} joins a host to itself")
        key = (min(index[a], index[b]), max(index[a], index[b]))
        if key in entries:
            raise ValueError(f"measurement {k}: pair {a}-{b} given twice")
        values: dict[str, float | list[float]] = {}
        for name in FIGURES:
            v = m.get(name)
            if not _positive(v):
                raise ValueError(f"measurement {k} ({a}-{b}): {name} must be > 0, got {v!r}")
            values[name] = float(v)
        runs = m.get("latency_runs_us")
        if runs is not None:
            if not isinstance(runs, Sequence) or not runs or not all(map(_positive, runs)):
                raise ValueError(f"{a}-{b}: latency_runs_us must be positive numbers, got {runs!r}")
            values["latency_runs_us"] = [float(v) for v in runs]
        entries[key] = values
    return entries


def link_matrix(hosts: Sequence[str], measurements: Iterable[Mapping[str, object]]) -> LinkMatrix:
    """Build the matrices from per-pair measurements ``{"pair": [a, b], <figure>: value}``.

    A ping-pong measures both directions at once, so the matrices are symmetric; a pair
    given twice (in either order) is an error, as is an unknown host or a value <= 0.
    """
    if len(set(hosts)) != len(hosts):
        raise ValueError(f"duplicate host names in {list(hosts)}")
    if len(hosts) < 2:
        raise ValueError(f"an all-pairs matrix needs at least 2 hosts, got {list(hosts)}")
    n = len(hosts)
    mats = {name: np.full((n, n), np.nan) for name in FIGURES}
    for (i, j), values in _pair_entries(hosts, measurements).items():
        for name, v in values.items():
            mats[name][i, j] = mats[name][j, i] = v
    return LinkMatrix(tuple(hosts), mats["bandwidth_mbps"], mats["latency_us"])


@dataclass(frozen=True)
class Rules:
    """When a link is bad. Both tests must hold, so a small cluster's tiny spread cannot
    turn a few % into a fault, and a large cluster's natural spread is respected.

    - far from the reference: bandwidth < bandwidth_fraction x reference, or
      latency > latency_factor x reference;
    - an outlier: |value - reference| > mad_threshold x 1.4826 x MAD, the MAD taken over
      the links that pass the first test (skipped when that MAD is 0).
    """

    bandwidth_fraction: float = 0.8
    latency_factor: float = 2.0
    mad_threshold: float = 3.5


@dataclass(frozen=True)
class Diagnosis:
    """Outcome of :func:`diagnose`: the flags, the links to re-test, and notes in words."""

    matrix: LinkMatrix
    flagged: list[dict[str, object]]
    suspects: list[Pair]  # every bad link, whether blamed on a host or on the pair
    notes: list[str] = field(default_factory=list)
    rules: Rules = Rules()
    reference: Mapping[str, Nominal] | None = None

    def to_json(self) -> dict[str, object]:
        return {**self.matrix.to_json(), "flagged": self.flagged, "notes": self.notes}


def _far(name: str, value: np.ndarray, ref: float, rules: Rules) -> np.ndarray:
    if name == "bandwidth_mbps":
        return value < rules.bandwidth_fraction * ref
    return value > rules.latency_factor * ref


def _bad_links(name: str, m: np.ndarray, ref: float, rules: Rules) -> np.ndarray:
    """Links far from ``ref`` and outliers of the healthy links' spread (see :class:`Rules`)."""
    measured = ~np.isnan(m)
    far = np.zeros_like(measured)
    far[measured] = _far(name, m[measured], ref, rules)
    healthy = m[measured & ~far]
    mad = float(np.median(np.abs(healthy - np.median(healthy)))) if healthy.size else 0.0
    if mad == 0:
        return far
    return far & (np.abs(np.where(measured, m, ref) - ref) > rules.mad_threshold * 1.4826 * mad)


def _culprits(m: np.ndarray, bad: np.ndarray) -> set[int]:
    """Hosts with at least two measured links, all of them bad."""
    culprits = set()
    for i, row in enumerate(m):
        measured = ~np.isnan(row)
        if measured.sum() >= 2 and bad[i, measured].all():
            culprits.add(i)
    return culprits


def _links_touching_none(m: np.ndarray, hosts: Iterable[int]) -> np.ndarray:
    """The measured links (i < j) of ``m`` that touch none of ``hosts``, as a mask."""
    keep = np.triu(~np.isnan(m), 1)
    for i in hosts:
        keep[i, :] = keep[:, i] = False
    return keep


def _slow_hosts(name: str, m: np.ndarray, rules: Rules, rates: Nominal | None) -> set[int]:
    """Hosts each of whose links is bad against the median of the links that do not touch
    it. On three hosts a slow host's two links are two of the three, so they ARE the
    median (500 µs on host2 of three was never flagged, on either matrix); judged against
    the one link it does not touch, it stands out. The same :class:`Rules` as every link.
    Only against links of the same nominal rates (``rates``, each link's, when known): a
    100 Mbit host's latency among 1 Gbit ones is its wire's, not a fault (61 against 18 µs
    on a paced wire)."""
    rate = None if rates is None else np.broadcast_to(np.asarray(rates, dtype=float), m.shape)
    return {
        i
        for i in range(len(m))
        if (keep := _links_touching_none(m, [i])).any()
        and (rate is None or _one_rate(rate[i][~np.isnan(m[i])], rate[keep]))
        and i in _culprits(m, _bad_links(name, m, float(np.median(m[keep])), rules))
    }


def _one_rate(*groups: np.ndarray) -> bool:
    """Whether the links of these groups all have one nominal rate."""
    return len({float(r) for g in groups for r in g}) == 1


def _reference_and_bad_links(
    name: str, m: np.ndarray, rules: Rules, rates: Nominal | None = None
) -> tuple[float, np.ndarray]:
    """The healthy level of a figure, and the bad links judged against it.

    Start from the median over hosts of each host's median link (robust while fewer than
    half of the hosts are bad), then take the median of the links that touch no culprit
    host, and repeat until the culprits no longer change (at most n times): one bad host
    plus one bad cable in four hosts spoils two hosts' medians, not this. With no culprit
    found that way, a host slow against the links that do not touch it (:func:`_slow_hosts`:
    on a small cluster its links are too many of the median's) is the culprit.
    """
    with np.errstate(all="ignore"):
        scores = [np.nanmedian(row) for row in m if not np.isnan(row).all()]
    ref = float(np.median(scores))
    culprits: set[int] | None = None
    for _ in range(len(m)):
        found = _culprits(m, _bad_links(name, m, ref, rules))
        if found == culprits:
            break
        culprits = found
        if (keep := _links_touching_none(m, culprits)).any():
            ref = float(np.median(m[keep]))
    slow = set() if culprits else _slow_hosts(name, m, rules, rates)
    if slow and (keep := _links_touching_none(m, slow)).any():
        ref = float(np.median(m[keep]))
    return ref, _bad_links(name, m, ref, rules)


def _relative(name: str, value: float, ref: float, against: str) -> str:
    if name == "bandwidth_mbps":
        return f"{100 * value / ref:.0f} % of the {against}"
    return f"{value / ref:.1f}x the {against}"


def _links(matrix: LinkMatrix) -> list[tuple[int, int]]:
    """Every link (i < j) of the matrix, measured or not."""
    return list(zip(*np.triu_indices(len(matrix.hosts), 1), strict=True))


def _unjudged_notes(matrix: LinkMatrix, reference: Mapping[str, Nominal]) -> list[str]:
    """What the diagnosis cannot judge: links not measured, a lone link without reference."""
    hosts = matrix.hosts
    notes = []
    missing = [
        f"{hosts[i]}-{hosts[j]}" for i, j in _links(matrix) if np.isnan(matrix.bandwidth_mbps[i, j])
    ]
    if missing:
        notes.append(f"not measured: {', '.join(missing)}")
    unjudged = [name for name in FIGURES if name not in reference]
    if len(hosts) == 2 and unjudged:
        notes.append(
            f"two hosts give one link and nothing to compare its {' and '.join(unjudged)} "
            "with: pass the nominal figures as reference, and add a third host to tell a "
            "bad host from a bad cable"
        )
    return notes


def _fabric_flag(matrix: LinkMatrix, name: str, ref: float, against: str) -> dict[str, object]:
    words, unit = _WORDS[name]
    v = float(np.nanmedian(matrix.figure(name)[np.triu_indices(len(matrix.hosts), 1)]))
    return {
        "fabric": list(matrix.hosts),
        "figure": name,
        "value": v,
        "median": ref,
        "reason": f"the whole fabric: {words} {v:.3g} {unit} on every link, "
        f"{_relative(name, v, ref, against)} — suspect the switch, the "
        "link settings (speed, duplex) or a load on every host",
    }


def _host_flag(
    matrix: LinkMatrix, name: str, i: int, ref: float, against: str
) -> dict[str, object]:
    words, unit = _WORDS[name]
    host, row = matrix.hosts[i], matrix.figure(name)[i]
    measured = ~np.isnan(row)
    links = int(measured.sum())
    v = float(np.median(row[measured]))
    return {
        "host": host,
        "figure": name,
        "value": v,
        "median": ref,
        "reason": f"{host}: {words} {v:.3g} {unit} on all {links} of its links, "
        f"{_relative(name, v, ref, against)} — suspect {host}'s NIC or cable",
    }


def _pair_flag(
    matrix: LinkMatrix, name: str, i: int, j: int, ref: float, against: str
) -> dict[str, object]:
    words, unit = _WORDS[name]
    hosts = matrix.hosts
    v = float(matrix.figure(name)[i, j])
    where = (
        "either host's NIC or the cable between them"
        if len(hosts) == 2
        else "the cable or switch ports between them (neither host is bad on all its links)"
    )
    return {
        "pair": [hosts[i], hosts[j]],
        "figure": name,
        "value": v,
        "median": ref,
        "reason": f"{hosts[i]}-{hosts[j]}: {words} {v:.3g} {unit}, "
        f"{_relative(name, v, ref, against)} — suspect {where}",
    }


def _judge(
    matrix: LinkMatrix, name: str, rules: Rules, nominal: Nominal | None, rates: Nominal | None
) -> tuple[list[dict[str, object]], list[dict[str, object]], set[Pair]]:
    """One figure's flags on hosts, flags on pairs, and bad links (the suspects).

    Against a nominal figure each link is judged as its fraction of its own nominal (the
    Rules hold alike for value vs ref and value/ref vs 1), so a 100 Mbit host among 1 Gbit
    ones is judged against 100 Mbit, and is named only when slower than that. ``rates``:
    the links' nominal rates, if known, for the median rule's per-host part."""
    hosts, m = matrix.hosts, matrix.figure(name)
    if nominal is not None:
        refs = np.broadcast_to(np.asarray(nominal, dtype=float), m.shape)
        bad, against = _bad_links(name, m / refs, 1.0, rules), "reference"
    else:
        ref, bad, against = *_reference_and_bad_links(name, m, rules, rates), "median"
        refs = np.full(m.shape, ref)
    culprits = _culprits(m, bad)
    if nominal is not None and len(hosts) >= 3 and len(culprits) == len(hosts):
        # every host bad against the nominal figure: no host or cable stands out
        every = {(hosts[i], hosts[j]) for i, j in _links(matrix)}
        ref = float(np.median(refs[np.triu_indices(len(hosts), 1)]))
        return [_fabric_flag(matrix, name, ref, against)], [], every
    on_hosts = []
    for i in sorted(culprits):
        ref = float(np.median(refs[i, ~np.isnan(m[i])]))  # its links' own nominal
        on_hosts.append(_host_flag(matrix, name, i, ref, against))
    on_pairs, suspects = [], set()
    for i, j in zip(*np.nonzero(np.triu(bad, 1)), strict=True):
        suspects.add((hosts[i], hosts[j]))
        if i not in culprits and j not in culprits:
            on_pairs.append(_pair_flag(matrix, name, i, j, float(refs[i, j]), against))
    return on_hosts, on_pairs, suspects


def diagnose(
    matrix: LinkMatrix,
    rules: Rules | None = None,
    reference: Mapping[str, Nominal] | None = None,
) -> Diagnosis:
    """Find bad links and name the culprit: a host whose links are all bad, or a pair.

    Reference per figure: ``reference[figure]`` if given (the nominal link rate: one for
    every link, or an n x n matrix of each link's own), else
    the median of the links that touch no culprit host (see :func:`_reference_and_bad_links`;
    a plain median over all pairs would not do: one bad host of four spoils half the
    pairs). A link is bad under :class:`Rules`. A host with at
    least two measured links, all bad, is the culprit and its links are not flagged again;
    a bad link between two hosts not blamed is flagged as the pair (cable, switch port).
    With two hosts there is one link: it is judged only against a given reference, and a
    bad one is flagged as the pair since host and cable cannot be told apart.
    """
    rules = rules or Rules()
    reference = reference or {}
    on_hosts: list[dict[str, object]] = []
    on_pairs: list[dict[str, object]] = []
    suspects: set[Pair] = set()
    for name in FIGURES:
        if name not in reference and len(matrix.hosts) == 2:
            continue  # one link and nothing to judge it against (noted)
        hosts_bad, pairs_bad, links_bad = _judge(
            matrix, name, rules, reference.get(name), reference.get("bandwidth_mbps")
        )
        on_hosts += hosts_bad
        on_pairs += pairs_bad
        suspects |= links_bad
    return Diagnosis(
        matrix=matrix,
        flagged=on_hosts + on_pairs,
        suspects=sorted(suspects),
        notes=_unjudged_notes(matrix, reference),
        rules=rules,
        reference=reference,
    )


def _flag_key(flag: Mapping[str, object]) -> tuple:
    """What a flag blames (a host, a pair or the fabric) and for which figure."""
    return flag.get("host"), tuple(flag.get("pair", flag.get("fabric", ()))), flag["figure"]


# Healthy links re-measured beside the suspects on hosts that share CPUs (controls): their
# latency on the re-test against the first round's is the re-test's own level.
CONTROL_PAIRS = 3


# Up to this many hosts a host may be judged against the one link that does not touch it
# (:func:`_slow_hosts`); that link, kept from the first round, named a healthy host of
# three when it ran fast once (review4 I4: 21 of 3000 noisy healthy real clusters), so it
# is re-measured as a control on any cluster. From four hosts on, the reference is the
# median of at least three links.
FEW_HOSTS = 3


def controls(first: Diagnosis, count: int = CONTROL_PAIRS) -> list[Pair]:
    """The ``count`` links that were no suspect whose latency was closest to the median
    of those links (typical healthy links), in the order of the hosts."""
    hosts, m = first.matrix.hosts, first.matrix.latency_us
    suspects = set(first.suspects)
    healthy = [
        (hosts[i], hosts[j])
        for i, j in zip(*np.triu_indices(len(hosts), 1), strict=True)
        if not np.isnan(m[i, j]) and (hosts[i], hosts[j]) not in suspects
    ]
    if not healthy:
        return []
    index = {h: i for i, h in enumerate(hosts)}
    value = {p: float(m[index[p[0]], index[p[1]]]) for p in healthy}
    middle = float(np.median(list(value.values())))
    return sorted(sorted(healthy, key=lambda p: abs(value[p] - middle))[:count])


def confirm(
    first: Diagnosis, retest: Iterable[Mapping[str, object]], control: Sequence[Pair] = ()
) -> Diagnosis:
    """Re-test before blaming: keep only the flags the re-measured suspects confirm.

    Each re-measured link keeps the better of its two measurements (higher bandwidth,
    lower latency), so a link stays bad only if it was bad both times; the diagnosis is
    then run again with the same rules and reference. Flags resting on a link that was
    not a first-round suspect are dropped (they were never re-tested), and every first
    flag that did not survive gets a note.

    ``control``: healthy links re-measured with the suspects (:func:`controls`), on hosts
    that share CPUs. There the re-test runs with the ends placed otherwise and at another
    load than the first round, which moves every link's latency alike: a suspect's re-test
    latency is read relative to the controls' (times the median of their first-round
    latencies over the median of their re-test ones), so it is judged against links
    measured the same way. The controls' own figures stay the first round's.

    Where the controls carry each run's latency (``latency_runs_us``), their re-test level
    is the median of all those runs: the suspect's best run is read against a typical
    healthy run. On 2 shared cores a 1-byte run reads ~18 or ~40-50 µs as the wake-ups
    fall (every link, every placement); a healthy suspect whose four runs all fell slow,
    read against the controls' best (each had one fast run), stood at 2.2x and was
    named in 2 of 20 idle healthy 6-host matrices. A link slower than a typical healthy
    run by its own excess is still named.
    """
    hosts = first.matrix.hosts
    again = _pair_entries(hosts, retest)
    index = {h: i for i, h in enumerate(hosts)}
    suspect_keys = {tuple(sorted((index[a], index[b]))) for a, b in first.suspects}
    control_keys = {tuple(sorted((index[a], index[b]))) for a, b in control}
    for key in again:
        if key not in suspect_keys | control_keys:
            raise ValueError(f"re-test of {hosts[key[0]]}-{hosts[key[1]]}, which was not a suspect")
    bw, lat = first.matrix.bandwidth_mbps.copy(), first.matrix.latency_us.copy()
    notes = []
    level = 1.0
    measured_controls = [k for k in control_keys if k in again]
    if measured_controls:
        was = float(np.median([lat[k] for k in measured_controls]))
        pooled = [
            v
            for k in measured_controls
            for v in again[k].get("latency_runs_us", [again[k]["latency_us"]])
        ]
        now = float(np.median(pooled))
        level = was / now
        notes.append(
            f"latency re-test read against {len(measured_controls)} healthy links re-measured "
            f"with it: their latency {now:.3g} µs (median of {len(pooled)} runs) against "
            f"{was:.3g} µs in the first round"
        )
    for (i, j), v in again.items():
        if (i, j) in control_keys:
            continue
        bw[i, j] = bw[j, i] = max(bw[i, j], v["bandwidth_mbps"])
        lat[i, j] = lat[j, i] = min(lat[i, j], level * v["latency_us"])
    second = diagnose(LinkMatrix(hosts, bw, lat), first.rules, first.reference)

    def tested(flag: Mapping[str, object]) -> bool:
        if "fabric" in flag:
            return len(suspect_keys) == len(hosts) * (len(hosts) - 1) // 2
        if "pair" in flag:
            a, b = flag["pair"]  # type: ignore[misc]
            return (a, b) in first.suspects
        i = index[str(flag["host"])]
        measured = [j for j in range(len(hosts)) if j != i and not np.isnan(bw[i, j])]
        return all(tuple(sorted((i, j))) in suspect_keys for j in measured)

    kept = [f for f in second.flagged if tested(f)]
    ident = [_flag_key(f) for f in kept]
    notes = list(second.notes) + notes
    for f in first.flagged:
        if _flag_key(f) not in ident:
            notes.append(f"not confirmed on re-test: {f['reason']}")
    return Diagnosis(
        matrix=second.matrix,
        flagged=kept,
        suspects=second.suspects,
        notes=notes,
        rules=first.rules,
        reference=first.reference,
    )


def diagnose_with_retest(
    matrix: LinkMatrix,
    remeasure: Callable[[list[Pair]], Iterable[Mapping[str, object]]],
    rules: Rules | None = None,
    reference: Mapping[str, Nominal] | None = None,
    shared_cpus: bool = False,
) -> Diagnosis:
    """:func:`diagnose`, then ``remeasure(suspects)`` and :func:`confirm` if anything was
    bad; with ``shared_cpus``, or on a cluster of at most :data:`FEW_HOSTS`, the re-test
    measures :func:`controls` beside them."""
    first = diagnose(matrix, rules, reference)
    if not first.suspects:
        return first
    few = len(matrix.hosts) <= FEW_HOSTS
    control = controls(first) if shared_cpus or few else []
    return confirm(first, remeasure(first.suspects + control), control)
