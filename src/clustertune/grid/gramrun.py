"""``python -m clustertune.grid.gramrun GRID SITE HOST COMMAND``: COMMAND on HOST of a GRAM
site as a GRAM job (the submission interface's, grid/jobs.py, so its exit status is the
job's own), its output passed on as it grows, ending when the job writes its exit status:
the grid launcher's remote shell for hosts of GRAM sites (the MPI daemons start through
the gatekeeper, grid/gram.py). Not ``globusrun -o``: it returns 0 whatever the job did and
ends only at the job manager's next poll, about 3 s after the job (measured).
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

from .. import vcluster
from ..errors import UserError
from . import jobs, virtual


def main(argv: list[str] | None = None) -> int:
    """GRID SITE HOST COMMAND: COMMAND on HOST of a GRAM site, as a GRAM job; its output
    passed on while it runs; its exit status. SIGTERM/SIGHUP cancel the job."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 4:
        print("usage: python -m clustertune.grid.gramrun GRID SITE HOST COMMAND", file=sys.stderr)
        return 2
    name, site_name, host, command = args
    grid = virtual.load(name)
    site = next((s for s in (grid or {}).get("sites", []) if s["name"] == site_name), None)
    if site is None or site["scheduler"] != "gram":
        print(f"clustertune-gram: grid {name!r} has no GRAM site {site_name!r}", file=sys.stderr)
        return 255
    backend = jobs.GramBackend(grid, site, lrm="fork")  # on HOST itself, not where Slurm says
    try:
        handle = backend.submit(
            jobs.GridJob(str(vcluster.state_dir(name) / "agent"), [host, command])
        )
    except UserError as exc:
        print(f"clustertune-gram: {exc}", file=sys.stderr)
        return 255

    def stop(signum, frame):
        backend.cancel(handle)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    d = Path(handle.dir)
    sent = {"out": 0, "err": 0}

    def pass_on() -> None:
        for stream, sink in (("out", sys.stdout.buffer), ("err", sys.stderr.buffer)):
            with open(d / stream, "ab+") as f:  # may not exist yet
                f.seek(sent[stream])
                data = f.read()
            sent[stream] += len(data)
            sink.write(data)
            sink.flush()

    checked = time.monotonic()
    while not (d / "exit").is_file():
        pass_on()
        time.sleep(0.05)
        if time.monotonic() - checked > 2.0:  # ended without its exit file (cancelled)?
            checked = time.monotonic()
            if backend.poll(handle) in ("done", "failed") and not (d / "exit").is_file():
                break
    pass_on()
    result = backend.result(handle)
    return result.exit_status if result.exit_status is not None else 255


if __name__ == "__main__":
    sys.exit(main())
