"""Crash safety: a process killed with SIGKILL, mid-run or mid-commit, leaves an image that
opens at its last committed state, passes `ssdtwin check` (every FTL invariant) and can be
written again.

Commits write a whole new generation directory and then replace CURRENT atomically, so the
only states an image can be found in are "before" and "after" a commit, never in between.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from twin import SSDTWIN, image_digest, run_cli


def vendor(d: Path) -> dict:
    return run_cli("nvme", "vendor-log", d, "-o", "json").json()


def smart(d: Path) -> dict:
    return run_cli("nvme", "smart-log", d, "-o", "json").json()


def wait_for_lock(d: Path, pid: int, timeout: float = 30) -> None:
    """The image's LOCK holds the pid of the process that opened it writable."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            if (d / "LOCK").read_text().strip() == str(pid):
                return
        except FileNotFoundError:
            pass
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never locked {d}")


def test_kill_during_precondition_leaves_the_committed_state(cm6: Path) -> None:
    run_cli("precondition", cm6, "--seq", "128k", "--loops", "1", "--seed", "1", "-q")
    before = image_digest(cm6)
    v0, s0 = vendor(cm6), smart(cm6)
    rng = random.Random(20240611)
    for _ in range(3):
        # Far more work than the delay allows: the kill always lands mid-run.
        p = subprocess.Popen(
            [*SSDTWIN, "precondition", str(cm6), "--rand", "4k", "--amount", "100x", "-q"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_lock(cm6, p.pid)
        time.sleep(rng.uniform(0.05, 1.5))
        assert p.poll() is None, "precondition finished before it could be killed"
        p.send_signal(signal.SIGKILL)
        assert p.wait(timeout=30) == -signal.SIGKILL
        assert image_digest(cm6) == before, "a killed command changed the committed image"
        assert vendor(cm6) == v0 and smart(cm6) == s0
        run_cli("check", cm6)
    # And the image is writable again (the dead process's lock went with it).
    r = run_cli("precondition", cm6, "--rand", "4k", "--amount", "64MiB", "-q")
    assert "wrote 67.11 MB" in r.stdout
    assert vendor(cm6)["host_write_bytes"] == v0["host_write_bytes"] + (64 << 20)
    run_cli("check", cm6)


# A writer that commits in a loop; each step writes STEP bytes, so the committed host
# byte count tells which commit an image is at.
COMMITTER = textwrap.dedent(
    """
    import sys
    from ssdtwin import Drive
    path, step, seed0 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    d = Drive.open(path, writable=True)
    k = 0
    while True:
        k += 1
        d.precondition(1, "rand", 4096, amount_bytes=step, seed=seed0 + k)
        print(f"commit-start {k}", flush=True)
        d.commit()
        print(f"commit-done {k} {d.vendor_log()['host_write_bytes']}", flush=True)
    """
)


def test_kill_mid_commit_leaves_before_or_after(cm6: Path) -> None:
    """SIGKILL at random points inside commits: the image is always at the commit before or
    the one being made, checks clean, and the next writer cleans up the partial generation."""
    step = 16 << 20
    run_cli("precondition", cm6, "--seq", "128k", "--loops", "1", "--seed", "1", "-q")
    rng = random.Random(7)
    mid_commit_hits = 0
    rounds = 8
    for round_ in range(rounds):
        base = vendor(cm6)["host_write_bytes"]
        p = subprocess.Popen([sys.executable, "-c", COMMITTER, str(cm6), str(step), str(1000 * round_)], stdout=subprocess.PIPE, text=True)
        assert p.stdout is not None
        # Let a few commits go by to learn how long one takes, then kill inside a later one.
        durations = []
        target = 3 + rng.randrange(3)
        t_start = 0.0
        started = done = 0
        for line in p.stdout:
            word, k, *_ = line.split()
            if word == "commit-start":
                t_start, started = time.monotonic(), int(k)
                if started == target:
                    break
            else:
                durations.append(time.monotonic() - t_start)
                done = int(k)
        # The shortest commit seen: the kill lands in this commit or at worst in the next step.
        time.sleep(rng.uniform(0, min(durations)))
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        # Whatever the writer printed before it died says exactly where it was.
        for line in p.stdout.read().splitlines():
            word, k, *_ = line.split()
            if word == "commit-start":
                started = int(k)
            else:
                done = int(k)
        p.stdout.close()

        current = (cm6 / "CURRENT").read_text().strip()
        partial = sorted(x.name for x in cm6.iterdir() if x.name.startswith("gen-") and x.name > current)
        mid_commit_hits += bool(partial)
        written = vendor(cm6)["host_write_bytes"] - base
        assert written % step == 0, (round_, written)
        # The last commit that finished, or the one in progress if it got as far as
        # replacing CURRENT before the kill; never a partial generation.
        allowed = {done, started} if started > done else {done}
        assert written // step in allowed, (round_, started, done, written // step, partial)
        run_cli("check", cm6)
    print(f"{mid_commit_hits} of {rounds} kills inside a commit")
    assert mid_commit_hits >= 2, f"only {mid_commit_hits} of {rounds} kills landed inside a commit"
    # A writable open removes the partial generations; the image carries on.
    run_cli("precondition", cm6, "--rand", "4k", "--amount", "1MiB", "-q")
    gens = [x.name for x in cm6.iterdir() if x.name.startswith("gen-")]
    assert gens == [(cm6 / "CURRENT").read_text().strip()]
    run_cli("check", cm6)


def test_kill_during_create_leaves_no_image(tmp_path: Path) -> None:
    """A create killed before its manifest is written leaves a directory that is not (yet)
    an image: commands say so instead of reading half a drive."""
    rng = random.Random(3)
    for i in range(3):
        d = tmp_path / f"new{i}"
        p = subprocess.Popen(
            [*SSDTWIN, "create", str(d), "--model", "kioxia-cm6-r-3.84t", "--scale", "1/16"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while not d.exists() and p.poll() is None:
            time.sleep(0.001)
        time.sleep(rng.uniform(0, 0.05))
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        r = run_cli("nvme", "list", d, check=False)
        if (d / "ssdtwin.toml").exists():
            assert r.returncode == 0, r.stderr  # the kill came after the manifest: a full image
            run_cli("check", d)
        else:
            assert r.returncode == 1 and r.stderr.strip().endswith(f"{d} is not an ssdtwin drive image (no ssdtwin.toml)")
        assert os.path.isdir(d)
