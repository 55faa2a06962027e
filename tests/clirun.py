"""The command line as a user runs it (a separate process), and the check every level's
bad-input test shares: refused in one line before anything launches."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from clustertune.results import Store


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "clustertune.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_refused_before_launch(args: list[str], db: Path, named: str) -> None:
    """``clustertune ARGS --db DB`` exits 2 with one error line naming ``named``: no
    output, no launcher noise, nothing stored."""
    out = cli(*args, "--db", str(db), timeout=60)
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("clustertune: error: "), out.stderr
    assert named in lines[0], lines[0]
    assert out.stdout == "" and "mpirun" not in out.stderr
    assert not db.exists() or Store(db).list() == []
