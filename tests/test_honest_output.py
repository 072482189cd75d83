"""What the CLI says is true: nothing claims success before the image is committed, a
server's summary counts every error it replied, a port in use is named, `--scale` says
which drive it made, `--version` and `--help` say what they should.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from twin import CM6, SSDTWIN, image_digest, run_cli

# --------------------------------------------------------------------------- precondition


def precondition_with_file_size_limit(image: Path, limit_bytes: int) -> subprocess.CompletedProcess[str]:
    """`precondition` whose writes past `limit_bytes` of any file fail (EFBIG; Python
    ignores SIGXFSZ): its commit fails at the first map it writes, as on a full disk."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run(
        [*SSDTWIN, "precondition", str(image), "--seq", "128k", "--loops", "1", "--rand", "4k", "--amount", "64MiB", "-q"],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=limit,
    )


def test_a_failed_commit_prints_no_success(small: Path) -> None:
    before = image_digest(small)
    r = precondition_with_file_size_limit(small, 1 << 20)  # the maps are megabytes
    assert r.returncode == 1, r
    assert r.stdout == "", f"success claimed before the commit failed:\n{r.stdout}"
    (line,) = r.stderr.splitlines()
    assert line.startswith(f"ssdtwin precondition: error: could not commit {small}: "), line
    assert line.endswith("; the image keeps its last committed state"), line
    # The partial generation is not committed: the image reads as before and is writable.
    run_cli("check", small)
    assert {k: v for k, v in image_digest(small).items() if not k.startswith("gen-") or k in before} == before
    ok = run_cli("precondition", small, "--seq", "128k", "--loops", "1", "--rand", "4k", "--amount", "64MiB", "-q")
    assert [line.split(":")[0].strip() for line in ok.stdout.splitlines()] == ["seq 128k", "rand 4k"]


