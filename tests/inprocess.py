"""Run the ``ssdtwin`` CLI inside the test process, as a subprocess would see it.

Starting the console script costs ~0.15-0.3 s of CPU (the interpreter, typer, the package);
the suite ran it ~1,400 times (docs/performance.md, "CI time"). ``run`` calls
``ssdtwin.commands.cli.main(argv)`` in this process instead, and gives back what a parent
process would have seen:

* stdout and stderr at the file-descriptor level: fds 1 and 2 point at temporary files for
  the call, and ``sys.stdout``/``sys.stderr`` are fresh text streams on them, so Python's
  prints, ``sys.stdout.buffer`` writes, the Rust core's own writes to stderr and the output
  of any child process a command starts (``ssdtwin waf -- CMD``) land where they would in a
  subprocess, in order; decoded as ``subprocess.run(text=True)`` decodes (the locale's
  encoding, universal newlines);
* the exit status: ``SystemExit`` as the interpreter turns it into a status (None 0, an int
  mod 256, anything else printed and 1); an exception reaching the top is printed by the
  interpreter's hook with status 1, a KeyboardInterrupt reaching the top is status -2 (the
  interpreter re-raises SIGINT);
* stdin is empty (``subprocess.run`` without ``input`` hands the child the parent's stdin;
  the suite's is /dev/null or a pytest stand-in that refuses reads).

What a command changes in the process is put back afterwards: signal handlers (``main``
installs its SIGINT handler, a Ctrl-C path sets SIG_IGN, ``serve`` its SIGTERM one),
``sys.excepthook`` (typer installs its own), the ``Interrupt`` note, ``os.environ``, the
working directory, the root logger's handlers and level, warning filters, and the fio
iolog reader's cache.

The click command typer makes of the app is made once per process and kept (``typer``
builds it afresh on every call of ``app``, about half the CPU of a short in-process command:
docs/performance.md, "CI time"); a process that runs the CLI once builds it once too, and
click's commands keep no state between invocations (its own test runner reuses them). The
lazy sub-commands are built when first run, then kept with it.

Not for: start-up itself (imports, ``--version`` speed), real signals sent to a running
command, servers and anything that must outlive the call or run concurrently with the
test, and commands given their own environment (``env=``): those run as subprocesses
(``twin.run_cli(..., process=True)``).
"""

from __future__ import annotations

import contextlib
import io
import locale
import logging
import os
import signal
import sys
import tempfile
import traceback
import warnings
from typing import Any

_SIGNALS = [
    s
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGCHLD)
    if s is not None
]


def _exit_status(code: Any, stderr: io.TextIOBase) -> int:
    """What the interpreter makes of ``sys.exit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=stderr)
    return 1


def _text(data: bytes) -> str:
    """As ``subprocess.run(text=True)`` decodes a child's output."""
    return data.decode(locale.getpreferredencoding(False)).replace("\r\n", "\n").replace("\r", "\n")


class _Saved:
    """The process state a command may change, and putting it back."""

    def __init__(self) -> None:
        self.handlers = {s: signal.getsignal(s) for s in _SIGNALS}
        self.excepthook = sys.excepthook
        self.environ = dict(os.environ)
        self.cwd = os.getcwd()
        root = logging.getLogger()
        self.log_handlers = list(root.handlers)
        self.log_level = root.level
        self.streams = (sys.stdin, sys.stdout, sys.stderr)
        self.argv = sys.argv

    def restore(self) -> None:
        sys.stdin, sys.stdout, sys.stderr = self.streams
        sys.argv = self.argv
        for s, h in self.handlers.items():
            if signal.getsignal(s) is not h and h is not None:
                signal.signal(s, h)
        sys.excepthook = self.excepthook
        if dict(os.environ) != self.environ:
            os.environ.clear()
            os.environ.update(self.environ)
        if os.getcwd() != self.cwd:
            os.chdir(self.cwd)
        root = logging.getLogger()
        root.handlers[:] = self.log_handlers
        root.setLevel(self.log_level)
        _reset_package_state()


