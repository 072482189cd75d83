"""`ssdtwin pts --jobs N`: tests at once on a twin, each on an in-memory copy of the image
(docs/pts.md, Speed). A test's rows are the ones it gives when run alone on the image; the
image is left as it was; Ctrl-C stops every test and keeps what they did."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from ssdtwin.drive import Drive
from ssdtwin.pts.parallel import _parallel_worker
from ssdtwin.pts.settings import Settings
from twin import SSDTWIN, copy_image, image_digest, run_cli

MODEL = "kioxia-cm6-v-3.2t"
QUICK = ["--round", "1s", "--max-rounds", "5", "--lat-bs", "4k", "--lat-mixes", "100,0", "--wsat-fills", "0.5", "--no-render", "-q"]


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pts-par") / "cm6v"
    run_cli("create", d, "--model", MODEL, "--scale", "1/454")
    with_history = copy_image(d, d.parent / "used")
    run_cli("precondition", with_history, "--seq", "128k", "--rand", "4k", "--amount", "1x")  # wear and a GC state to start from
    return with_history


def test_parallel_tests_give_what_each_gives_alone(fresh: Path, tmp_path: Path) -> None:
    img = copy_image(fresh, tmp_path / "img")
    before = image_digest(img)
    par = tmp_path / "par"
    out = run_cli("pts", img, "--tests", "lat,wsat", *QUICK, "--jobs", "2", "--report", par, "-o", "json").json()
    assert image_digest(img) == before  # the image is not changed by a parallel run
    assert set(out["tests"]) == {"lat", "wsat"}
    man = json.loads((par / "pts.json").read_text())
    assert man["complete"] is True and man["settings"]["jobs"] == 2
    assert man["settings"]["purge"].startswith("twin: nvme format")
    for test in ("lat", "wsat"):
        alone = tmp_path / f"alone-{test}"
        copy = copy_image(fresh, tmp_path / f"img-{test}")
        run_cli("pts", copy, "--tests", test, *QUICK, "--report", alone)
        assert (par / test / "rounds.csv").read_bytes() == (alone / test / "rounds.csv").read_bytes(), test
        entry = json.loads((alone / "pts.json").read_text())["tests"][test]
        assert man["tests"][test]["status"] == entry["status"]
        assert man["tests"][test]["rounds_run"] == entry["rounds_run"] > 0  # the count pts.json records, with --jobs too
        assert man["tests"][test]["sim_s"] > 0 and man["tests"][test]["wall_s"] > 0


def test_jobs_refuses_an_image_another_process_is_writing(fresh: Path, tmp_path: Path) -> None:
    """Each test's process opens the image when it starts: beside a writer (ssdtwin serve)
    each would start from another state. Refused at once, one line, nothing written; and
    while a parallel run goes on, no writer can take the image."""
    from ssdtwin import Drive
    from ssdtwin.pts import parallel

    img = copy_image(fresh, tmp_path / "img")
    writer = Drive.open(img, writable=True)  # holds the image's lock, as a server does
    try:
        before = image_digest(img)
        # The CLI as a process of its own: the image is held by another process, this one.
        r = run_cli("pts", img, "--tests", "lat,tp", *QUICK, "--jobs", "2", "--report", tmp_path / "r", check=False, process=True)
        assert r.returncode == 1 and len(r.stderr_lines) == 1, r.stderr
        assert f"in use by another ssdtwin process (pid {os.getpid()}" in r.stderr and "--jobs 2" in r.stderr
        assert not (tmp_path / "r").exists() and image_digest(img) == before
    finally:
        writer.close()
    with parallel._no_writer(img, 2):
        r = run_cli("nvme", "set-feature", img, "-f", "8", "-v", "1", check=False, process=True)
        assert r.returncode == 1 and "in use by another ssdtwin process" in r.stderr
        with parallel._no_writer(img, 2):  # two parallel runs read the same image: fine
            pass
    assert image_digest(img) == before
    run_cli("check", img)


def test_a_test_that_would_start_from_a_later_generation_is_refused(fresh: Path, tmp_path: Path) -> None:
    # With --jobs each test opens the image read-only when it starts, the later ones when a
    # slot frees up: beside a writer committing the image (a served one) they started from
    # different states, while the report said "each on a copy of the image as it was".
    img = copy_image(fresh, tmp_path / "img")
    with Drive.open(img, writable=False) as d:
        started = d.generation()
    with Drive.open(img) as d:  # the writer commits after the run started
        d.precondition(1, "rand", 4096, amount_bytes=1 << 20, seed=9)
    messages: queue.Queue[tuple[Any, ...]] = queue.Queue()
    t0 = time.monotonic()
    _parallel_worker(str(img), None, Settings(), str(tmp_path / "rep"), "lat", messages, started)
    assert time.monotonic() - t0 < 10, "refused before running anything"
    (_, test, (entry, _)), (_, _, (method, (_, status, message))) = messages.get_nowait(), messages.get_nowait()
    assert messages.empty() and test == "lat" and entry == {"status": "failed", "message": message}
    assert (method, status) == ("test_done", "failed")
    assert f"moved from generation {started} (when the run started) to {started + 1}" in message and str(img) in message
    # (At the generation the run started from, the tests run: the test above.)


def test_jobs_needs_a_twin(tmp_path: Path) -> None:
    dev = tmp_path / "disk.img"
    dev.write_bytes(b"\x5a" * (1 << 20))
    r = run_cli("pts", dev, "--tests", "lat,tp", "--jobs", "2", "--yes-destroy-data", "--report", tmp_path / "r", check=False)
    assert r.returncode == 1 and len(r.stderr_lines) == 1 and "--jobs 2" in r.stderr and "twin" in r.stderr
    assert dev.read_bytes() == b"\x5a" * (1 << 20) and not (tmp_path / "r").exists()
    bad = run_cli("pts", tmp_path, "--tests", "lat", "--jobs", "0", "--report", tmp_path / "r", check=False)
    assert bad.returncode == 1 and "--jobs 0" in bad.stderr
    # A target that names nothing (a typo of an image's name) is that, not "a real target".
    typo = run_cli("pts", tmp_path / "cm6v", "--tests", "lat,tp", "--jobs", "2", "--report", tmp_path / "r", check=False)
    assert typo.returncode == 1 and len(typo.stderr_lines) == 1, typo.stderr
    assert "cm6v: no such drive image directory, block device, file or nbd:// URI" in typo.stderr and "--jobs" not in typo.stderr
    assert not (tmp_path / "r").exists() and not (tmp_path / "cm6v").exists()
    notimg = run_cli("pts", tmp_path, "--tests", "lat,tp", "--jobs", "2", "--report", tmp_path / "r", check=False)
    assert notimg.returncode == 1 and "a directory that is not a drive image" in notimg.stderr and "--jobs" not in notimg.stderr


def _interrupt_when_running(cmd: list[str], rep: Path, running: tuple[str, ...]) -> tuple[int, str]:
    """Run ``cmd``, SIGINT its parent process alone once every test of ``running`` has
    rounds; (exit status, stderr). A session of its own: whatever happens, no test process
    outlives the test (finally)."""
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        t0 = time.monotonic()
        while not all((rep / t / "rounds.csv").is_file() for t in running):
            assert p.poll() is None, p.communicate()
            assert time.monotonic() - t0 < 120, "no rounds within 120 s"
            time.sleep(0.05)
        p.send_signal(signal.SIGINT)  # the parent only: it passes the signal on to the tests' processes
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
    return p.returncode, err


def test_ctrl_c_stops_every_test(fresh: Path, tmp_path: Path) -> None:
    img = copy_image(fresh, tmp_path / "img")
    before = image_digest(img)
    rep = tmp_path / "r"
    argv = ["pts", str(img), "--tests", "wsat,hir", "--round", "1s", "--wsat-fills", "100", "--hir-pre-fills", "100"]
    rc, err = _interrupt_when_running([*SSDTWIN, *argv, "--jobs", "2", "--report", str(rep), "--no-render"], rep, ("wsat", "hir"))
    assert rc == 130, err
    man = json.loads((rep / "pts.json").read_text())
    assert man["interrupted"] is True and man["complete"] is False
    for test in ("wsat", "hir"):
        assert man["tests"][test]["status"] == "interrupted", man["tests"][test]
        assert json.loads((rep / test / "result.json").read_text())["status"] == "interrupted"
    assert image_digest(img) == before


def test_ctrl_c_with_tests_still_waiting_ends(fresh: Path, tmp_path: Path) -> None:
    """Three tests on two jobs: Ctrl-C while the third waits for a free job left the parent
    polling for ever (the tests it would no longer start kept its loop going), with the two
    running tests stopped, pts.json not marked interrupted and no exit."""
    img = copy_image(fresh, tmp_path / "img")
    rep = tmp_path / "r"
    argv = ["pts", str(img), "--tests", "wsat,hir,lat", "--round", "1s", "--wsat-fills", "100", "--hir-pre-fills", "100"]
    argv += ["--lat-bs", "4k", "--lat-mixes", "100,0", "--min-rounds", "25"]  # HIR and Latency start first (the costliest)
    rc, err = _interrupt_when_running([*SSDTWIN, *argv, "--jobs", "2", "--report", str(rep), "--no-render"], rep, ("hir", "lat"))
    assert rc == 130, err
    man = json.loads((rep / "pts.json").read_text())
    assert man["interrupted"] is True
    assert {t: man["tests"][t]["status"] for t in ("hir", "lat", "wsat")} == {"hir": "interrupted", "lat": "interrupted", "wsat": "not run"}


def test_the_costliest_tests_start_first() -> None:
    """With --jobs 2 the suite ends with its longest test (HIR's timed bursts, then the IOPS
    test's mixes) only if that one starts at once, not after the short tests."""
    from ssdtwin.pts.parallel import costliest_first

    assert costliest_first(["iops", "tp", "lat", "wsat", "hir"]) == ["hir", "iops", "tp", "lat", "wsat"]
    assert costliest_first(["lat", "curve", "xsr"]) == ["xsr", "curve", "lat"]