def test_a_full_disk_prints_no_success(tmp_path: Path, small_template: Path) -> None:
    """The same on a real full file system (a 12 MiB tmpfs; needs root or CAP_SYS_ADMIN)."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", str(mnt)], capture_output=True).returncode != 0
    ):
        pytest.skip("mounting a small tmpfs needs root (the RLIMIT_FSIZE test covers the same path)")
    try:
        image = mnt / "cm6"
        run_cli("create", image, "--model", CM6, "--scale", "1/454")
        r = run_cli("precondition", image, "--seq", "128k", "--loops", "1", "--rand", "4k", "--amount", "0.5x", check=False)
        assert r.returncode == 1 and r.stdout == "", r
        (line,) = r.stderr.splitlines()
        assert "could not commit" in line and "No space left on device" in line, line
        run_cli("check", image)
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


# --------------------------------------------------------------------------- serve


def test_serve_names_a_port_in_use(small: Path) -> None:
    before = image_digest(small)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        addr = f"127.0.0.1:{s.getsockname()[1]}"
        for args in (["--listen", addr], ["--listen", "127.0.0.1:0", "--metrics", addr]):
            r = run_cli("serve", small, *args, check=False)
            assert r.returncode == 1, r
            (line,) = r.stderr.splitlines()
            assert line.startswith("ssdtwin serve: error: ") and addr in line and "in use" in line, line
    # A server that could not start leaves the image as it was: no journal, no data files.
    assert image_digest(small) == before
    assert sorted(p.name for p in small.iterdir()) == sorted({p.split("/")[0] for p in before} | {"LOCK"})


def test_serve_summary_counts_every_error_reply(small: Path, tmp_path: Path) -> None:
    py = "/usr/bin/python3"
    if subprocess.run([py, "-c", "import nbd"], capture_output=True).returncode != 0:
        pytest.skip(f"{py} with the `nbd` module (python3-libnbd) is needed to send requests the server refuses")
    run_cli("nvme", "set-feature", small, "-f", "0x84", "-n", "1", "-v", "1")  # write protect: a read-only export
    sock = tmp_path / "nbd.sock"
    p = subprocess.Popen([*SSDTWIN, "serve", str(small), "--unix", str(sock)], stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.monotonic()
        while not sock.exists():
            assert p.poll() is None and time.monotonic() - t0 < 60, "serve did not start"
            time.sleep(0.05)
        # libnbd with strict mode off sends what it would refuse: the server's own answers.
        code = (
            "import nbd, sys\n"
            "h = nbd.NBD(); h.set_strict_mode(0); h.connect_uri(sys.argv[1])\n"
            "n = 0\n"
            "for op in (lambda: h.pwrite(b'x' * 4096, 0), lambda: h.pread(4096, h.get_size())):\n"
            "    try:\n        op()\n    except nbd.Error:\n        n += 1\n"
            "print(n)\n"
        )
        r = subprocess.run([py, "-c", code, f"nbd+unix:///ns1?socket={sock}"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and r.stdout.strip() == "2", r
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert "2 error replies" in err, err
    run_cli("check", small)


# --------------------------------------------------------------------------- --scale, --version, --help


def test_scale_that_rounds_to_another_scale_says_so(tmp_path: Path) -> None:
    r64 = run_cli("create", tmp_path / "a", "--model", CM6, "--scale", "1/64")
    assert "rounded" not in r64.stdout
    r65 = run_cli("create", tmp_path / "b", "--model", CM6, "--scale", "1/65")
    assert r65.stdout.startswith(
        f"created {tmp_path / 'b'}: {CM6} at 1/65 scale (rounded to whole superblocks: 32, "
        "the same drive as 1/64; its data pool is 1/63.46 of the full drive's), 60.52 GB user"
    ), r65.stdout
    # ... and it is that drive.
    spec = [run_cli("nvme", "id-ctrl", tmp_path / d, "-o", "json").json()["tnvmcap"] for d in ("a", "b")]
    assert spec[0] == spec[1]


def test_the_rounding_note_counts_the_superblocks_create_reports(tmp_path: Path) -> None:
    """With NVM Sets or FTL partitions each set and partition has superblocks of its own: the
    note counted the drive without them (9), the same line then said 36."""
    layout = ("--model", "memblaze-pblaze5-910-3.84t", "--nvm-sets", "2", "--partitions", "2")
    out = run_cli("create", tmp_path / "a", *layout, "--scale", "1/256").stdout
    noted = re.search(r"rounded to whole superblocks: (\d+), the same drive as 1/(\d+);", out)
    made = re.search(r" in (\d+) superblocks in 2 NVM Sets \(2 FTL partitions per set\)", out)
    assert noted and made, out
    assert noted[1] == made[1] == "36", out
    # ... and the scale it names is that drive, built the same way.
    same = run_cli("create", tmp_path / "b", *layout, "--scale", f"1/{noted[2]}").stdout
    assert "rounded" not in same and " in 36 superblocks " in same, same
    for d in ("a", "b"):
        run_cli("check", tmp_path / d)


def test_a_drive_of_few_superblocks_says_its_gc_is_coarse(tmp_path: Path) -> None:
    small = run_cli("create", tmp_path / "a", "--model", "samsung-pm983-3.84t", "--scale", "1/256")
    (note,) = small.stderr.splitlines()
    assert note.startswith("ssdtwin create: note: 9 superblocks: GC reclaims whole superblocks") and "16 or more" in note
    assert run_cli("create", tmp_path / "b", "--model", "samsung-pm983-3.84t", "--scale", "1/64").stderr == ""


def test_commands_that_build_their_own_drives_note_the_rounding(capsys: pytest.CaptureFixture[str]) -> None:
    from ssdtwin.commands.cli import scale_arg

    assert scale_arg("1/454", CM6, "ssdtwin demo") == 454
    assert capsys.readouterr().err == (
        "ssdtwin demo: note: --scale 1/454 rounded to whole superblocks: 8, the same drive as "
        "1/407; its data pool is 1/409.16 of the full drive's\n"
    )
    assert scale_arg("1/407", CM6, "ssdtwin demo") == 407
    assert scale_arg("64", CM6, "ssdtwin demo") == 64
    assert capsys.readouterr().err == ""


def test_version() -> None:
    from ssdtwin import _core

    r = run_cli("--version")
    assert r.stdout == f"ssdtwin {_core.__version__}\n"
    assert re.fullmatch(r"\d+\.\d+\.\d+", _core.__version__)


@pytest.mark.parametrize("command", [("precondition",), ("fio",), ("demo",), ("calibrate",), ("nvme", "set-feature")])
def test_help_shows_flag_pairs_not_bool(command: tuple[str, ...]) -> None:
    text = run_cli(*command, "--help").stdout
    assert "<bool>" not in text
    assert re.search(r"--[a-z-]+ / --no-[a-z-]+", text), text


def test_help_of_every_command_runs() -> None:
    top = run_cli("--help").stdout
    commands = re.findall(r"(?m)^  ([a-z-]+)\s{2,}", top.split("Commands:")[1])
    assert "serve" in commands and "nvme" in commands
    for c in commands:
        sub = run_cli(c, "--help").stdout
        assert sub.startswith(f"Usage: ssdtwin {c} "), sub
        assert "<bool>" not in sub


def test_waf_names_a_program_it_cannot_run(small: Path) -> None:
    """waf runs any program; one that does not exist is a one-line error, not a traceback."""
    r = run_cli("waf", small, "--", "no-such-program-here", check=False)
    assert r.returncode == 1
    assert r.stderr.splitlines() == ["ssdtwin waf: error: cannot run 'no-such-program-here': No such file or directory"]
    assert shutil.which("no-such-program-here") is None


@pytest.mark.parametrize("command", [(), ("nvme",), ("bench",)])
def test_a_group_alone_prints_its_help(command: tuple[str, ...]) -> None:
    r = run_cli(*command, check=False)
    assert r.returncode == 2
    assert r.stderr.startswith(f"Usage: {' '.join(('ssdtwin', *command))} [OPTIONS] COMMAND"), r.stderr
    # Help, not an error message (verb names such as error-log may contain the word).
    assert not re.search(r"(?im)^(ssdtwin[^:]*: )?error\b", r.stderr) and "Error:" not in r.stderr and "Commands:" in r.stderr
