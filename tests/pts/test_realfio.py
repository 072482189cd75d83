"""RealFioTarget (pts/realfio.py): the PTS on real targets through the real fio.

An NBD export of a twin (`ssdtwin serve` on a fresh CM6 at 1/454), an nbdkit memory export
(not a twin: needs the destroy flag), regular files, a loop device when losetup works, and
every refusal: each must be one line and leave the target untouched. fio runs of 1 s.
Tests that need fio, nbdinfo, nbdkit or losetup skip with the reason when it is absent.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

import pytest

from ssdtwin.pts.realfio import RealFioTarget, _DeviceKind, _nvme_id_ctrl, _read_report, is_real_target, nbd_trim_job
from ssdtwin.pts.target import DeviceInfo, PtsError
from twin import CM6, SSDTWIN, free_port, run_cli

# The element body a PTS job has (the harness writes it); the target adds its own lines.
BODY = "[global]\ndirect=1\nsize=100%\ntime_based=1\nruntime=1\nrandrepeat=0\nrefill_buffers=1\n"


def need(*tools: str) -> None:
    for tool in tools:
        if shutil.which(tool) is None:
            pytest.skip(f"`{tool}` is not installed (CI installs fio, libnbd-bin and nbdkit)")


def wait_for_port(port: int, proc: subprocess.Popen[bytes], errfile: Path) -> None:
    t0 = time.monotonic()
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited {proc.returncode}:\n{errfile.read_text()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            assert time.monotonic() - t0 < 60, f"the server did not start:\n{errfile.read_text()}"
            time.sleep(0.05)


@contextmanager
def server(argv: list[str], port: int, errfile: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A server subprocess listening on ``port``; stopped by SIGTERM (a twin commits its state)."""
    with open(errfile, "w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
    try:
        wait_for_port(port, proc, errfile)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def served_twin(fresh: Path, tmp_path: Path) -> Iterator[str]:
    """`ssdtwin serve` on a fresh CM6 at 1/454, on TCP and on the unix socket tmp_path/nbd.sock;
    yields the TCP URI of ns1."""
    port = free_port()
    argv = [*SSDTWIN, "serve", str(fresh), "--listen", f"127.0.0.1:{port}", "--unix", str(tmp_path / "nbd.sock")]
    with server(argv, port, tmp_path / "serve.err") as proc:
        yield f"nbd://127.0.0.1:{port}/ns1"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, (tmp_path / "serve.err").read_text()


def one_line_error(excinfo: pytest.ExceptionInfo[PtsError]) -> str:
    msg = str(excinfo.value)
    assert msg and "\n" not in msg, repr(msg)
    return msg


def write_job(path: Path, target: RealFioTarget, element: str) -> Path:
    path.write_text(BODY + target.target_lines() + textwrap.dedent(element))
    return path


def map_totals(uri: str) -> dict[str, int]:
    """Bytes per allocation state ("data", "hole,zero") from the server's block status."""
    p = subprocess.run(["nbdinfo", "--map", "--totals", uri], capture_output=True, text=True, check=True, timeout=60)
    totals: dict[str, int] = {}
    for line in p.stdout.splitlines():
        size, _pct, _code, state = line.split(None, 3)
        totals[state] = int(size)
    return totals


def live_vendor_log(image: Path, done: Callable[[dict[str, Any]], bool], timeout_s: float = 30) -> dict[str, Any]:
    """The serving twin's vendor log (live.json, rewritten every second) once ``done`` holds."""
    t0 = time.monotonic()
    while True:
        log: dict[str, Any] = run_cli("nvme", "vendor-log", image, "-o", "json").json()
        if done(log) or time.monotonic() - t0 > timeout_s:
            return log
        time.sleep(0.2)


@pytest.mark.tools
def test_twin_over_nbd_purge_by_trim_then_a_round(served_twin: str, fresh: Path, tmp_path: Path) -> None:
    need("fio", "nbdinfo")
    uri = served_twin
    target = RealFioTarget(uri)  # a twin's export: no destroy flag needed
    info = target.info
    assert (info.kind, info.uri, info.simulated) == ("nbd", uri, False)
    assert (info.preset, info.scale, info.lba_bytes, info.extra["iu_bytes"]) == (CM6, "1/454", 512, 4096)
    assert info.capacity_bytes == 9_386_786_816  # the namespace: 18333568 LBAs of 512 B
    assert info.capacity_bytes % (1 << 30) != 0  # so the purge needs its tail request
    assert info.extra["fio"] == target.fio_version and target.fio_version.startswith("fio-")
    assert target.target_lines() == f"ioengine=nbd\nuri={uri}\n"
    unix_uri = f"nbd+unix:///ns1?socket={tmp_path / 'nbd.sock'}"  # the same export over the unix socket
    via_unix = RealFioTarget(unix_uri)
    assert via_unix.info.capacity_bytes == info.capacity_bytes and via_unix.target_lines() == f"ioengine=nbd\nuri={unix_uri}\n"

    # Write 64 MiB, then purge: every byte of the export must be deallocated again.
    fill = write_job(tmp_path / "fill.fio", target, "[fill]\nrw=write\nbs=128k\niodepth=8\nio_size=64m\ntime_based=0\n")
    report = target.run_fio(fill, tmp_path / "fill.json")
    assert report["jobs"][0]["write"]["io_bytes"] == 64 << 20
    assert map_totals(uri).get("data") == 64 << 20
    method = target.purge()
    assert method.startswith("TRIM of the whole range (9386786816 bytes"), method
    assert map_totals(uri) == {"hole,zero": info.capacity_bytes}
    # ... and in the model: every IU written was deallocated, nothing is mapped.
    log = live_vendor_log(fresh, lambda v: v["trimmed_ius"] > 0)
    assert (log["trimmed_ius"], log["valid_bytes"]) == ((64 << 20) // 4096, 0)

    # One 1-s round of a latency element: fio's json+ report, kept as pure JSON.
    job = write_job(tmp_path / "lat.fio", target, "[lat]\nrw=randrw\nrwmixread=65\nbs=4k\niodepth=1\nnumjobs=1\n")
    out = tmp_path / "r01-lat.json"
    report = target.run_fio(job, out)
    assert json.loads(out.read_text()) == report
    assert report["fio version"] == target.fio_version
    (j,) = report["jobs"]
    assert j["error"] == 0 and report["global options"]["uri"] == uri
    for ddir in ("read", "write"):
        assert j[ddir]["total_ios"] > 0 and j[ddir]["iops"] > 0
        clat = j[ddir]["clat_ns"]
        assert {"mean", "max", "percentile", "bins"} <= set(clat)  # json+: the histogram bins
        assert sum(clat["bins"].values()) == clat["N"] == j[ddir]["total_ios"]
    target.close()


@pytest.mark.tools
def test_nbd_export_not_served_by_ssdtwin_needs_the_flag(tmp_path: Path) -> None:
    need("fio", "nbdinfo", "nbdkit")
    port = free_port()
    argv = ["nbdkit", "-f", "-i", "127.0.0.1", "-p", str(port), "-e", "disk", "memory", "64M"]
    with server(argv, port, tmp_path / "nbdkit.err"):
        uri = f"nbd://127.0.0.1:{port}/disk"
        with pytest.raises(PtsError) as e:
            RealFioTarget(uri)
        assert "--yes-destroy-data" in one_line_error(e) and "ssdtwin serve" in str(e.value)
        assert map_totals(uri) == {"hole,zero": 64 << 20}  # nothing was written
        target = RealFioTarget(uri, allow_destroy=True)
        assert target.info.capacity_bytes == 64 << 20 and target.info.preset == "" and "iu_bytes" not in target.info.extra
        assert "fallback" in target.purge()
    # The server has gone: the next round fails with fio's own reason, on one line.
    job = write_job(tmp_path / "r.fio", target, "[r]\nrw=randread\nbs=4k\n")
    with pytest.raises(PtsError) as e:
        target.run_fio(job, tmp_path / "r.json")
    assert one_line_error(e).startswith(f"fio {job} failed (exit 1): ") and "Connection refused" in str(e.value)


@pytest.mark.tools
def test_unopenable_nbd_targets_are_one_line_errors(served_twin: str) -> None:
    need("fio", "nbdinfo")
    closed = f"nbd://127.0.0.1:{free_port()}/ns1"  # nobody listens there
    with pytest.raises(PtsError) as e:
        RealFioTarget(closed)
    assert one_line_error(e).startswith(f"{closed}: cannot open the NBD export: ") and "Connection refused" in str(e.value)

    unknown = served_twin.replace("/ns1", "/ns9")
    with pytest.raises(PtsError) as e:
        RealFioTarget(unknown)
    assert "ns9" in one_line_error(e) and "nbdinfo --list" in str(e.value)

    with pytest.raises(PtsError) as e:
        RealFioTarget(served_twin, purge="nvme-format")
    assert "NBD export" in one_line_error(e)


def test_missing_fio_is_one_line_error(tmp_path: Path) -> None:
    for fio in ("no-such-fio-binary", str(tmp_path / "bin" / "fio")):
        with pytest.raises(PtsError) as e:
            RealFioTarget("/dev/nonexistent", fio=fio)
        assert "apt-get install fio" in one_line_error(e) and fio in str(e.value)


def test_fio_without_the_engine_is_one_line_error(tmp_path: Path) -> None:
    """A fio built without libnbd (or libaio): refused before anything runs."""
    fake = tmp_path / "fio"
    fake.write_text('#!/bin/sh\ncase "$1" in --version) echo fio-3.33;; *) echo "IO engine not found"; exit 1;; esac\n')
    fake.chmod(0o755)
    with pytest.raises(PtsError) as e:
        RealFioTarget("nbd://127.0.0.1:1/ns1", fio=str(fake))
    assert one_line_error(e) == f"fio: {fake} (fio-3.33) has no nbd engine: it was built without libnbd (Debian's and Ubuntu's fio have it)"
    f = tmp_path / "disk.img"
    f.write_bytes(bytes(4096))
    with pytest.raises(PtsError) as e:
        RealFioTarget(str(f), fio=str(fake), allow_destroy=True)
    assert one_line_error(e) == f"fio: {fake} (fio-3.33) has no libaio engine: it was built without libaio"
    fake.write_text("#!/bin/sh\necho 'not fio'\n")
    with pytest.raises(PtsError) as e:
        RealFioTarget(str(f), fio=str(fake))
    assert one_line_error(e) == f"fio: {fake} --version printed 'not fio', not a fio version: is it fio?"


@pytest.mark.tools
@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/dev/nonexistent", "/dev/nonexistent: no such device"),
        ("/dev/null", "/dev/null: is a character device, not a block device"),
        ("/", "/: is a directory"),
    ],
)
def test_unopenable_paths_are_one_line_errors(path: str, expected: str) -> None:
    need("fio")
    with pytest.raises(PtsError) as e:
        RealFioTarget(path, allow_destroy=True)
    assert one_line_error(e).startswith(expected)


