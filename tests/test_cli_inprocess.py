"""The in-process CLI (tests/inprocess.py) gives what a subprocess gives, and leaves the test
process as it found it.

Most CLI tests run ``ssdtwin`` in the test process (``twin.run_cli``); these compare it with
a real start of the console script on the same commands: every exit status the CLI uses (0,
1 an error, 2 usage), help pages, one-line errors, JSON on stdout, notes on stderr, and a
child process's output (``waf -- CMD``). ``SSDTWIN_TEST_CLI=process`` runs the whole suite
the other way.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

import inprocess
from twin import SSDTWIN, copy_image, run_cli

CASES = {
    "version": ["--version"],
    "help": ["--help"],
    "group without a command (help, 2)": ["nvme"],
    "sub-command help": ["nvme", "create-ns", "--help"],
    "unknown command (2)": ["no-such-command"],
    "bad option value (1)": ["nvme", "id-ns", "{img}", "-n", "x"],
    "unknown option (2)": ["nvme", "list", "{img}", "--bogus"],
    "unknown preset (1)": ["models", "no-such-drive"],
    "not an image (1)": ["nvme", "list", "{tmp}"],
    "models": ["models"],
    "list, json": ["nvme", "list", "{img}", "-o", "json"],
    "id-ctrl": ["nvme", "id-ctrl", "{img}"],
    "smart-log, json": ["nvme", "smart-log", "{img}", "-o", "json"],
    "get-log hex dump": ["nvme", "get-log", "{img}", "-i", "2", "-l", "64"],
    "check": ["check", "{img}"],
    "a refused verb (1)": ["nvme", "delete-ns", "{img}", "-n", "9"],
    "waf runs a child process": ["waf", "{img}", "--", *SSDTWIN, "nvme", "list", "{img}"],
}


@pytest.mark.parametrize("args", CASES.values(), ids=CASES.keys())
def test_in_process_gives_what_a_subprocess_gives(small: Path, tmp_path: Path, args: list[str]) -> None:
    img = copy_image(small, tmp_path / "img")
    argv = [a.format(img=img, tmp=tmp_path) for a in args]
    here = run_cli(*argv, check=False)
    there = run_cli(*argv, check=False, process=True)
    assert (here.returncode, here.stdout, here.stderr) == (there.returncode, there.stdout, there.stderr)


def test_the_exit_statuses_are_the_interpreters() -> None:
    """What ``sys.exit`` and an escaping exception make of the status, as the interpreter does."""

    def run(main: object) -> tuple[int, str, str]:
        import ssdtwin.commands.cli as cli

        saved = cli.main
        cli.main = main  # type: ignore[assignment]
        try:
            return inprocess.run([])
        finally:
            cli.main = saved

    def exits(code: object) -> object:
        return lambda argv: sys.exit(code)

    def boom(argv: list[str]) -> None:
        raise RuntimeError("a bug")

    assert run(exits(None))[0] == 0
    assert run(exits(3))[0] == 3
    assert run(exits(256 + 7))[0] == 7
    assert run(exits("a message")) == (1, "", "a message\n")
    status, out, err = run(boom)
    assert status == 1 and out == "" and "Traceback" in err and err.rstrip().endswith("RuntimeError: a bug")


def test_a_command_leaves_the_process_as_it_found_it(small: Path, tmp_path: Path) -> None:
    """main installs its SIGINT handler, typer its excepthook, a writable open sets the
    Ctrl-C note: all put back, and fds 1 and 2 point where they did."""
    from ssdtwin.commands.common import Interrupt

    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.excepthook, dict(os.environ), os.getcwd())
    fds = (os.fstat(1).st_ino, os.fstat(2).st_ino)
    img = copy_image(small, tmp_path / "img")
    run_cli("nvme", "set-feature", img, "-f", "2", "-v", "1")  # writable: sets the Ctrl-C note
    run_cli("nvme", "list", tmp_path, check=False)  # an error
    after = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), sys.excepthook, dict(os.environ), os.getcwd())
    assert after == before
    assert (os.fstat(1).st_ino, os.fstat(2).st_ino) == fds
    assert (Interrupt.seen, Interrupt.note) == (False, "interrupted")


def test_a_ctrl_c_recorded_outside_a_command_does_not_end_the_next_one(small: Path) -> None:
    """A SIGINT that reached this process while the CLI's handler was installed, outside any
    command (a test of Ctrl-C on the Python API), records a Ctrl-C; the next command starts
    as a new process would, with none (it ended "interrupted", exit 130: a module fixture's
    `ssdtwin create` failed that way under `pytest -n 2`)."""
    from ssdtwin.commands.common import Interrupt

    Interrupt.seen = True
    try:
        r = run_cli("nvme", "list", small, check=False)
    finally:
        Interrupt.seen = False
    assert (r.returncode, "interrupted" in r.stderr) == (0, False), r.stderr