def _reset_package_state() -> None:
    common = sys.modules.get("ssdtwin.commands.common")
    if common is not None:
        common.Interrupt.seen = False
        common.Interrupt.by_sigterm = False
        common.Interrupt.note = "interrupted"
    iolog = sys.modules.get("ssdtwin.fio.iolog")
    cached = getattr(iolog, "_load_cached", None)
    if cached is not None:
        cached.cache_clear()


def _stream(fd: int, errors: str) -> io.TextIOWrapper:
    """A text stream on ``fd`` like the interpreter's own (unbuffered here: PYTHONUNBUFFERED)."""
    raw = io.FileIO(fd, "w", closefd=False)
    return io.TextIOWrapper(io.BufferedWriter(raw), encoding=locale.getpreferredencoding(False), errors=errors, write_through=True)


_app_command: list[Any] = []  # [the app's click command], once made


def _app_command_kept(get_command: Any, app: Any) -> Any:
    """typer.main.get_command for the call: the app's click command made once and kept; any
    other Typer's (the lazy sub-commands' holders) made as typer makes them."""

    def kept(typer_instance: Any) -> Any:
        if typer_instance is not app:
            return get_command(typer_instance)
        if not _app_command:
            _app_command.append(get_command(typer_instance))
        return _app_command[0]

    return kept


def run(argv: list[str]) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``ssdtwin ARGV`` run in this process."""
    import typer.main

    from ssdtwin.commands import cli

    saved = _Saved()
    get_command = typer.main.get_command
    # As a new process would, the command starts with no Ctrl-C recorded: a test that sent
    # this process a SIGINT outside a command (while a handler of the CLI's was installed)
    # would otherwise make the next command's end "interrupted", exit 130.
    _reset_package_state()
    for s in (sys.stdout, sys.stderr):
        s.flush()
    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        fd1, fd2 = os.dup(1), os.dup(2)
        os.dup2(out_file.fileno(), 1)
        os.dup2(err_file.fileno(), 2)
        stdout, stderr = _stream(1, "strict"), _stream(2, "backslashreplace")
        sys.stdout, sys.stderr = stdout, stderr
        sys.stdin = io.TextIOWrapper(io.BytesIO(b""), encoding=locale.getpreferredencoding(False))
        sys.argv = ["ssdtwin", *argv]
        typer.main.get_command = _app_command_kept(get_command, cli.app)
        try:
            with warnings.catch_warnings():
                _interpreter_warnings()
                status = _call(cli.main, argv, stderr)
        finally:
            for s in (stdout, stderr):
                with contextlib.suppress(OSError, ValueError):  # a command that closed its stream
                    s.flush()
            os.dup2(fd1, 1)
            os.dup2(fd2, 2)
            os.close(fd1)
            os.close(fd2)
            saved.restore()
            typer.main.get_command = get_command
        out_file.seek(0)
        err_file.seek(0)
        return status, _text(out_file.read()), _text(err_file.read())


def _interpreter_warnings() -> None:
    """The warning filters and printer of a plain ``python`` start (no -W, no dev mode), not
    pytest's capture: a warning a command raises is printed on its stderr, as in a subprocess."""
    warnings.resetwarnings()
    for category in (ResourceWarning, ImportWarning, PendingDeprecationWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category)
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")

    def show(msg: Any) -> None:
        sys.stderr.write(warnings._formatwarnmsg(msg))  # type: ignore[attr-defined]

    warnings._showwarnmsg_impl = show  # type: ignore[attr-defined]
    warnings.showwarning = warnings._showwarning_orig  # type: ignore[attr-defined]


def _call(main: Any, argv: list[str], stderr: io.TextIOWrapper) -> int:
    try:
        main(argv)
    except SystemExit as e:
        return _exit_status(e.code, stderr)
    except KeyboardInterrupt:
        traceback.print_exc(file=stderr)
        return -signal.SIGINT
    except BaseException:  # noqa: BLE001 - what the interpreter does with it: print, status 1
        sys.excepthook(*sys.exc_info())
        return 1
    return 0
