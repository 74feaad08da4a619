"""The first lines the ``precision`` command runs (its console script and ``python -m
precision``): before the command's modules import, and so before any handler exists, a
Ctrl-C or SIGTERM during those imports ends the command with one line and exit 130 (143),
not a traceback. Nothing is imported here but :mod:`sys` until the command's own module."""

from __future__ import annotations

import sys


def main() -> int:
    """Import the command (:mod:`precision.cli.main`) and run it; a stop while importing is
    one line."""
    try:
        from precision.cli.main import main as command
    except KeyboardInterrupt:
        print("precision: interrupted before the command started; nothing was done",
              file=sys.stderr)
        return 130
    return command()