@pytest.mark.tools
def test_file_refused_without_the_flag_and_left_untouched(tmp_path: Path) -> None:
    need("fio")
    f = tmp_path / "disk.img"
    data = os.urandom(1 << 20)
    f.write_bytes(data)
    mtime = f.stat().st_mtime_ns
    with pytest.raises(PtsError) as e:
        RealFioTarget(str(f))
    refusal = f"{f}: refusing to write to a file without --yes-destroy-data"
    assert one_line_error(e) == refusal + " (the PTS overwrites and purges the whole range)"
    with pytest.raises(PtsError) as e:
        RealFioTarget(str(f), purge="nvme-format", allow_destroy=True)
    assert "regular file" in one_line_error(e)
    with pytest.raises(PtsError) as e:
        RealFioTarget(str(f), purge="secure-erase", allow_destroy=True)
    assert one_line_error(e) == "--purge 'secure-erase': expected one of auto, nvme-format, trim, none"
    assert f.read_bytes() == data and f.stat().st_mtime_ns == mtime

    empty = tmp_path / "empty.img"
    empty.touch()
    with pytest.raises(PtsError) as e:
        RealFioTarget(str(empty), allow_destroy=True)
    assert "the file is empty" in one_line_error(e)


@pytest.mark.tools
def test_file_target_purge_and_a_round(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need("fio")
    monkeypatch.chdir(tmp_path)  # relative job and report paths, as a user's --report folder
    f = tmp_path / "disk:1.img"  # a colon, which fio's filename= needs escaped
    f.write_bytes(os.urandom(8 << 20))
    target = RealFioTarget(str(f), allow_destroy=True, purge="trim")
    assert (target.info.kind, target.info.capacity_bytes) == ("file", 8 << 20)
    assert target.target_lines() == f"ioengine=libaio\nfilename={str(f).replace(':', chr(92) + ':')}\n"
    assert target.purge().startswith("file truncated to 0 and back to 8388608 bytes")
    assert f.stat().st_size == 8 << 20 and f.read_bytes() == bytes(8 << 20)
    job = write_job(tmp_path / "w.fio", target, "[w]\nrw=randwrite\nbs=4k\niodepth=4\nruntime=0.5\n")
    report = target.run_fio(Path(job.name), Path("w.json"))
    assert report == json.loads((tmp_path / "w.json").read_text())
    assert report["jobs"][0]["write"]["total_ios"] > 0 and report["global options"]["ioengine"] == "libaio"
    assert f.stat().st_size == 8 << 20 and f.read_bytes() != bytes(8 << 20)
    assert target.purge_method == "trim" and RealFioTarget(str(f), allow_destroy=True, purge="none").purge().startswith("none")


@pytest.mark.tools
def test_fio_failure_is_one_line_error(tmp_path: Path) -> None:
    need("fio")
    f = tmp_path / "disk.img"
    f.write_bytes(bytes(1 << 20))
    target = RealFioTarget(str(f), allow_destroy=True)
    job = write_job(tmp_path / "bad.fio", target, "[bad]\nrw=sideways\n")
    with pytest.raises(PtsError) as e:
        target.run_fio(job, tmp_path / "bad.json")
    assert one_line_error(e).startswith(f"fio {job} failed (exit 1): ") and "sideways" in str(e.value)


def test_report_with_notes_is_cleaned_and_job_errors_raise(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    doc = {"fio version": "fio-3.33", "jobs": [{"jobname": "a", "error": 0}]}
    out.write_text("fio: connected to NBD server\n" + json.dumps(doc, indent=1) + "\nfio: a trailing note\n")
    assert _read_report(out, "", "job.fio") == doc
    assert json.loads(out.read_text()) == doc  # the file now holds the JSON alone
    out.write_text(json.dumps({"jobs": [{"jobname": "a", "error": 5}]}))
    with pytest.raises(PtsError) as e:
        _read_report(out, "fio: io_u error on file x: Input/output error\n", "job.fio")
    assert one_line_error(e) == "fio job.fio: job 'a' failed: Input/output error: io_u error on file x: Input/output error"
    out.write_text("fio: no JSON at all\n")
    with pytest.raises(PtsError) as e:
        _read_report(out, "", "job.fio")
    assert "holds no JSON report" in one_line_error(e)


def test_nbd_trim_job_covers_the_export_exactly() -> None:
    def sections(text: str) -> list[dict[str, int]]:
        out: list[dict[str, int]] = []
        for block in text.split("\n[")[2:]:
            out.append({k: int(v) for k, v in (line.split("=") for line in block.splitlines()[1:] if line)})
        return out

    gib = 1 << 30
    for size in (9_386_786_816, 4 * gib, 512 << 20, gib + 512):
        parts = sections(nbd_trim_job("nbd://h/e", size))
        covered = [(p["offset"], p["offset"] + p["size"]) for p in parts]
        assert covered[0][0] == 0 and covered[-1][1] == size and all(a[1] == b[0] for a, b in zip(covered, covered[1:]))
        assert all(p["size"] % p["bs"] == 0 and p["bs"] <= gib for p in parts)


def test_is_real_target(tmp_path: Path) -> None:
    (tmp_path / "img").mkdir()
    (tmp_path / "file").write_bytes(b"x")
    assert is_real_target("nbd://127.0.0.1:10809/ns1") and is_real_target("nbd+unix:///ns1?socket=/s") and is_real_target("/dev/x")
    assert is_real_target(str(tmp_path / "file"))
    assert not is_real_target(str(tmp_path / "img")) and not is_real_target(str(tmp_path / "nothing"))


def start_long_fio(tmp_path: Path) -> subprocess.Popen[str]:
    """A harness-like process running a 60-s fio job on a file, returned once fio runs."""
    f = tmp_path / "disk.img"
    f.write_bytes(bytes(4 << 20))
    out = tmp_path / "long.json"
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from ssdtwin.pts.realfio import RealFioTarget
        t = RealFioTarget({str(f)!r}, allow_destroy=True)
        job = Path({str(tmp_path / "long.fio")!r})
        job.write_text({BODY!r}.replace("runtime=1", "runtime=60") + t.target_lines() + "[long]\\nrw=randread\\nbs=4k\\n")
        try:
            t.run_fio(job, Path({str(out)!r}))
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            raise
        """
    )
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    while not out.exists():  # fio opens its output file once it has parsed the job
        assert p.poll() is None and time.monotonic() - t0 < 30, p.communicate()
        time.sleep(0.05)
    time.sleep(1.0)
    return p


def fio_left(tmp_path: Path, wait_s: float) -> str:
    """The fio processes still running tmp_path's job after up to ``wait_s``."""
    t0 = time.monotonic()
    while True:
        left = subprocess.run(["pgrep", "-af", str(tmp_path / "long.fio")], capture_output=True, text=True).stdout
        if not left or time.monotonic() - t0 > wait_s:
            return left
        time.sleep(0.1)


@pytest.mark.tools
def test_ctrl_c_stops_fio_and_keeps_its_report(tmp_path: Path) -> None:
    need("fio", "pgrep")
    p = start_long_fio(tmp_path)
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    stdout, stderr = p.communicate(timeout=30)
    assert time.monotonic() - t0 < 20
    assert stdout == "interrupted\n" and stderr.rstrip().endswith("KeyboardInterrupt"), stderr
    assert fio_left(tmp_path, 0) == "", "fio still runs after Ctrl-C"
    report = json.loads((tmp_path / "long.json").read_text())  # fio's report of the run so far, notes removed
    assert 0 < report["jobs"][0]["read"]["runtime"] < 30_000


@pytest.mark.tools
def test_fio_stops_when_the_harness_is_killed(tmp_path: Path) -> None:
    """fio runs in its own session (shielded from the terminal), so a harness killed outright
    must take it along (PR_SET_PDEATHSIG), not leave it writing to the device for an hour."""
    need("fio", "pgrep")
    p = start_long_fio(tmp_path)
    assert fio_left(tmp_path, 0) != ""
    p.kill()
    p.communicate(timeout=30)
    left = fio_left(tmp_path, 20)
    for line in left.splitlines():  # do not leave them running if the test fails
        os.kill(int(line.split()[0]), signal.SIGKILL)
    assert left == "", "fio outlived the harness"


@pytest.mark.tools
def test_loop_device_refused_then_purged_by_discard(tmp_path: Path) -> None:
    need("fio", "losetup")
    backing = tmp_path / "loop.img"
    backing.write_bytes(os.urandom(16 << 20))
    p = subprocess.run(["losetup", "--find", "--show", str(backing)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"losetup cannot attach a loop device here: {p.stderr.strip()}")
    dev = p.stdout.strip()
    try:
        with pytest.raises(PtsError) as e:
            RealFioTarget(dev)
        assert one_line_error(e) == f"{dev}: refusing to write to a block device without --yes-destroy-data " + (
            "(the PTS overwrites and purges the whole range)"
        )
        target = RealFioTarget(dev, allow_destroy=True)
        assert (target.info.kind, target.info.capacity_bytes, target.info.interface) == ("device", 16 << 20, "loop device")
        assert target.target_lines() == f"ioengine=libaio\nfilename={dev}\n"
        assert target.info.extra["backing_file"] == str(backing) and target.info.extra["partition"] is False
        assert target.purge().startswith("TRIM of the whole range (16777216 bytes, BLKDISCARD")
        assert backing.read_bytes() == bytes(16 << 20)  # a loop device discards by punching holes
        job = write_job(tmp_path / "w.fio", target, "[w]\nrw=randwrite\nbs=4k\niodepth=4\nruntime=0.5\n")
        assert target.run_fio(job, tmp_path / "w.json")["jobs"][0]["write"]["total_ios"] > 0
        held = os.open(dev, os.O_RDONLY | os.O_EXCL)  # another program holds it (as a mount would)
        try:
            with pytest.raises(PtsError) as e:
                RealFioTarget(dev, allow_destroy=True)
            assert one_line_error(e).startswith(f"{dev}: is in use")
        finally:
            os.close(held)
    finally:
        subprocess.run(["losetup", "--detach", dev], check=False)


def fake_nvme(bin_dir: Path, id_ctrl: dict[str, object], format_rc: int = 0) -> Path:
    """An `nvme` on PATH that answers id-ctrl with ``id_ctrl`` and logs every call."""
    bin_dir.mkdir()
    log = bin_dir / "calls.log"
    script = bin_dir / "nvme"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {log}\n'
        f"if [ \"$1\" = id-ctrl ]; then echo '{json.dumps(id_ctrl)}'; exit 0; fi\n"
        f'if [ "$1" = format ]; then echo "NVMe status: INVALID_FORMAT" >&2; exit {format_rc}; fi\n'
        "exit 1\n"
    )
    script.chmod(0o755)
    return log


def nvme_namespace(tmp_path: Path, **attrs: object) -> _DeviceKind:
    """A _DeviceKind as the constructor leaves it for /dev/nvme0n1 (sysfs faked by attributes)."""
    kind = object.__new__(_DeviceKind)
    kind.path, kind.nvme, kind.is_partition, kind.discard_max_bytes = "/dev/nvme0n1", True, False, 512 << 20
    kind.disk_sysfs = tmp_path / "sys" / "nvme0n1"
    (kind.disk_sysfs / "device").mkdir(parents=True)
    kind.info = DeviceInfo(kind="device", uri="/dev/nvme0n1", capacity_bytes=1 << 30)
    for k, v in attrs.items():
        setattr(kind, k, v)
    return kind


def test_nvme_format_purge_and_when_it_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The NVMe decisions, with a fake nvme-cli: format when OACS allows it and no other
    namespace would be erased; TRIM (auto) or a one-line error (nvme-format) otherwise."""
    log = fake_nvme(tmp_path / "bin", {"vid": 0x1E0F, "mn": "KCM6XRUL3T84 ", "sn": "X1", "fr": "0107", "oacs": 0x5E, "fna": 0x4})
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    id_ctrl = _nvme_id_ctrl("/dev/nvme0n1")
    assert id_ctrl is not None and id_ctrl["mn"] == "KCM6XRUL3T84 "
    ns = nvme_namespace(tmp_path, id_ctrl=id_ctrl)
    ns.check_purge("nvme-format")
    assert ns.purge("auto", lambda job: {}) == "nvme format --ses=1 (User Data Erase)"
    assert log.read_text().splitlines() == ["id-ctrl /dev/nvme0n1 -o json", "format /dev/nvme0n1 --ses=1 --force"]

    refusals: dict[str, dict[str, object]] = {
        "the controller does not support Format NVM (OACS bit 1)": {"id_ctrl": {**id_ctrl, "oacs": 0x5C}},
        "/dev/nvme0n1 is a partition (a format erases the whole namespace)": {"is_partition": True},
        "the controller formats all its namespaces at once (FNA bit 0) and has more than one": {"id_ctrl": {**id_ctrl, "fna": 0x5}},
    }
    for i, (why, attrs) in enumerate(refusals.items()):
        ns = nvme_namespace(tmp_path / f"case{i}", **{"id_ctrl": id_ctrl, **attrs})
        if "FNA" in why:  # a second namespace on the controller
            (ns.disk_sysfs / "device" / "nvme0n1").mkdir()
            (ns.disk_sysfs / "device" / "nvme0n2").mkdir()
        with pytest.raises(PtsError) as e:
            ns.check_purge("nvme-format")
        assert one_line_error(e) == f"--purge nvme-format: {why}: use --purge trim or none"
        ns.check_purge("auto")  # falls back to TRIM: the device has discard
        ns.discard_max_bytes = 0
        with pytest.raises(PtsError) as e:
            ns.check_purge("auto")
        assert one_line_error(e).startswith(
            f"/dev/nvme0n1: the device does not support discard (TRIM) and nvme format is not possible ({why})"
        )

    failing = tmp_path / "failing"
    failing.mkdir()
    fake_nvme(failing / "bin", id_ctrl, format_rc=1)
    monkeypatch.setenv("PATH", f"{failing / 'bin'}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(PtsError) as e:
        nvme_namespace(failing, id_ctrl=id_ctrl).purge("nvme-format", lambda job: {})
    assert one_line_error(e) == "/dev/nvme0n1: nvme format --ses=1 failed: NVMe status: INVALID_FORMAT"
