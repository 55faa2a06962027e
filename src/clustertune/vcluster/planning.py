"""Planning a virtual cluster: its hosts' names, namespaces, addresses, sites, links and
faults, and its link model (the wire), as the state :mod:`.build` then builds."""

from __future__ import annotations

import time

from ..errors import UserError
from .faults import MAX_DELAY_US, link_key, merge_faults, merged_faults
from .state import prefix, validate_name

# Link models. paced (the default): every packet through the host's ct-nfq-delay, charged
# its frames' time on the wire (never above nominal; docs/network.md), at the cost of
# ~20 us per hop and, on a CPU-starved machine, late releases (wire_lateness says how
# late; a run on a late wire is labelled). tbf: a token bucket per veth end; cheap and
# steady under CPU load, but a message smaller than its bucket passes at memory speed
# (mid-size ping-pong reads up to 2x nominal): rate only, for machines too busy to pace.
WIRES = ("tbf", "paced")
DEFAULT_WIRE = "paced"  # every figure read over it bounded by the link (issue 19)
WIRE_HELP = (
    "link model: paced (default: every frame its time on the wire) or tbf (rate only: "
    "mid-size messages outrun it; for machines too busy to pace); docs/network.md"
)


def plan(
    name: str,
    hosts: int,
    link_bps: int | None,
    host_links: dict[str, int | None] | None = None,
    sites: int = 1,
    wan_bps: int | None = None,
    delay_us: int = 0,
    cores: int = 1,
    host_faults: dict[str, dict] | None = None,
    wire: str = DEFAULT_WIRE,
    link_faults: dict[str, dict] | None = None,
) -> dict:
    """The state of a cluster about to be built: pure, so it can be checked without root.

    ``host_faults`` maps host names to faults as :func:`parse_faults` returns them,
    ``link_faults`` pairs ``"hostA-hostB"`` to link faults (:func:`parse_link_fault`);
    ``wire`` is the link model (:data:`WIRES`)."""
    validate_name(name)
    if wire not in WIRES:
        raise UserError(f"--wire {wire}: expected one of {', '.join(WIRES)}")
    if not 1 <= hosts <= 200:
        raise UserError(f"--hosts {hosts}: must be between 1 and 200")
    if not 1 <= sites <= min(hosts, 50):
        raise UserError(f"--sites {sites}: must be between 1 and the number of hosts ({hosts})")
    if delay_us < 0 or delay_us > MAX_DELAY_US:
        raise UserError(f"--delay-us {delay_us}: must be between 0 and {MAX_DELAY_US}")
    host_links = dict(host_links or {})
    host_faults = dict(host_faults or {})
    pre = prefix(name)
    host_list = []
    for i in range(hosts):
        site = i * sites // hosts  # contiguous blocks of hosts per site
        host_name = f"host{i}"
        host_list.append(
            {
                "name": host_name,
                "namespace": f"{pre}{host_name}",
                "address": f"10.213.{site}.{10 + i}",
                "site": f"site{site}",
                "site_index": site,
                "link_bps": host_links.pop(host_name, link_bps),
                "cores": cores,
                "faults": {},
            }
        )
        merge_faults(host_list[-1], host_faults.pop(host_name, {}))
    unknown = sorted(set(host_links) | set(host_faults))
    if unknown:
        raise UserError(
            f"--host-link names unknown host(s) {', '.join(unknown)} "
            f"(hosts are host0..host{hosts - 1})"
        )
    links: dict[str, dict] = {}
    for pair, faults in (link_faults or {}).items():
        key = link_key(host_list, pair, f"--link-fault {pair}")
        links[key] = merged_faults(links.get(key, {}), faults)
    return {
        "name": name,
        "status": "building",
        "switch_ns": f"{pre}sw",
        "hosts": host_list,
        "sites": sites,
        "link_bps": link_bps,
        "wan_bps": wan_bps if sites > 1 else None,
        "delay_us": delay_us,
        "wire": wire,
        "link_faults": {k: v for k, v in links.items() if v},
        "delay_pids": {},
        "flap_pids": {},
        "created": time.time(),
    }
