"""clustertune: evaluate, diagnose and tune clusters level by level."""

__version__ = "0.1.0"
