"""Heartbeat of a grid job (HBM's role in seeds/000): while a co-allocated job runs, every
``interval`` seconds the parts it stands on are checked, and the first one found dead is
named while the job runs:

* each site's daemons the job needs: the site-wide ones (munged, slurmctld) and those
  of the hosts it uses (slurmd-<host>, sshd-<host>), by pid;
* each host it uses: its network namespace still there, its link (eth0) up;
* the WAN: each used site's link to the WAN bridge up (a cut WAN).

The watcher calls ``on_lost(message)`` once (the co-allocator stops the job there, so it
ends within about one interval plus the MPI launcher's own shutdown). ``check()`` runs
the same checks once (after a job failed by itself: which part died).
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable

from .. import netns, vcluster
from . import daemons

INTERVAL_S = 0.5


def _link_states(ns: str, dev: str | None = None) -> dict[str, str]:
    """Operational state (UP, DOWN, LOWERLAYERDOWN...) of the devices of namespace ``ns``
    (one ``ip`` call), or of ``dev`` only; {} when the namespace or device is gone."""
    argv = ["ip", "-n", ns, "-o", "link", "show"] + (["dev", dev] if dev else [])
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=5)
    except subprocess.TimeoutExpired:
        return {dev or "*": "UNANSWERED"}
    states = {}
    for line in out.stdout.splitlines() if out.returncode == 0 else []:
        words = line.split()
        name = words[1].rstrip(":").split("@")[0]
        states[name] = words[words.index("state") + 1] if "state" in words else "UNKNOWN"
    return states


class Heartbeat:
    def __init__(
        self,
        grid: dict,
        wanted: dict[str, list[str]],
        interval: float = INTERVAL_S,
        on_lost: Callable[[str], None] | None = None,
    ):
        self.grid = grid
        self.wanted = wanted
        self.interval = interval
        self.on_lost = on_lost
        self.lost: str | None = None
        self.lost_at: float | None = None
        self.checks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="grid-heartbeat", daemon=True)
        sites = {s["name"]: s for s in grid["sites"]}
        self._sites = [sites[name] for name in wanted if name in sites]
        cstate = vcluster.load_state(grid["name"]) or {}
        self._sw = cstate.get("switch_ns") if len(grid["sites"]) > 1 else None

    def daemons(self) -> list[tuple[str, str, int]]:
        """(site, daemon, pid) the job stands on."""
        out = []
        for site in self._sites:
            for what, pid in site.get("pids", {}).items():
                _, dash, host = what.partition("-")
                if not dash or host in self.wanted[site["name"]]:
                    out.append((site["name"], what, pid))
        return out

    def check(self) -> str | None:
        """The first dead part found, as one sentence; None when all are alive."""
        for site, what, pid in self.daemons():
            if not daemons.alive(pid):
                return f"{site}: {what} (pid {pid}) is not running"
        for site in self._sites:
            for h in site["hosts"]:
                if h["name"] not in self.wanted[site["name"]]:
                    continue
                if not netns.exists(h["namespace"]):
                    return f"{site['name']}: host {h['name']} is gone (no namespace)"
                state = _link_states(h["namespace"], "eth0").get("eth0")
                if state not in ("UP", "UNKNOWN"):
                    return f"{site['name']}: host {h['name']}: its link is {state or 'gone'}"
        if self._sw is not None and len(self._sites) > 1:
            states = _link_states(self._sw)
            for site in self._sites:
                k = site["name"].removeprefix("site")
                for dev in (f"s{k}w", f"w{k}s"):
                    state = states.get(dev, states.get("*"))
                    if state not in ("UP", "UNKNOWN"):
                        return f"WAN: {site['name']}'s link to the WAN is {state or 'gone'}"
        return None

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            self.checks += 1
            found = self.check()
            if found is not None:
                self.lost, self.lost_at = found, time.time()
                if self.on_lost is not None:
                    self.on_lost(found)
                return

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
