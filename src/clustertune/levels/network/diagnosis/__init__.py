"""Diagnoses of the network level: which host or link is at fault, and why.

Pure functions, like ``analysis`` (the figures of one sweep, which they read): measurements
in, flags out. A flag is a dict ``{"host": h}`` or ``{"pair": [a, b]}`` (or ``{"fabric":
hosts}``) with ``figure``, ``value``, ``median`` and ``reason`` (the sentence the report
shows). ``net matrix`` (matrix.py) runs them in turn and composes their flags.

links.py       bandwidth and latency of every link against the others: diagnose, re-test
loss.py        packet loss from TCP's retransmission counters, and loss against slowness
shapes.py      dips and jags of a link's mid-size curve
asymmetry.py   one direction of a link much slower than the other
overhead.py    the cost of MPI over TCP on one pair, and when it is out of line
late_wire.py   flags withheld when the emulated wire was late during the re-tests
blame.py       a host or its links: the rule every diagnosis names culprits by
"""
