"""Which hosts ``net matrix`` can run on: every pair's TCP check before the matrix, and the
flags for hosts left out, links that failed a check and then passed (flapping), and hosts
most of whose pairs could not be measured after all."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import combinations

from ...errors import UserError
from ...launch.base import Launcher
from .diagnosis.blame import Pair
from .pingpong import reachable
from .schedule import rounds

# Reachability checks at once. A check that fails lasts ~4 s (the check's connect bound,
# pingpong.REACH_CONNECT_S; its server is stopped at once); one dead host among n fails
# n-1 checks, which take ceil((n-1) / REACH_WORKERS) such waves, twice (a failed check is
# repeated). A check that passes takes < 1 s.
REACH_WORKERS = 8


def reachability(launcher: Launcher, hosts: Sequence[str]) -> tuple[list[str], list[dict]]:
    """The hosts the matrix (MPI or TCP) can run on, and a flag for each host left out.

    Why here and not in the kernel: an MPI job is all or nothing. With a host's link down
    it does not even reach the kernel (OpenMPI's orted on that host cannot open its
    out-of-band channel and the job fails with no host named; MPICH's hydra proxy cannot
    call back to mpiexec and the job waits for its timeout, 181 s on 3 hosts), and an MPI
    call blocked on a dead peer cannot portably be abandoned to go on with the other pairs.
    So every pair gets the one-byte TCP check of ``net pingpong`` (:func:`reachable`)
    first, and a failed one once more (one that passes then is a flapping link: a flag of
    its own, :func:`flapping`); then the host in most failed pairs is left out until every
    remaining pair passed: a dead host fails with every other; of a pair that fails while
    both reach the others (a cable), the later host goes. Fewer than two hosts left is a
    user error."""
    pairs = [p for r in rounds(hosts) for p in r]

    def check(pair: Pair) -> str | None:
        try:
            reachable(launcher, *pair)
        except UserError as exc:  # no route, or the server could not start on the host
            return str(exc)
        return None

    with ThreadPoolExecutor(max_workers=min(len(pairs), REACH_WORKERS)) as pool:
        failed = {p: why for p, why in zip(pairs, pool.map(check, pairs), strict=True) if why}
        # a link that flaps fails a check it passes a moment later: check again before
        # anyone is left out (a lone failure once cost a healthy host its place)
        again = dict(zip(failed, pool.map(check, failed), strict=True))
    flags = flapping({p: failed.pop(p) for p, why in again.items() if why is None})
    live = list(hosts)
    while pending := [p for p in failed if not set(p) - set(live)]:
        counts = Counter(h for p in pending for h in p)
        host = max(reversed(live), key=lambda h: counts[h])
        own = [p for p in failed if host in p]  # with hosts already left out too
        peers = [h for h in hosts if h != host and any(h in p for p in own)]
        live.remove(host)
        suspect = (
            f"{host}'s NIC or cable, or {host} is down"
            if len(peers) == len(hosts) - 1
            else f"the route between them ({host} reaches the other hosts)"
        )
        flags.append(
            {
                "host": host,
                "figure": "reachable",
                "value": None,
                "median": None,
                "peers": peers,
                "reason": f"{host}: no TCP connection with {', '.join(peers)}, left out of the "
                f"matrix — suspect {suspect} ({failed[own[0]]})",
            }
        )
    if len(live) < 2:
        raise UserError(
            f"no two of {', '.join(hosts)} reach each other over TCP: " + "; ".join(failed.values())
        )
    return live, flags


def flapping(recovered: dict[Pair, str]) -> list[dict]:
    """Flags for pairs whose TCP check failed and then passed: the host in two or more of
    them (its link comes and goes), else each pair."""
    counts = Counter(h for p in recovered for h in p)
    hosts = sorted(h for h, n in counts.items() if n >= 2)
    flags = [
        {
            "host": h,
            "figure": "flapping",
            "value": None,
            "median": None,
            "reason": f"{h}: TCP checks with {', '.join(sorted(o for p in recovered if h in p for o in p if o != h))} "
            f"failed, then passed — suspect {h}'s link going down and up (NIC, cable, switch port)",
        }
        for h in hosts
    ]
    for p, why in recovered.items():
        if not set(p) & set(hosts):
            flags.append(
                {
                    "pair": list(p),
                    "figure": "flapping",
                    "value": None,
                    "median": None,
                    "reason": f"{p[0]}-{p[1]}: a TCP check failed ({why}), then passed — suspect a "
                    "link that goes down and up between them",
                }
            )
    return flags


def unstable(live: Sequence[str], measured: Sequence[dict]) -> list[dict]:
    """Flags for hosts most of whose pairs could not be measured although every pair had
    just passed the TCP check: a link that went down during the matrix."""
    done = {tuple(sorted(m["pair"])) for m in measured}
    lost = [p for p in combinations(sorted(live), 2) if p not in done]
    flags = []
    for host in live:
        mine = [p for p in lost if host in p]
        if len(mine) >= 2 and 2 * len(mine) > len(live) - 1:
            others = ", ".join(h for p in mine for h in p if h != host)
            flags.append(
                {
                    "host": host,
                    "figure": "flapping",
                    "value": None,
                    "median": None,
                    "reason": f"{host}: its pairs with {others} could not be measured, though they "
                    "passed the TCP check just before — suspect its link going down and up",
                }
            )
    return flags
