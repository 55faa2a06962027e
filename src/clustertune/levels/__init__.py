"""The levels of clustertune, one module (or package) each: probe, network, mpi, linpack, ...

A level module may define:
  * ``add_commands(subparsers, common)`` - its CLI subcommands (``common`` is the parent
    parser carrying --cluster, --db and --json);
  * a report renderer registered with ``clustertune.report.section``.
Modules are discovered, so adding a level never means editing the CLI or the report.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def load_all() -> list[ModuleType]:
    modules = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        modules.append(importlib.import_module(f"{__name__}.{info.name}"))
    return modules
