"""Progress with an ETA on long runs (python/ssdtwin/commands/progress.py, docs/cli.md "Progress").

A long run draws one line on stderr when stderr is a terminal: the percentage done of a
total known in advance (here 4 PB: `rw=read bs=1m size=4m loops=1000000000`, fio's
io_size × loops) and rich's ETA; on a pipe it draws nothing, and stdout carries only the
command's output. The tests run the CLI with stderr on a pseudo-terminal (the pty module).
The core's reports change nothing: a run gives the same results watched or not.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import re
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ssdtwin import Drive
from twin import CM6, SSDTWIN, run_cli

HUGE_JOB = "[huge]\nrw=read\nbs=1m\nsize=4m\nloops=1000000000\n"
SHORT_JOB = "[short]\nrw=randwrite\nbs=4k\nsize=64m\n"
#: The ETA column: rich's time remaining, H:MM:SS (with days for a long job).
ETA = re.compile(r"ETA (\d+ days?, )?\d+:\d\d:\d\d")
PERCENT = re.compile(r"\d+\.\d\d%")
#: rich's colours and cursor moves.
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def on_pty(argv: list[str], seconds: float, interrupt: bool) -> tuple[int, str, str]:
    """Run ssdtwin with stderr on a pseudo-terminal and stdout on a pipe; what the terminal
    showed after `seconds` (then SIGINT, as Ctrl-C, if `interrupt`; colours and cursor moves
    taken out), the exit status and stdout.

    The terminal is read until the process exits: a pty nobody reads fills, and a command
    blocked writing its progress (or its "interrupted" line) to it would never exit. A
    process still running 120 s after the signal is killed, so a failing test leaves none
    behind."""
    master, slave = pty.openpty()
    p = subprocess.Popen([*SSDTWIN, *argv], stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    shown = bytearray()
    out = bytearray()
    stdout_fd = p.stdout.fileno() if p.stdout else -1
    try:
        shown += _read_while_running(p, master, stdout_fd, out, seconds)
        if interrupt and p.poll() is None:
            p.send_signal(signal.SIGINT)
        shown += _read_while_running(p, master, stdout_fd, out, 120)
        if p.poll() is None:
            raise AssertionError(f"ssdtwin {' '.join(argv)} still running 120 s after the signal: {bytes(shown[-2000:])!r}")
        shown += _read_while_running(p, master, stdout_fd, out, 0.2)  # what it wrote last
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
        if p.stdout:
            p.stdout.close()
        os.close(master)
    return p.returncode, ESCAPES.sub("", shown.decode("utf-8", "replace")), out.decode()


def _read_while_running(p: subprocess.Popen[bytes], master: int, stdout_fd: int, out: bytearray, seconds: float) -> bytes:
    """Read the terminal and stdout for up to `seconds`, or until the process has exited and
    both are drained; what the terminal showed (stdout is appended to `out`)."""
    shown = bytearray()
    fds = [master, stdout_fd]
    t0 = time.monotonic()
    while fds and time.monotonic() - t0 < seconds:
        ready = select.select(fds, [], [], 0.1)[0]
        if not ready and p.poll() is not None:
            break
        for fd in ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the terminal's last writer has gone
                chunk = b""
            if not chunk:
                fds.remove(fd)
            elif fd == master:
                shown += chunk
            else:
                out += chunk
    if not fds:  # both closed: the process is exiting
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.0, seconds - (time.monotonic() - t0)))
    return bytes(shown)


@pytest.fixture
def huge_job(tmp_path: Path) -> Path:
    job = tmp_path / "huge.fio"
    job.write_text(HUGE_JOB)
    return job


def test_a_4_pb_job_shows_percent_and_eta_on_a_terminal_and_ctrl_c_exits_130(fresh: Path, huge_job: Path) -> None:
    rc, shown, out = on_pty(["fio", str(fresh), str(huge_job), "--scratch"], seconds=8, interrupt=True)
    assert rc == 130, shown[-2000:]
    assert PERCENT.search(shown), f"no percentage on the terminal: {shown[-2000:]!r}"
    assert ETA.search(shown), f"no ETA on the terminal: {shown[-2000:]!r}"
    assert "of 4.19 PB" in shown, "the total is io_size x loops, known before the run"
    assert out == "", "the progress line never goes to stdout"


def test_nothing_is_drawn_on_a_pipe(fresh: Path, tmp_path: Path) -> None:
    job = tmp_path / "short.fio"
    job.write_text(SHORT_JOB)
    p = subprocess.run([*SSDTWIN, "fio", str(fresh), str(job), "--output-format=json", "--scratch"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["jobs"][0]["write"]["io_bytes"] == 64 << 20
    assert not PERCENT.search(p.stderr) and "ETA" not in p.stderr, p.stderr


def test_json_stdout_stays_json_while_the_terminal_shows_progress(fresh: Path, tmp_path: Path) -> None:
    job = tmp_path / "short.fio"
    job.write_text(SHORT_JOB)
    rc, shown, out = on_pty(["fio", str(fresh), str(job), "--output-format=json", "--scratch"], seconds=120, interrupt=False)
    assert rc == 0, shown
    assert json.loads(out)["jobs"][0]["write"]["io_bytes"] == 64 << 20, "stdout is one JSON document"
    assert "ssdtwin fio:" in shown, "stderr is the terminal"


def test_precondition_shows_bytes_of_the_amount(tmp_path: Path) -> None:
    d = tmp_path / "cm6"
    run_cli("create", d, "--model", CM6, "--scale", "1/64")
    rc, shown, out = on_pty(["precondition", str(d), "--seq", "128k", "--loops", "4"], seconds=600, interrupt=False)
    assert rc == 0, shown
    assert PERCENT.search(shown) and "of 242.09 GB" in shown, f"4 loops of the 60.52 GB namespace: {shown[-1500:]!r}"
    assert out.startswith(" seq 128k: wrote"), "the result on stdout, the progress on the terminal"


def test_progress_reports_change_nothing_and_count_to_the_total(tmp_path: Path) -> None:
    """Bytes of io_size x loops, rising to the total; the same results with or without a
    callback (the core reads its state to report, nothing else)."""
    from ssdtwin.fio.run import run_jobs

    job = tmp_path / "j.fio"
    job.write_text("[j]\nrw=randwrite\nbs=4k\nsize=256m\niodepth=8\n")

    def run(progress: object) -> list[dict[str, object]]:
        d = Drive.in_memory(CM6, scale=454)
        try:
            return run_jobs(d, [str(job)], run_seed=1, progress=progress)[1]
        finally:
            d.close()

    seen: list[tuple[int, int, str, int]] = []
    watched = run(lambda *a: seen.append(a))
    assert watched == run(None)
    assert seen, "a run of 65,536 events or more reports"
    assert {(t, u) for _, t, u, _ in seen} == {(256 << 20, "bytes")}
    dones = [d for d, *_ in seen]
    assert dones == sorted(dones) and 0 < dones[-1] <= 256 << 20
