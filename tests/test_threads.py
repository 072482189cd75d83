"""Two Python threads sharing one Drive: no deadlock, no lost update.

The binding releases the GIL before it takes a drive's mutex, so a thread waiting for the
drive never holds the GIL a running command needs for its progress callback (or its Ctrl-C
check). Before that rule, the writer below blocked on the mutex while holding the GIL and
the preconditioning thread blocked on the GIL inside its progress callback: a deadlock.
The threads run in a child process so that a deadlock fails the test instead of hanging it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from twin import CM6

HAMMER = textwrap.dedent(
    """
    import sys, threading
    from ssdtwin import Drive
    from ssdtwin.fio import parse_string

    d = Drive.in_memory(sys.argv[1], scale=454, seed=1)
    ns = d.namespaces()[0]
    lba = ns.lba_bytes
    job = parse_string("[w]\\nrw=randwrite\\nbs=4k\\niodepth=8\\nsize=64m\\nnumber_ios=3000\\n", name="t.fio")
    specs = job.to_engine(ns.bytes, lba)
    errors = []
    progress_calls = [0]
    writes = [0]

    def progress(done, total, unit, now_ns):
        progress_calls[0] += 1

    def long_calls():
        try:
            for i in range(6):
                d.precondition(1, "rand", 4096, amount_bytes=256 << 20, seed=i + 1, progress=progress)
                out = d.run_fio(specs, progress=lambda done, total, unit, now: None)
                assert out[0]["write"]["total_ios"] == 3000, out[0]["write"]["total_ios"]
        except BaseException as e:
            errors.append(repr(e))

    def short_calls():
        try:
            for i in range(4000):
                d.write(1, (i * 64) % (ns.nsze - 64), 64)
                writes[0] += 1
                d.read(1, (i * 128) % (ns.nsze - 8), 8)
                d.smart_log()
                d.nvme.list()
        except BaseException as e:
            errors.append(repr(e))

    threads = [threading.Thread(target=long_calls), threading.Thread(target=short_calls)]
    before = d.smart_log()["host_write_commands"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert progress_calls[0] > 0
    d.check()
    after = d.smart_log()["host_write_commands"]
    print(after - before, writes[0])
    """
)


def test_two_threads_share_a_drive_without_deadlock() -> None:
    try:
        r = subprocess.run([sys.executable, "-c", HAMMER, CM6], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError("two threads sharing a Drive deadlocked (no progress in 60 s)") from None
    assert r.returncode == 0, r.stderr
    host_writes, short_writes = map(int, r.stdout.split())
    # Every host write command counts once: the fio writes, the preconditioning I/Os and
    # the other thread's writes (none lost to a race on the controller).
    assert short_writes == 4000
    assert host_writes >= 4000 + 6 * 3000


REENTER = textwrap.dedent(
    """
    import sys
    from ssdtwin.drive import Drive, SsdtwinError

    d = Drive.in_memory(sys.argv[1], scale=454, seed=1)
    uses = {"smart_log": d.smart_log, "write": lambda: d.write(1, 0, 8), "close": d.close}

    def progress(done, total, unit, now_ns):
        uses[sys.argv[2]]()

    try:
        d.precondition(1, "rand", 4096, amount_bytes=64 << 20, progress=progress)
    except SsdtwinError as e:
        print(e)
    d.check()  # the drive is still open and whole
    """
)


@pytest.mark.parametrize("use", ["smart_log", "write", "close"])
def test_a_progress_callback_using_its_own_drive_is_refused_not_a_hang(use: str) -> None:
    # The callback runs inside the call, which holds the drive: its own call waited for the
    # drive forever (Ctrl-C could not end it; only SIGKILL did).
    try:
        r = subprocess.run([sys.executable, "-c", REENTER, CM6, use], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"a progress callback calling {use} on its own drive hung") from None
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "the drive is in use by a call of this thread (a progress callback cannot use the drive it reports on)"
