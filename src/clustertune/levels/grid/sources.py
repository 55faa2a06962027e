"""The grid's cluster sources (clustertune.sources), each with the built-in source it goes
ahead of: a running virtual grid's name before a virtual cluster's, a ``*.grid.toml``
description before any other ``*.toml`` cluster file."""

from ...grid import description, source

SOURCES = ((source.VirtualGrid(), "vcluster"), (description.GridFile(), "file"))
