"""``python -m clustertune.launch.watchdog OWNER``: kills a dead clustertune's jobs.

Started by the first job of a clustertune process (launch/process.py), in a session of
its own and without the marks, with a pipe from that process as stdin. The pipe reaches
end-of-file when the process exits, however it exits (SIGKILL included); then every
process still carrying ``CLUSTERTUNE_OWNER=OWNER`` is killed, and the watchdog ends. A
clustertune that exits normally has no job left, so the watchdog finds nothing.
"""

from __future__ import annotations

import sys

from .process import OWNER_MARK, kill_marked


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m clustertune.launch.watchdog OWNER", file=sys.stderr)
        return 2
    sys.stdin.buffer.read()  # returns at end-of-file: the owner is gone
    kill_marked(OWNER_MARK, argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
