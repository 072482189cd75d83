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


def open_standard_descriptors() -> None:
    """Point a closed (or wrongly opened) stdin, stdout or stderr at /dev/null before any
    command runs. Started with stderr closed (`2>&-`), Python leaves sys.stderr None, so
    print() to it writes to stdout (notes in the middle of `-o json`), and the lowest free
    descriptor is the next file opened, so an image file or a socket could become
    descriptor 2; through a launcher that leaves a read-only file there (pyenv's shims do),
    the first message failed (EBADF) and the command exited 1 without a word. Every
    command now runs as usual, its messages going nowhere."""
    import fcntl  # a built-in module: nothing of ours runs before the descriptors are usable

    for fd, modes in ((0, (os.O_RDONLY, os.O_RDWR)), (1, (os.O_WRONLY, os.O_RDWR)), (2, (os.O_WRONLY, os.O_RDWR))):
        try:
            usable = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE in modes
        except OSError:  # closed
            usable = False
        if usable:
            continue
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        replacement = open(os.devnull, "r" if fd == 0 else "w")  # noqa: SIM115  (the process's stream from now on)
        # Python left the stream None (print() then goes nowhere or to stdout) or bound to
        # the descriptor that failed.
        if fd == 0:
            sys.stdin = replacement
        elif fd == 1:
            sys.stdout = replacement
        else:
            sys.stderr = replacement


def main() -> None:
    try:
        open_standard_descriptors()
        from .cli import main as cli_main
    except KeyboardInterrupt:
        _interrupted()
    try:
        cli_main()
    except KeyboardInterrupt:
        # Only before cli.main has installed its handler (it reads its arguments first):
        # from then on it turns a Ctrl-C into its own line and exit 130 itself.
        _interrupted()
