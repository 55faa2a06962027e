"""The embedded virtual cluster: N hosts as network namespaces on one machine.

One module per part: :mod:`.state` (the state file), :mod:`.faults` (the fault grammar),
:mod:`.planning` (hosts, addresses, the wire), :mod:`.build` (namespaces, bridges, the
agent: up and down), :mod:`.wire` (shaping and the packet daemons; ``vcluster set``),
:mod:`.daemons` (processes that outlive a command, shared with the virtual grid),
:mod:`.lateness` (the pacers' own check), :mod:`.overview` (``vcluster status``) and
:mod:`.source` (the cluster the rest of clustertune sees). Other modules use the names
below.
"""

from .build import CPU_ENV_PREFIX, down, up
from .faults import (
    FAULT_FIELDS,
    LINK_FAULT_FIELDS,
    format_faults,
    merge_faults,
    parse_faults,
    parse_host_link,
    parse_link_fault,
)
from .lateness import (
    LATENESS_FIELDS,
    lateness_delta,
    packets_late_by,
    wire_lateness,
    without_hist,
)
from .overview import describe, status
from .planning import DEFAULT_WIRE, WIRE_HELP, WIRES, plan
from .source import Source, agent_argv, cluster_from_state
from .state import load_state, names, prefix, require_root, state_dir, validate_name
from .wire import WAN_QUEUE, set_faults, set_link_faults

__all__ = [
    "CPU_ENV_PREFIX",
    "DEFAULT_WIRE",
    "FAULT_FIELDS",
    "LATENESS_FIELDS",
    "LINK_FAULT_FIELDS",
    "WAN_QUEUE",
    "WIRES",
    "WIRE_HELP",
    "Source",
    "agent_argv",
    "cluster_from_state",
    "describe",
    "down",
    "format_faults",
    "lateness_delta",
    "packets_late_by",
    "load_state",
    "merge_faults",
    "names",
    "parse_faults",
    "parse_host_link",
    "parse_link_fault",
    "plan",
    "prefix",
    "require_root",
    "set_faults",
    "set_link_faults",
    "state_dir",
    "status",
    "up",
    "validate_name",
    "wire_lateness",
    "without_hist",
]
