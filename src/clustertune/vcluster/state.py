"""A virtual cluster's state file: /run/clustertune/vcluster/<name>/state.json, written
*before* anything is created, so ``down`` can remove every piece after a crash, and
``up`` removes stale pieces of the same name before it builds. The daemons' parameter
and statistics files live beside it."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from .. import netns
from ..errors import UserError

RUN_DIR = Path(os.environ.get("CLUSTERTUNE_RUN_DIR", "/run/clustertune")) / "vcluster"
_NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,11}$")


def prefix(name: str) -> str:
    return f"ct-{name}-"


def state_dir(name: str) -> Path:
    return RUN_DIR / name


def require_root() -> None:
    if os.geteuid() != 0:
        raise UserError(
            "a virtual cluster needs root (network namespaces need CAP_NET_ADMIN and "
            "CAP_SYS_ADMIN); without root, run commands without --cluster to use ranks on "
            "localhost"
        )


def validate_name(name: str) -> None:
    if not _NAME_RE.match(name):
        raise UserError(
            f"bad cluster name {name!r}: 1-12 lower-case letters and digits, starting with a letter"
        )


def names() -> list[str]:
    return saved_names(RUN_DIR)


def load_state(name: str) -> dict | None:
    return read(state_dir(name))


def save_state(state: dict) -> None:
    write(state_dir(state["name"]), state)


# One directory per name holding its state.json: virtual clusters here, virtual grids
# (grid/virtual.py) under their own run directory.


def saved_names(run_dir: Path) -> list[str]:
    """The names under ``run_dir`` that have a state file."""
    if not run_dir.is_dir():
        return []
    return sorted(p.name for p in run_dir.iterdir() if (p / "state.json").is_file())


def read(directory: Path) -> dict | None:
    path = directory / "state.json"
    return json.loads(path.read_text()) if path.is_file() else None


def write(directory: Path, state: dict) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / "state.json.tmp"
    tmp.write_text(json.dumps(state, indent=1))
    tmp.replace(directory / "state.json")  # atomic: a crash never leaves half a state file


def all_namespaces(state: dict) -> list[str]:
    return [h["namespace"] for h in state["hosts"]] + [state["switch_ns"]]


def is_healthy(state: dict) -> bool:
    return state.get("status") == "up" and all(netns.exists(ns) for ns in all_namespaces(state))


def running_state(name: str) -> dict:
    """The state of running cluster ``name``, for ``vcluster set``."""
    require_root()
    validate_name(name)
    state = load_state(name)
    if state is None or not is_healthy(state):
        raise UserError(f"no running virtual cluster {name!r} (see 'clustertune vcluster status')")
    return state


def daemon_files(state: dict, key: str) -> tuple[Path, Path]:
    directory = state_dir(state["name"])
    return directory / f"{key}.nfq", directory / f"{key}.nfq.json"
