"""The levels of clustertune, one module (or package) each: probe, network, mpi, linpack, ...

A level module may define:
  * ``add_commands(subparsers, run_subparsers, common)`` - its CLI subcommands: top-level
    ones in ``subparsers``, kernels of ``clustertune run`` in ``run_subparsers``
    (``common`` is the parent parser carrying --cluster, --db and --json);
  * a report renderer registered with ``clustertune.report.section``;
  * ``demo(cluster, store)`` - its step in ``make demo``, returning the records it made;
  * ``ORDER`` - where it comes in the demo (lower first; default 50), so the cheap
    checks (probe) run before the long measurements.
Modules are discovered, so adding a level never means editing the CLI or the report.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def load_all() -> list[ModuleType]:
    modules = [
        importlib.import_module(f"{__name__}.{m.name}") for m in pkgutil.iter_modules(__path__)
    ]
    return sorted(modules, key=lambda m: (getattr(m, "ORDER", 50), m.__name__))
