"""The ``ssdtwin`` console script's target: a Ctrl-C while the CLI is still starting exits 130
with one line, like a Ctrl-C at any later moment (docs/cli.md, "Ctrl-C and SIGTERM").

The CLI installs its SIGINT handler in ``cli.main``, once typer and the compiled core are
imported (~0.15 s). A Ctrl-C before that raised KeyboardInterrupt out of an import and
Python printed its traceback. This module's body imports only ``os`` and ``sys``, which the
interpreter has loaded before any script runs, so what comes before the ``try`` in ``main``
is the interpreter's own start-up (site and the ``.pth`` files of site-packages, then the
console script finding this module), which no code of ours can cover: an interrupt there
ends the process by SIGINT before Python has a handler, or with Python's own traceback once
it has one.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # as in ssdtwin/__init__.py: no `typing` before main's `try`
if TYPE_CHECKING:
    from typing import NoReturn


def _interrupted() -> NoReturn:
    import contextlib
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the line short
    with contextlib.suppress(OSError, ValueError):  # stderr closed: the exit status still says it
        print("ssdtwin: interrupted while starting; nothing was changed", file=sys.stderr, flush=True)
    # Not sys.exit: an interrupt that lands in code an import runs through exec() of a string
    # (dataclasses and namedtuple build methods so) leaves CPython set to end by re-raising
    # SIGINT at exit whatever the status (seen: -2 after the line above). Nothing has been
    # opened or written yet, so there is nothing to clean up.
    os._exit(130)


def main() -> None:
    try:
        from .cli import main as cli_main
    except KeyboardInterrupt:
        _interrupted()
    try:
        cli_main()
    except KeyboardInterrupt:
        # Only before cli.main has installed its handler (it reads its arguments first):
        # from then on it turns a Ctrl-C into its own line and exit 130 itself.
        _interrupted()
