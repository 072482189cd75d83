"""`ssdtwin serve STACKDIR` (docs/host.md "Serving a stack"): the real fio
over NBD against a served stack agrees with `ssdtwin fio` on the same stack in simulated
time (the stack's end-to-end WAF and the drive's WAF within 5 %), what a client writes it
reads back, and bad input is refused in one line with the images untouched.

The drive is the P5316 at 1/256 in the whitepaper's random state (as tests/test_serve.py);
the tiers are small (1 MiB) so that what the served stack still destages after the client
stops (down to its low watermark, which a simulated run's end does not start) is under 1 %
of the bytes written.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from ssdtwin import _core
from test_bad_input import assert_one_line_error
from test_serve import fio_nbd_write, need, served, sh
from twin import CM6, P5316, SSDTWIN, check_image, copy_image, image_digest, run_cli

pytestmark = pytest.mark.tools

# Both policies with a 1 MiB tier: iu-fill's minimum is 16 IUs; log's 4 stripes, so its
# stripe is one 64 KiB IU (and a 1 GiB host-mapped area keeps its map small).
POLICIES = {
    "iu-fill": ["--shaping", "pmem:1MiB", "--policy", "iu-fill"],
    "log": ["--shaping", "pmem:1MiB", "--policy", "log", "--stripe", "64KiB", "--area", "1GiB"],
}


@pytest.fixture(scope="module")
def p5316_random(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """P5316 at 1/256 preconditioned as the whitepaper says (tests/test_serve.py)."""
    d = tmp_path_factory.mktemp("p5316") / "p5316"
    run_cli("create", d, "--model", P5316, "--scale", "1/256")
    run_cli("precondition", d, "--seq", "128k", "--loops", "1", "--rand", "1m", "--amount", "2x", "--seed", "5", "-q")
    check_image(d)
    return d


def make_stack(tmp_path: Path, template: Path, name: str, policy: str) -> tuple[Path, Path]:
    drive = copy_image(template, tmp_path / f"{name}-drive")
    stack = tmp_path / f"{name}-stack"
    run_cli("stack", stack, "--drive", drive, *POLICIES[policy])
    return drive, stack


def counters(stack: Path) -> dict[str, Any]:
    return run_cli("stack", stack, "--show", "-o", "json").json()


# Per job of 4; `make stack-serve` runs the same test with more (SSDTWIN_STACK_SERVE_IO).
IO_PER_JOB = os.environ.get("SSDTWIN_STACK_SERVE_IO", "16m")


def randwrite_job(uri: str) -> str:
    # 4 jobs x QD32 of 4 KiB random writes over the whole volume, 64 MiB in all: the
    # whitepaper's job (tests/test_serve.py) through the tier.
    return f"[global]\nioengine=nbd\nuri={uri}\ngroup_reporting\n[w]\nrw=randwrite\nbs=4k\niodepth=32\nnumjobs=4\nio_size={IO_PER_JOB}\n"


@pytest.mark.parametrize("policy", ["iu-fill", "log"])
def test_real_fio_over_a_served_stack_agrees_with_ssdtwin_fio(tmp_path: Path, p5316_random: Path, policy: str) -> None:
    need("fio")
    sim_drive, sim = make_stack(tmp_path, p5316_random, "sim", policy)
    real_drive, real = make_stack(tmp_path, p5316_random, "real", policy)
    job = tmp_path / "w.fio"
    job.write_text(randwrite_job("nbd://unused/stack"))
    # No background GC in idle gaps on either side: a simulated run ends with its jobs,
    # while a server idles from the client's last request to its stop (hundreds of ms,
    # in which the drive's GC would add NAND writes the simulated run never sees).
    run_cli("fio", sim, job, "--no-idle-gc", "--output", tmp_path / "sim.txt")
    c_sim = counters(sim)
    with served(real, "--no-idle-gc") as s:
        job.write_text(randwrite_job(s.uri("stack")))
        t0 = time.monotonic()
        sh("fio", job, f"--output={tmp_path / 'real.txt'}")
        wall = time.monotonic() - t0
        summary = s.stop()
    c_real = counters(real)
    assert c_real["host_write_bytes"] == c_sim["host_write_bytes"] == 4 * _core.parse_size(IO_PER_JOB)
    assert c_real["drive_host_write_bytes"] == c_real["stack_drive_write_bytes"], "every drive write came from the stack"
    # The same window on both sides: its ratios compare like with like whatever it spans.
    figures = {k: (c_real[k], c_sim[k]) for k in ("tier_waf", "drive_waf_window_raw", "end_to_end_waf_window_raw")}
    print(
        f"\n{policy} pmem:1MiB over P5316 1/256 (random state), 4 KiB randwrite 4x32, io_size={IO_PER_JOB} per job: "
        + ", ".join(f"{k} real fio over NBD {a:.3f}, ssdtwin fio {b:.3f} ({a / b - 1:+.2%})" for k, (a, b) in figures.items())
        + f"; {wall:.1f} s\n{summary}"
    )
    for k in ("drive_waf_window_raw", "end_to_end_waf_window_raw"):
        a, b = figures[k]
        assert abs(a / b - 1) < 0.05, f"{k}: real {a:.3f} vs simulated {b:.3f}"
    # The job is past the tier and through the drive's GC: a WAF only the model explains.
    assert c_sim["end_to_end_waf_window_raw"] > 2
    check_image(real_drive)
    check_image(sim_drive)


def verify_job(uri: str, verify_only: bool) -> list[str]:
    # Mixed sizes: 4 KiB writes go through the tier, 64 KiB ones are whole IUs (iu-fill
    # sends them straight to the drive); crc32c headers in every block; end_fsync = FLUSH.
    return [
        "fio",
        "--name=v",
        "--ioengine=nbd",
        f"--uri={uri}",
        "--rw=randwrite",
        "--bssplit=4k/70:64k/30",
        "--size=64m",
        "--iodepth=8",
        "--verify=crc32c",
        "--do_verify=1",
        "--verify_fatal=1",
        "--randrepeat=1",
        "--end_fsync=1",
        *(["--verify_only=1"] if verify_only else []),
    ]


@pytest.mark.parametrize("policy", ["iu-fill", "log"])
def test_what_a_client_writes_through_the_stack_it_reads_back(tmp_path: Path, p5316_random: Path, policy: str) -> None:
    need("fio")
    drive, stack = make_stack(tmp_path, p5316_random, "v", policy)
    with served(stack) as s:
        sh(*verify_job(s.uri("stack"), verify_only=False), cwd=tmp_path)  # write, then read back and verify
        # Ctrl-C: a clean stop (drive, then stack committed) that exits 130.
        s.p.send_signal(signal.SIGINT)
        assert s.p.wait(timeout=120) == 130, s.stderr
        assert "interrupted; " in s.stderr and "stack " in s.stderr, s.stderr
    c = counters(stack)
    assert c["host_write_bytes"] >= 64 << 20 and c["stack_drive_write_bytes"] > 0
    assert c["host_read_bytes"] >= 64 << 20
    # After a clean stop and a new server: the committed stack still reads back what was
    # written (the tier's newest copies and the destaged ones alike).
    with served(stack, "-o", "json") as s:
        sh(*verify_job(s.uri("stack"), verify_only=True), cwd=tmp_path)
        info = json.loads(sh("nbdinfo", "--json", s.uri("stack")).stdout)["exports"][0] if _has("nbdinfo") else None
        s.stop()
    # -o json: the stack's counters as `stack --show -o json` has them after the session, and
    # one export row, the volume's (the drive's exports served nothing).
    j = json.loads(s.stdout)
    assert j["stack"] == counters(stack) and [r["export"] for r in j["namespaces"]] == ["stack"] and j["reads"] > 0, j
    assert j["namespaces"][0]["read_bytes"] == j["read_bytes"], j
    if info is not None:
        assert info["export-size"] == c["user_bytes"] and info["block_size_minimum"] == 4096
    check_image(drive)


def _has(tool: str) -> bool:
    import shutil

    return shutil.which(tool) is not None


def test_bad_stacks_are_refused_in_one_line(tmp_path: Path, p5316_random: Path) -> None:
    drive, stack = make_stack(tmp_path, p5316_random, "bad", "iu-fill")
    before = (image_digest(drive), (stack / "state.json").read_bytes())
    r = run_cli("serve", stack, "--listen", "127.0.0.1:0", "--pace", "off", check=False)
    assert_one_line_error(r, "--pace off", "model")
    # The drive changed underneath the stack: refused, as `ssdtwin fio` refuses it.
    job = tmp_path / "w.fio"
    job.write_text("[w]\nrw=randwrite\nbs=4k\nio_size=4m\nsize=1g\n")
    run_cli("fio", drive, job)
    changed = (image_digest(drive), (stack / "state.json").read_bytes())
    r = run_cli("serve", stack, "--listen", "127.0.0.1:0", check=False)
    assert_one_line_error(r, str(stack), "changed since the stack last ran")
    assert (image_digest(drive), (stack / "state.json").read_bytes()) == changed != before
    # A stack whose drive is gone.
    gone = tmp_path / "gone"
    drive.rename(gone)
    r = run_cli("serve", stack, "--listen", "127.0.0.1:0", check=False)
    assert_one_line_error(r, "missing")
    gone.rename(drive)
    # Not a readable stack image.
    (stack / "state.json").write_text("{")
    r = run_cli("serve", stack, "--listen", "127.0.0.1:0", check=False)
    assert_one_line_error(r, f"{stack / 'state.json'}: not JSON (", "a damaged stack image")


def test_a_killed_stack_server_leaves_a_recoverable_drive_and_a_refused_stack(tmp_path: Path, p5316_random: Path) -> None:
    """docs/host.md, Stopping: a killed server's drive recovers from its journal; the stack,
    whose state.json is older than its drive, is refused in one line that says why (it
    named only writes, trims and formats "without the stack"), and keeps its counters."""
    need("fio")
    drive, stack = make_stack(tmp_path, p5316_random, "killed", "log")
    before = (counters(stack), (stack / "state.json").read_bytes())
    with served(stack) as s:
        fio_nbd_write(s.uri("stack"), tmp_path / "w.txt", "4m")
        s.p.kill()
        s.p.wait()
    check_image(drive)
    job = tmp_path / "w.fio"
    job.write_text("[w]\nrw=randwrite\nbs=4k\nio_size=1m\nsize=64m\n")
    r = run_cli("fio", stack, job, check=False)
    assert_one_line_error(r, "changed since the stack last ran", "a server of the stack that did not stop cleanly")
    assert (counters(stack), (stack / "state.json").read_bytes()) == before


@pytest.mark.parametrize(
    "setting, needle",
    [
        (["-f", "1", "-v", "0x01020300"], "weighted round robin"),  # feature 01h weights: WRR
        (["-f", "0x84", "-v", "1", "-n", "1"], "write protected"),  # namespace write protect
    ],
)
def test_a_stack_whose_drive_cannot_carry_it_is_refused_before_the_drive_is_opened(tmp_path: Path, setting: list[str], needle: str) -> None:
    """docs/host.md, Stopping: refused in one line, nothing written. The server opened the
    drive for writing first and refused it after: a new generation, a data file and
    live.json appeared on a drive whose stack was never served."""
    drive, stack = tmp_path / "cm6", tmp_path / "stack"
    run_cli("create", drive, "--model", CM6, "--scale", "1/454")
    run_cli("stack", stack, "--drive", drive, "--shaping", "pmem:1MiB")
    run_cli("nvme", "set-feature", drive, *setting)
    before = (image_digest(drive), image_digest(stack))
    r = run_cli("serve", stack, "--listen", "127.0.0.1:0", check=False)
    assert_one_line_error(r, needle)
    assert (image_digest(drive), image_digest(stack)) == before
    check_image(drive)


def test_a_stack_served_with_its_stderr_gone_still_saves_its_state(tmp_path: Path) -> None:
    """A stack's state.json was saved after the summary was printed: with stderr a pipe
    whose reader had gone (`ssdtwin serve STACK 2>&1 | head`, a closed log), the clean stop
    committed the drive, failed printing (BrokenPipeError) and never saved the stack, which
    was then refused for good as "changed since the stack last ran"."""
    need("fio")
    drive, stack = tmp_path / "cm6", tmp_path / "stack"
    run_cli("create", drive, "--model", CM6, "--scale", "1/454")
    run_cli("stack", stack, "--drive", drive, "--shaping", "pmem:1MiB")
    p = subprocess.Popen(
        [*SSDTWIN, "serve", str(stack), "--listen", "127.0.0.1:0"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        assert p.stderr is not None
        uri = ""
        for line in p.stderr:
            uri = uri or next((w for w in line.split() if w.startswith("nbd://")), "")
            if "stops it" in line:
                break
        assert uri, "no export URI"
        p.stderr.close()  # the reader goes away
        fio_nbd_write(uri, tmp_path / "w.txt", "1m")
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=120) == 0  # SIGTERM: a clean stop, whether or not it was heard
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert counters(stack)["host_write_bytes"] == 1 << 20
    job = tmp_path / "w.fio"
    job.write_text("[w]\nrw=randwrite\nbs=4k\nio_size=64k\nsize=1m\n")
    run_cli("fio", stack, job)  # not refused: the stack ran last on its drive
    check_image(drive)


def test_live_json_shows_the_served_volume_and_its_counters_while_serving(tmp_path: Path) -> None:
    """While a stack was served, live.json listed the drive's `ns1` as the export and an ns1
    row of zeroes whatever the clients did (the volume's commands were counted for no export),
    and the summary at exit had no row at all. It shows the volume, `stack`, with its counters."""
    need("qemu-io")
    drive, stack = tmp_path / "cm6", tmp_path / "stack"
    run_cli("create", drive, "--model", CM6, "--scale", "1/454")
    run_cli("stack", stack, "--drive", drive, "--shaping", "pmem:1MiB")
    user_bytes = counters(stack)["user_bytes"]
    with served(stack, "-o", "json") as s:
        sh("qemu-io", "-f", "raw", s.uri("stack"), "-c", "write 0 256k", "-c", "read 0 64k", "-c", "discard 1M 64k")
        t0 = time.monotonic()
        while (live := json.loads((drive / "live.json").read_text()))["stats"]["trims"] < 1:
            assert time.monotonic() - t0 < 30, live["stats"]
            time.sleep(0.1)
        assert live["serving"] and live["exports"] == [{"name": "stack", "nsid": 1, "size": user_bytes, "read_only": False}], live
        row = {"nsid": 1, "export": "stack", "reads": 1, "writes": 1, "trims": 1, "write_zeroes": 0}
        row |= {"read_bytes": 64 << 10, "write_bytes": 256 << 10, "trim_bytes": 64 << 10, "write_zeroes_bytes": 0}
        assert live["stats"]["namespaces"] == [row], live["stats"]
        s.stop()
    assert json.loads(s.stdout)["namespaces"] == [row], s.stdout
    check_image(drive)


def test_a_stack_is_not_made_on_a_drive_another_process_is_changing(tmp_path: Path) -> None:
    """A stack records its drive's identity as the drive's last commit left it. Made on a
    served drive, it recorded the state the server was moving away from, and the stack was
    refused at its first run, as changed since it last ran, although it had never run."""
    drive = tmp_path / "cm6"
    run_cli("create", drive, "--model", CM6, "--scale", "1/454")
    with served(drive) as s:
        r = run_cli("stack", tmp_path / "early", "--drive", drive, "--shaping", "pmem:1MiB", check=False)
        assert_one_line_error(r, f"--drive {drive}", "in use by another ssdtwin process", "stop it first")
        assert not (tmp_path / "early").exists()
        s.stop()
    run_cli("stack", tmp_path / "later", "--drive", drive, "--shaping", "pmem:1MiB")
    check_image(drive)


def test_a_stack_on_a_namespace_of_partial_blocks_exports_whole_blocks_only(tmp_path: Path) -> None:
    """The tier maps 4 KiB blocks, but a stack on a namespace of 100,001 512-byte blocks
    exported all of its 51,200,512 bytes: the server lets a request reach a final partial
    block, and a 512-byte write there was answered, stored in the data file and never seen by
    the tier or the drive (the tier counts whole blocks only)."""
    need("nbdinfo")
    drive, stack = tmp_path / "cm6", tmp_path / "stack"
    run_cli("create", drive, "--model", CM6, "--scale", "1/454")
    run_cli("nvme", "delete-ns", drive, "-n", "1")
    run_cli("nvme", "create-ns", drive, "-s", "100001", "-c", "100001", "-b", "512")
    run_cli("nvme", "attach-ns", drive, "-n", "1", "-c", "1")
    run_cli("stack", stack, "--drive", drive, "--shaping", "pmem:1MiB")
    with served(stack) as s:
        info = json.loads(sh("nbdinfo", "--json", s.uri("stack")).stdout)["exports"][0]
        s.stop()
    assert info["export-size"] == 100001 * 512 // 4096 * 4096
    check_image(drive)


def small_stack_beside_a_large_namespace(tmp_path: Path) -> tuple[Path, Path]:
    """A CM6 at 1/454 with a 4 MiB ns1 (the stack's) and a 7.6 GB ns2."""
    drive, stack = tmp_path / "cm6", tmp_path / "stack"
    run_cli("create", drive, "--model", CM6, "--scale", "1/454")
    run_cli("nvme", "delete-ns", drive, "-n", "1")
    for blocks in ("8192", "15000000"):
        run_cli("nvme", "create-ns", drive, "-s", blocks, "-c", blocks, "-b", "512")
    for ns in ("1", "2"):
        run_cli("nvme", "attach-ns", drive, "-n", ns, "-c", "1")
    run_cli("stack", stack, "--drive", drive, "--shaping", "pmem:1MiB")
    return drive, stack


def test_the_server_and_the_stack_count_namespace_passes_over_the_same_namespaces(tmp_path: Path) -> None:
    """The drive's NAND WAF is the whole drive's. The server's line counted namespace passes
    over all attached namespaces (0.00 passes, "not measured") and the stack's over the
    stack's namespace alone (2.00 passes) for the same bytes of the same session."""
    need("fio")
    drive, stack = small_stack_beside_a_large_namespace(tmp_path)
    with served(stack) as s:
        fio_nbd_write(s.uri("stack"), tmp_path / "w.txt", "4m", "--loops=2")
        summary = s.stop()
    c = counters(stack)
    attached = (8192 + 15000000) * 512
    assert c["drive_waf_host_bytes"] == 8 << 20
    assert c["drive_waf_namespace_passes"] == pytest.approx((8 << 20) / attached)
    assert f"{c['drive_waf_namespace_passes']:.2f} namespace passes" in summary, summary
    check_image(drive)


def test_reads_the_drive_fails_are_not_counted_as_read(tmp_path: Path) -> None:
    """A read the drive answers with EIO (an injected media error) served nothing, but the
    summary's read bytes and the stack's host_read_bytes counted it, on a served stack and
    (the bytes) on a served drive. Commands still count it, with the error reply."""
    need("qemu-io")
    drive, stack = tmp_path / "cm6", tmp_path / "stack"
    run_cli("create", drive, "--model", CM6, "--scale", "1/454")
    run_cli("nvme", "inject-media-error", drive, "-n", "1", "-s", "0", "-c", "8")
    run_cli("stack", stack, "--drive", drive, "--shaping", "pmem:1MiB")
    for image, export in ((stack, "stack"), (drive, "ns1")):
        with served(image) as s:
            r = subprocess.run(
                ["qemu-io", "-f", "raw", s.uri(export), "-c", "read 0 4k", "-c", "read 1M 4k"], capture_output=True, text=True
            )
            summary = s.stop()
        assert "read failed: Input/output error" in r.stdout + r.stderr and "read 4096/4096 bytes at offset 1048576" in r.stdout
        assert "2 reads (4.10 KB)" in summary and "1 error reply;" in summary, summary
        if image == stack:
            c = counters(stack)
            assert (c["host_read_bytes"], c["read_hit_bytes"]) == (4096, 0)
    check_image(drive)


def test_a_stack_refused_for_writes_to_another_namespace_says_why(tmp_path: Path) -> None:
    """A stack is tied to its whole drive: writes to another namespace make GC move the
    stack namespace's data (its map checksums change, its contents do not) and would enter
    the drive WAF the stack measures. The refusal said the drive was "written, trimmed or
    formatted" and the tier's copies "would be stale", which they are not; it now says what
    was written, on which namespaces it counts, and why."""
    drive, stack = small_stack_beside_a_large_namespace(tmp_path)
    job = tmp_path / "w.fio"
    job.write_text("[w]\nrw=randwrite\nbs=4k\nio_size=64k\nsize=1m\n")
    run_cli("fio", drive, job, "--namespace", "2")
    digest = image_digest(drive)
    r = run_cli("serve", stack, "--listen", "127.0.0.1:0", check=False)
    assert_one_line_error(r, str(stack), "changed since the stack last ran", "65.54 KB written on any namespace")
    assert "tied to its whole drive" in r.stderr and f"make a new stack on {drive}" in r.stderr
    assert image_digest(drive) == digest
    check_image(drive)


def test_a_served_tier_with_a_high_watermark_of_100_evicts_for_the_waiting_write(tmp_path: Path) -> None:
    """At a high watermark of 100 % a full tier never started evicting: every write past it
    got ENOSPC ("No space left on device") from the server."""
    need("fio")
    drive = tmp_path / "drive"
    run_cli("create", drive, "--model", P5316, "--scale", "1/256")
    stack = tmp_path / "stack"
    run_cli("stack", stack, "--drive", drive, "--shaping", "pmem:1MiB", "--high-watermark", "100")
    with served(stack) as s:
        sh(
            "fio",
            "--name=w",
            "--ioengine=nbd",
            f"--uri={s.uri('stack')}",
            "--rw=randwrite",
            "--bs=4k",
            "--size=64m",
            "--io_size=4m",
            "--iodepth=4",
            cwd=tmp_path,
        )
        s.p.send_signal(signal.SIGTERM)
        assert s.p.wait(timeout=60) == 0
    c = counters(stack)
    assert c["host_write_bytes"] == 4 << 20 and c["evictions"] > 0
    check_image(drive)


def test_nbdcopy_at_its_default_request_size_copies_into_a_served_log_stack(tmp_path: Path) -> None:
    """A log stack advertised only the room above its high watermark as its largest request
    (128 KiB for a 1 MiB log at 80 %), though a write the log has no room for makes it
    destage for that write down to empty: nbdcopy 1.14, which keeps to its own 256 KiB
    requests, failed with "write at offset 0 failed: Invalid argument". The log's capacity is
    advertised now, and a copy four times the log's size reads back."""
    need("nbdcopy", "nbdinfo", "qemu-img")
    drive, stack = tmp_path / "drive", tmp_path / "stack"
    run_cli("create", drive, "--model", P5316, "--scale", "1/256")
    run_cli("stack", stack, "--drive", drive, *POLICIES["log"])
    data = tmp_path / "in.raw"
    data.write_bytes(os.urandom(4 << 20))
    with served(stack) as s:
        info = json.loads(sh("nbdinfo", "--json", s.uri("stack")).stdout)["exports"][0]
        assert info["block_size_maximum"] == 1 << 20, info
        sh("nbdcopy", "--flush", data, s.uri("stack"))  # its default requests: 256 KiB
        out = tmp_path / "out.raw"
        sh("qemu-img", "dd", "-f", "raw", "-O", "raw", "bs=1M", "count=4", f"if={s.uri('stack')}", f"of={out}")
        s.stop()
    assert out.read_bytes() == data.read_bytes()
    c = counters(stack)
    assert c["host_write_bytes"] == 4 << 20 and c["destage_bytes"] > 0
    check_image(drive)
