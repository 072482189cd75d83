"""Bad input: every failure is one line on stderr naming what was wrong, a non-zero exit,
and an image left exactly as it was.

"Unchanged" is checked byte for byte: a sha256 of every file in the image directory
before and after (LOCK excluded: it is the advisory lock file, rewritten with the pid of
whoever opens the image writable). For damage to the image itself, the check is that the
damaged files are left as they were, so the user can still inspect or repair them.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import twin
from ssdtwin.drive import Drive, SsdtwinError
from twin import CM6, Run, image_digest, own_copy, run_cli


def assert_one_line_error(r: Run, *needles: str, status: int = 1) -> str:
    assert r.returncode == status, f"exit {r.returncode}, wanted {status}; stderr: {r.stderr!r}"
    lines = r.stderr.splitlines()
    assert len(lines) == 1, f"wanted exactly one line on stderr, got {len(lines)}:\n{r.stderr}"
    line = lines[0]
    assert line.startswith(("ssdtwin ", "ssdtwin: ")) and ": error: " in line, line
    assert "Traceback" not in r.stderr
    for n in needles:
        assert n in line, f"{n!r} not in {line!r}"
    return line


def fails_cleanly(image: Path, *args: str, needles: tuple[str, ...], status: int = 1, listable: bool = True) -> str:
    """Run a failing command on `image`; the image must be byte-identical afterwards."""
    before = image_digest(image)
    line = assert_one_line_error(run_cli(*args, check=False), *needles, status=status)
    assert image_digest(image) == before, f"{args} changed the image"
    if listable:
        run_cli("nvme", "list", image)
        run_cli("check", image)
    return line


# --------------------------------------------------------------------------- namespaces and images


def test_create_ns_larger_than_unvmcap(small: Path) -> None:
    run_cli("nvme", "detach-ns", small, "-n", "1")
    run_cli("nvme", "delete-ns", small, "-n", "1")
    run_cli("nvme", "create-ns", small, "-s", "1000000", "-c", "1000000", "-b", "512")
    unvmcap = run_cli("nvme", "id-ctrl", small, "-o", "json").json()["unvmcap"]
    too_many = unvmcap // 512 + 1
    line = fails_cleanly(
        small,
        "nvme",
        "create-ns",
        str(small),
        "-s",
        str(too_many),
        "-c",
        str(too_many),
        "-b",
        "512",
        needles=(
            "NS_INSUFFICIENT_CAPACITY(0x4115)",
            f"{too_many} blocks x 512 B",
            f"{unvmcap} bytes",
            f"at most {unvmcap // 512} blocks of 512 B",
        ),
    )
    assert line.startswith("ssdtwin nvme create-ns: error: ")
    # The full drive's size on a drive that already has a namespace: same error.
    fails_cleanly(small, "nvme", "create-ns", str(small), "-s", "7501476528", "-c", "7501476528", needles=("NS_INSUFFICIENT_CAPACITY",))


def test_unknown_preset(tmp_path: Path) -> None:
    d = tmp_path / "new"
    r = run_cli("create", d, "--model", "kioxia-cm7", check=False)
    assert_one_line_error(r, "preset 'kioxia-cm7': unknown preset; choose one of: ", CM6, "intel-p5316-15.36t")
    assert not d.exists(), "a failed create must not leave a directory behind"
    assert_one_line_error(run_cli("models", "kioxia-cm7", check=False), "unknown preset")


@pytest.mark.parametrize(
    "args, where",
    [(["info"], "ssdtwin"), (["nvme", "bogus"], "ssdtwin nvme"), (["nvme", "intel", "bogus"], "ssdtwin nvme intel")],
)
def test_an_unknown_command_points_at_its_groups_help(args: list[str], where: str) -> None:
    """`ssdtwin info` said "ssdtwin info: error: ... (see 'ssdtwin info --help')": a help that
    does not exist. The error and its hint name the group the word was looked up in."""
    r = run_cli(*args, check=False)
    assert r.returncode == 2, r.stderr
    assert r.stderr.splitlines() == [f"{where}: error: No such command '{args[-1]}'. (see '{where} --help')"], r.stderr
    assert run_cli(*where.split()[1:], "--help").returncode == 0


@pytest.mark.parametrize(
    "args, where",
    [
        (["cluster", "init", "{tmp}/lab", "--nodes", "-1"], "ssdtwin cluster init"),
        (["cluster", "info", "{tmp}"], "ssdtwin cluster info"),
        (["cluster", "sweep", "{tmp}"], "ssdtwin cluster sweep"),
        (["nvme", "list", "{tmp}"], "ssdtwin nvme list"),
        (["nvme", "intel", "smart-log-add", "{tmp}"], "ssdtwin nvme intel smart-log-add"),
        (["pts", "report", "{tmp}"], "ssdtwin pts report"),
        (["pts", "compare", "{tmp}", "{tmp}", "--report", "{tmp}/r"], "ssdtwin pts compare"),
        (["pts", "{tmp}/none", "--report", "{tmp}/r"], "ssdtwin pts run"),  # run is pts's default
        (["bench", "ftl", "--model", "nope"], "ssdtwin bench ftl"),
        (["reproduce", "nope"], "ssdtwin reproduce"),
        (["check", "{tmp}"], "ssdtwin check"),
    ],
)
def test_an_error_names_the_command_it_arose_in(tmp_path: Path, args: list[str], where: str) -> None:
    """Each error line is led by the command's path as click made it, in every group: `cluster
    init` said "ssdtwin cluster: error" and `pts report` "ssdtwin pts: error" (a list named
    only nvme, bench and pts compare as commands of two words)."""
    line = assert_one_line_error(run_cli(*(a.format(tmp=tmp_path) for a in args), check=False))
    assert line.startswith(f"{where}: error: "), line


def test_every_command_records_its_own_path() -> None:
    # Every command of the tree (the lazy ones built) names itself as click spells its path,
    # so no group or sub-command is left to a default.
    import typer

    from ssdtwin.commands import cli

    top = typer.main.get_command(cli.app)
    seen = []

    def walk(group: Any, ctx: Any) -> None:
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            sub = cmd.context_class(cmd, info_name=name, parent=ctx)
            assert cli.CommandPath.path == sub.command_path == f"{ctx.command_path} {name}"
            seen.append(sub.command_path)
            if hasattr(cmd, "commands"):
                walk(cmd, sub)

    walk(top, top.context_class(top, info_name="ssdtwin"))
    assert {"ssdtwin cluster init", "ssdtwin nvme intel smart-log-add", "ssdtwin pts compare", "ssdtwin bench nbd"} <= set(seen)


def test_block_size_1000(small: Path) -> None:
    run_cli("nvme", "detach-ns", small, "-n", "1")
    run_cli("nvme", "delete-ns", small, "-n", "1")
    fails_cleanly(
        small,
        "nvme",
        "create-ns",
        str(small),
        "-s",
        "1000",
        "-c",
        "1000",
        "-b",
        "1000",
        needles=("-b/--block-size 1000", "allowed: 512, 4096"),
    )
    fails_cleanly(
        small,
        "nvme",
        "create-ns",
        str(small),
        "-s",
        "1000",
        "-c",
        "1000",
        "-f",
        "9",
        needles=("INVALID_FORMAT(0x410a)", "LBA format 9", "0=512 B, 1=4096 B, 2=512+8 B"),
    )


def test_attach_missing_namespace(small: Path) -> None:
    fails_cleanly(
        small,
        "nvme",
        "attach-ns",
        str(small),
        "-n",
        "2",
        "-c",
        "1",
        needles=("INVALID_NS(0x400b)", "namespace 2 does not exist", "namespaces: 1"),
    )
    run_cli("nvme", "detach-ns", small, "-n", "1")
    run_cli("nvme", "delete-ns", small, "-n", "1")
    fails_cleanly(small, "nvme", "attach-ns", str(small), "-n", "1", "-c", "1", needles=("INVALID_NS(0x400b)", "namespaces: none"))


# --------------------------------------------------------------------------- missing namespaces


@pytest.mark.parametrize(
    "args, needles",
    [
        (["nvme", "id-ns", "{d}", "-n", "65"], ("INVALID_NS(0x400b)", "namespace 65: not a valid NSID", "1..=64")),
        (["nvme", "detach-ns", "{d}", "-n", "9"], ("INVALID_NS(0x400b)", "namespace 9")),
        (["nvme", "delete-ns", "{d}", "-n", "9"], ("INVALID_NS(0x400b)", "namespace 9")),
        (["nvme", "format", "{d}", "-n", "9"], ("INVALID_NS(0x400b)", "namespace 9")),
        (["nvme", "get-feature", "{d}", "-f", "0x84", "-n", "9"], ("INVALID_NS(0x400b)", "namespace 9")),
        (["precondition", "{d}", "-n", "9", "--rand", "4k"], ("-n 9: no such namespace", "namespaces: 1")),
    ],
)
def test_missing_namespace(small: Path, args: list[str], needles: tuple[str, ...]) -> None:
    fails_cleanly(small, *[a.format(d=small) for a in args], needles=needles)


def test_attach_detach_state_errors(small: Path) -> None:
    fails_cleanly(small, "nvme", "attach-ns", str(small), "-n", "1", "-c", "1", needles=("NS_ALREADY_ATTACHED(0x4118)",))
    run_cli("nvme", "detach-ns", small, "-n", "1")
    fails_cleanly(small, "nvme", "detach-ns", str(small), "-n", "1", needles=("NS_NOT_ATTACHED(0x411a)",))
    # I/O to a detached namespace is refused.
    fails_cleanly(small, "precondition", str(small), "--rand", "4k", "--amount", "1MiB", needles=("INVALID_NS(0x400b)", "not attached"))


# --------------------------------------------------------------------------- option values


@pytest.mark.parametrize(
    "args, needles, status",
    [
        (["nvme", "list", "{d}", "-o", "xml"], ("-o/--output-format 'xml'", "normal or json"), 1),
        (["nvme", "id-ctrl", "{d}", "-b", "-o", "json"], ("-b/--raw-binary and -o json: choose one",), 1),
        (["nvme", "sanitize-log", "{d}", "-b", "-o", "json"], ("-b/--raw-binary and -o json: choose one",), 1),
        (["nvme", "id-ctrl", "{d}", "--bogus"], ("No such option: --bogus",), 2),
        (["nvme", "id-ns", "{d}"], ("Missing option", "--namespace-id"), 2),
        (["nvme", "id-ns", "{d}", "-n", "one"], ("-n/--namespace-id 'one'", "decimal or 0x hex integer in 0..0xffffffff"), 1),
        (["nvme", "create-ns", "{d}", "-s", "0", "-c", "0"], ("-s/--nsze 0", "at least 1 block"), 1),
        (["nvme", "create-ns", "{d}", "-s", "1T", "-c", "1T"], ("-s/--nsze '1T'", "whole number of logical blocks"), 1),
        (["nvme", "create-ns", "{d}", "-s", "10", "-c", "5"], ("THIN_PROVISIONING_NOT_SUPPORTED(0x411b)",), 1),
        (["nvme", "create-ns", "{d}", "-s", "10", "-c", "10", "-b", "512", "-f", "0"], ("not both",), 1),
        (["nvme", "attach-ns", "{d}", "-n", "1", "-c", "2"], ("CTRL_LIST_INVALID(0x411c)", "controller 2"), 1),
        (["nvme", "attach-ns", "{d}", "-n", "1", "-c", "1,x"], ("-c/--controllers '1,x'",), 1),
        (["nvme", "format", "{d}", "-n", "1", "--ses", "3"], ("INVALID_FIELD(0x4002)", "ses 3", "0 (none)"), 1),
        (["nvme", "format", "{d}", "-n", "1", "-b", "1000"], ("-b/--block-size 1000", "allowed: 512, 4096"), 1),
        (["nvme", "format", "{d}", "-n", "1", "-l", "9"], ("INVALID_FORMAT(0x410a)", "LBA format 9"), 1),
        (["nvme", "sanitize", "{d}", "-a", "5"], ("INVALID_FIELD(0x4002)", "sanact 5"), 1),
        (["nvme", "sanitize", "{d}", "-a", "0"], ("INVALID_FIELD(0x4002)", "sanact 0"), 1),
        (["nvme", "sanitize", "{d}", "-a", "2", "--no-dealloc"], ("INVALID_FIELD(0x4002)", "no-dealloc"), 1),
        (["nvme", "sanitize", "{d}", "-a", "4", "--owpass", "2"], ("INVALID_FIELD(0x4002)", "overwrite (sanact 3) only"), 1),
        (["nvme", "sanitize", "{d}", "-a", "zz"], ("-a/--sanact 'zz'", "start-block-erase"), 1),
        (["nvme", "sanitize", "{d}", "-a", "2", "--emvs"], ("-e/--emvs", "INVALID_FIELD"), 1),
        (["nvme", "get-log", "{d}", "-i", "0x42", "-l", "16"], ("INVALID_LOG_PAGE(0x4109)", "0x42"), 1),
        (["nvme", "get-log", "{d}", "-i", "2", "-l", "0"], ("-l/--log-len 0",), 1),
        (["nvme", "get-feature", "{d}", "-f", "0x99"], ("INVALID_FIELD(0x4002)", "feature 0x99", "supported: 0x01"), 1),
        (["nvme", "set-feature", "{d}", "-f", "7", "-v", "1"], ("FEATURE_NOT_CHANGEABLE(0x410e)",), 1),
        (["nvme", "set-feature", "{d}", "-f", "2", "-v", "zz"], ("-v/--value 'zz'", "integer"), 1),
        (["nvme", "set-feature", "{d}", "-f", "2", "-v", "40"], ("INVALID_FIELD(0x4002)", "power state 8"), 1),
        (["precondition", "{d}"], ("give --seq BS and/or --rand BS",), 1),
        (["precondition", "{d}", "--seq", "12q"], ("--seq", "'12q' is not a size", "128k"), 1),
        (["precondition", "{d}", "--rand", "0"], ("--rand 0: must be positive",), 1),
        (["precondition", "{d}", "--rand", "1000"], ("--rand 1000: the block size (1000 bytes)", "namespace 1's 512-byte LBA"), 1),
        (["precondition", "{d}", "--seq", "1T"], ("--seq 1T: the block size (1099511627776 bytes) is larger than namespace 1",), 1),
        (["precondition", "{d}", "--rand", "4k", "--amount", "0x"], ("--amount", "'0x': must be positive"), 1),
        (["precondition", "{d}", "--rand", "4k", "--amount", "0"], ("--amount 0: must be positive",), 1),
        # each sizes its own step: without it, it was ignored and the step wrote its default (2 passes)
        (["precondition", "{d}", "--seq", "128k", "--amount", "1GiB"], ("--amount 1GiB: sizes the --rand step, and there is none",), 1),
        (["precondition", "{d}", "--rand", "4k", "--loops", "0.01"], ("--loops 0.01: sizes the --seq step, and there is none",), 1),
        (["precondition", "{d}", "--rand", "4k", "--amount", "lots"], ("--amount", "'lots' is not a size"), 1),
        (["precondition", "{d}", "--seq", "128k", "--loops", "0"], ("--loops 0.0: must be positive",), 1),
        (["precondition", "{d}", "--seq", "128k", "--loops", "-1"], ("--loops -1.0: must be positive",), 1),
        # a float product past 1.8e308 is inf: int() raised OverflowError, a traceback
        (["precondition", "{d}", "--seq", "128k", "--loops", "1e300"], ("--loops 1e+300:", "more than 2^64 bytes"), 1),
        (["precondition", "{d}", "--rand", "4k", "--amount", "1e300x"], ("--amount", "'1e300x'", "more than 2^64 bytes"), 1),
        # rounds to 0 bytes: wrote nothing and said Success, where --loops 0 is refused
        (["precondition", "{d}", "--seq", "128k", "--loops", "1e-300"], ("--loops 1e-300:", "must be positive"), 1),
        (["waf", "{d}", "-o", "xml", "--", "true"], ("-o/--output-format 'xml'",), 1),
        # Python's digit separators, which int() and float() take, are no number on the
        # command line (fio reads none in a job file): each of these ran as 10, 1000 ...
        (["precondition", "{d}", "--rand", "4k", "--amount", "1MiB", "--seed", "1_0"], ("'--seed'", "'1_0' is not a valid integer"), 2),
        (["nvme", "attach-ns", "{d}", "-n", "1", "-c", "1_0"], ("-c/--controllers '1_0'",), 1),
        (["create", "{d}/new", "--model", twin.CM6, "--scale", "1/6_4"], ("--scale", "'1/6_4'"), 1),
        (["demo", "--sizes", "3_84"], ("--sizes '3_84'",), 1),
        (["advise", "{d}/w.fio", "--target-iops", "1_00k", "--drives", twin.CM6], ("--target-iops '1_00k'",), 1),
        (["advise", "{d}/w.fio", "--target-iops", "1k", "--drives", twin.CM6, "--extra-op", "0,0_1"], ("--extra-op", "'0_1'"), 1),
        (["advise", "{d}/w.fio", "--target-iops", "1k", "--drives", twin.CM6, "--p99-us", "1_000"], ("'--p99-us'", "'1_000'"), 2),
        (["cluster", "sweep", "{d}", "--runtime", "1_0ms"], ("--runtime '1_0ms'",), 1),
        (["cluster", "sweep", "{d}", "--outstanding", "1_0"], ("--outstanding '1_0'",), 1),
    ],
)
def test_bad_option_values(small: Path, args: list[str], needles: tuple[str, ...], status: int) -> None:
    fails_cleanly(small, *[a.format(d=small) for a in args], needles=needles, status=status)


def test_digit_separators_are_refused_without_touching_click_s_shared_types(tmp_path: Path) -> None:
    """The CLI refuses ``1_0`` in its own options only: click's INT and FLOAT, which any other
    program in the same process builds its options from, still read it as Python does."""
    from typer import main as typer_main

    r = run_cli("create", str(tmp_path / "n"), "--model", CM6, "--scale", "1/256", "--seed", "1_0", check=False)
    assert r.returncode == 2 and "'1_0' is not a valid integer" in r.stderr
    assert not (tmp_path / "n").exists()
    types: Any = getattr(typer_main, "types")  # noqa: B009
    assert types.INT.convert("1_0", None, None) == 10
    assert types.FloatParamType().convert("1_0.5", None, None) == 10.5


def test_precondition_checks_every_step_before_writing(small: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A --rand block size the namespace cannot take failed only after the --seq step had
    run (minutes at full scale), with the core's message naming no option."""
    from ssdtwin.drive import Drive

    steps: list[str] = []
    real = Drive.precondition

    def counted(self: Drive, *args: Any, **kwargs: Any) -> Any:
        steps.append(str(args))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Drive, "precondition", counted)
    args = ["precondition", str(small), "--seq", "128k", "--loops", "0.01", "--rand", "1000"]
    fails_cleanly(small, *args, needles=("--rand 1000: the block size (1000 bytes) must be a multiple of namespace 1's 512-byte LBA",))
    assert steps == []


@pytest.mark.parametrize(
    "scale, needles",
    [
        ("1/0", ("--scale", "scale '1/0': N must be at least 1")),
        ("0", ("--scale", "N must be at least 1")),
        ("abc", ("--scale", "scale 'abc': use 1/N")),
        ("1/64.5", ("--scale", "use 1/N")),
        ("1/100000", ("--scale 1/100000: too small", "need at least 4")),
        # the core takes N as a u32: a larger one was pyo3's OverflowError, a traceback
        ("1/99999999999999999999999", ("--scale", "N must be at most 4294967295")),
    ],
)
def test_bad_scale(tmp_path: Path, scale: str, needles: tuple[str, ...]) -> None:
    d = tmp_path / "new"
    assert_one_line_error(run_cli("create", d, "--model", CM6, "--scale", scale, check=False), *needles)
    assert not d.exists()


@pytest.mark.parametrize(
    "args, needles",
    [
        (["validate", "--scale", "1/0"], ("--scale", "N must be at least 1")),  # was a traceback
        (["validate", "--scale", "1/4294967296"], ("--scale", "N must be at most 4294967295")),
        (["calibrate", "--scale", "1/4294967296"], ("--scale", "N must be at most 4294967295")),
        # A cluster's own ranges, not the core's integer's (0..4294967295).
        (["cluster", "init", "{d}", "--scale", "1/4294967296"], ("--scale '1/4294967296': N must be 1..65536",)),
        (["cluster", "init", "{d}", "--scale", "1/100000"], ("--scale '1/100000': N must be 1..65536",)),
        (["cluster", "init", "{d}", "--stack", "ceph-rbd", "--ceph-version", "-1"], ("--ceph-version -1: choose 14 (Nautilus) or 18",)),
        (["cluster", "init", "{d}", "--stack", "ceph-rbd", "--ceph-version", str(2**70)], ("--ceph-version", "choose 14 (Nautilus) or 18")),
    ],
)
def test_scales_and_releases_out_of_the_core_s_range(tmp_path: Path, args: list[str], needles: tuple[str, ...]) -> None:
    d = tmp_path / "new"
    assert_one_line_error(run_cli(*[a.format(d=d) for a in args], check=False), *needles)
    assert not d.exists()


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_spec_that_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    # Was: `create --spec FIFO` opened the FIFO and waited for a writer forever.
    spec = tmp_path / "spec.toml"
    os.mkfifo(spec) if kind == "fifo" else spec.mkdir()
    what = "a FIFO" if kind == "fifo" else "a directory"
    for args in (["create", tmp_path / "new", "--spec", spec], ["calibrate", "--spec", spec]):
        r = run_cli(*args, check=False, process=True, timeout=30)
        assert_one_line_error(r, f"--spec {spec}: not a regular file ({what})")
    assert not (tmp_path / "new").exists()


def test_scale_beyond_u32_is_one_line(tmp_path: Path) -> None:
    # Was pyo3's OverflowError ("out of range integral type conversion attempted"), a traceback.
    r = run_cli("create", tmp_path / "x", "--model", CM6, "--scale", f"1/{2**40}", check=False)
    assert_one_line_error(r, "--scale", "N must be at most 4294967295")


@pytest.mark.skipif(twin.ALWAYS_A_PROCESS, reason="patches the drive in this process")
def test_an_out_of_range_integer_past_the_options_is_one_line(small: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The options bound their integers; should one reach the core out of range anyway, the
    # error names it on one line (the CLI re-raised it before: a traceback).
    from ssdtwin._bounds import ArgumentRangeError
    from ssdtwin.drive import Drive

    def check(self: Drive) -> None:
        raise ArgumentRangeError("nsid=-1: out of range; must be an integer in 0..=4294967295 (u32)")

    monkeypatch.setattr(Drive, "check", check)
    fails_cleanly(small, "check", str(small), needles=("ssdtwin check: error: nsid=-1: out of range",), listable=False)


def test_create_refuses_existing_paths(tmp_path: Path, small: Path) -> None:
    plain = tmp_path / "plain"
    plain.write_text("not an image\n")
    assert_one_line_error(run_cli("create", plain, "--model", CM6, "--scale", "1/64", check=False), f"{plain} already exists")
    assert plain.read_text() == "not an image\n"
    fails_cleanly(small, "create", str(small), "--model", CM6, "--scale", "1/64", needles=(f"{small} already exists",))


_RACED = {1: CM6, 2: "kioxia-cm6-v-3.2t"}


def _create_at_once(path: str, which: int, start: Any, results: Any) -> None:
    start.wait()
    try:
        Drive.create(path, _RACED[which], scale="1/256", seed=which).close()
        results.put((which, "ok"))
    except SsdtwinError as e:
        results.put((which, str(e)))


def test_two_creations_of_one_new_image_leave_the_winner_s_image(tmp_path: Path) -> None:
    # Both passed the "missing" check; the loser then wrote its spec.toml over the winner's
    # image before failing on the lock: an image of one preset holding another's spec (3 of
    # 20 races). Now one creation wins, the other is told the directory exists.
    ctx = multiprocessing.get_context("fork")
    for k in range(25):
        path = str(tmp_path / f"img{k}")
        start, results = ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=_create_at_once, args=(path, w, start, results)) for w in _RACED]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        got = dict(results.get(timeout=5) for _ in procs)
        (winner,) = [w for w, r in got.items() if r == "ok"]
        (loser,) = set(_RACED) - {winner}
        assert "already exists" in got[loser], got
        d = Drive.open(path, writable=False)
        assert f'name = "{_RACED[winner]}"' in d.spec_toml() and f'name = "{_RACED[winner]}"' in Path(path, "spec.toml").read_text()
        d.check()
        d.close()
    run_cli("check", path)


# --------------------------------------------------------------------------- not an image


def test_image_path_is_a_plain_file(tmp_path: Path) -> None:
    f = tmp_path / "file.img"
    f.write_bytes(b"\0" * 4096)
    for args in (["nvme", "list", f], ["precondition", f, "--rand", "4k"], ["check", f]):
        assert_one_line_error(run_cli(*args, check=False), f"{f} is not an ssdtwin drive image")
    assert f.read_bytes() == b"\0" * 4096


def test_missing_directory(tmp_path: Path) -> None:
    d = tmp_path / "nowhere"
    assert_one_line_error(run_cli("nvme", "id-ctrl", d, check=False), f"{d} is not an ssdtwin drive image (no such directory)")
    assert not d.exists()


def test_foreign_directory(tmp_path: Path) -> None:
    d = tmp_path / "photos"
    d.mkdir()
    (d / "cat.jpg").write_bytes(b"\xff\xd8\xff")
    before = image_digest(d)
    for args in (["nvme", "list", d], ["nvme", "format", d, "-n", "1"], ["precondition", d, "--seq", "128k"]):
        assert_one_line_error(run_cli(*args, check=False), f"{d} is not an ssdtwin drive image (no ssdtwin.toml)")
    assert image_digest(d) == before and sorted(p.name for p in d.iterdir()) == ["cat.jpg"]


@pytest.mark.damages_image
def test_foreign_manifest(small: Path) -> None:
    m = small / "ssdtwin.toml"
    m.write_text(m.read_text().replace('format = "ssdtwin-image"', 'format = "something-else"'))
    fails_cleanly(
        small, "nvme", "list", str(small), needles=("is not an ssdtwin drive image", "format is 'something-else'"), listable=False
    )
    m.write_text(m.read_text().replace('format = "something-else"', 'format = "ssdtwin-image"').replace("version = 2", "version = 99"))
    fails_cleanly(small, "nvme", "list", str(small), needles=("image version 99", "reads versions 1 to 2"), listable=False)


# --------------------------------------------------------------------------- damaged images


def current_gen(d: Path) -> Path:
    return d / (d / "CURRENT").read_text().strip()


@pytest.mark.damages_image
@pytest.mark.parametrize("damage", ["truncated", "garbled", "empty", "wrong-type"])
def test_damaged_state_json(small: Path, damage: str) -> None:
    state = current_gen(small) / "state.json"
    text = state.read_bytes()
    if damage == "truncated":
        state.write_bytes(text[: len(text) // 2])
    elif damage == "garbled":
        state.write_bytes(text[:100] + b"\x00\x13garbage" + text[100:])
    elif damage == "empty":
        state.write_bytes(b"")
    else:
        # A type error inside the state: the checksum over the state's bytes catches it.
        j = json.loads(text)
        j["state"]["controller"]["seed"] = "not a number"
        state.write_text(json.dumps(j))
    for args in (["nvme", "list", small], ["precondition", small, "--rand", "4k"], ["check", small]):
        fails_cleanly(small, *map(str, args), needles=("drive image damaged", f"{state}"), listable=False)


@pytest.mark.damages_image
def test_map_sizes_that_disagree_with_the_spec(small: Path) -> None:
    state = current_gen(small) / "state.json"
    # Written as a version-1 state.json (no checksum, which this ssdtwin still reads), so the
    # check reached is the one on map sizes.
    j = json.loads(state.read_text())["state"]
    j["l2p_entries"] += 1
    state.write_text(json.dumps(j))
    fails_cleanly(small, "nvme", "list", str(small), needles=("drive image damaged", "map sizes disagree with spec.toml"), listable=False)


@pytest.mark.damages_image
@pytest.mark.parametrize("which", ["l2p.bin", "p2l.bin"])
def test_flipped_bytes_in_maps_are_caught_by_checksum(small: Path, which: str) -> None:
    path = own_copy(current_gen(small) / which)
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 3)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0x5A]))
    # Metadata-only commands never load the maps; the damage shows when they are loaded.
    run_cli("nvme", "list", small)
    for args in (
        ["check", small],
        ["precondition", small, "--rand", "4k", "--amount", "1MiB"],
        ["nvme", "format", small, "-n", "1", "--ses", "2"],
        ["nvme", "delete-ns", small, "-n", "1"],
    ):
        fails_cleanly(
            small, *map(str, args), listable=False, needles=("drive image damaged", str(path), "checksum", "does not match the committed")
        )


@pytest.mark.damages_image
def test_truncated_map_file(small: Path) -> None:
    path = own_copy(current_gen(small) / "l2p.bin")
    os.truncate(path, os.path.getsize(path) - 4096)
    fails_cleanly(small, "check", str(small), needles=("drive image damaged", str(path)), listable=False)


@pytest.mark.damages_image
def test_missing_map_file(small: Path) -> None:
    path = current_gen(small) / "p2l.bin"
    path.unlink()
    fails_cleanly(small, "nvme", "list", str(small), needles=("drive image damaged", str(path), "missing"), listable=False)


@pytest.mark.damages_image
def test_missing_spec_toml(small: Path) -> None:
    # Was "<dir>/spec.toml: No such file or directory (os error 2)", not saying the image is damaged.
    (small / "spec.toml").unlink()
    for args in (["nvme", "list", small], ["check", small]):
        fails_cleanly(small, *map(str, args), needles=("drive image damaged", f"{small / 'spec.toml'}: missing"), listable=False)


@pytest.mark.damages_image
@pytest.mark.parametrize(
    ("content", "reason"), [(b"", "empty (0 bytes)"), (b"\n \n", "empty (3 bytes)"), (b"[drive\n\x00", "not valid TOML")]
)
def test_empty_or_garbled_spec_toml_is_damage(small: Path, content: bytes, reason: str) -> None:
    # Was "<dir> is not an ssdtwin drive image (its spec.toml does not match this ssdtwin's
    # drive model (... missing field `drive`)": an image of ours with its spec lost.
    (small / "spec.toml").write_bytes(content)
    for args in (["nvme", "list", small], ["check", small]):
        line = fails_cleanly(small, *map(str, args), needles=("drive image damaged", f"{small / 'spec.toml'}: {reason}"), listable=False)
        assert "not an ssdtwin drive image" not in line


# Without root's CAP_DAC_OVERRIDE (root ignores a directory's mode bits otherwise).
NO_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--inh-caps=-dac_override,-dac_read_search,-fowner"]


def test_image_folder_without_write_permission_is_refused_before_the_run(small: Path, tmp_path: Path) -> None:
    """A folder the user may not write in, though its LOCK file is writable: the run was
    simulated in full and then its commit failed. Refused at open now, like a LOCK the
    user may not write."""
    from twin import SSDTWIN

    prefix = NO_OVERRIDE if os.geteuid() == 0 else []
    if prefix and subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        pytest.skip("dropping CAP_DAC_OVERRIDE needs setpriv")
    job = tmp_path / "w.fio"
    job.write_text("[w]\nrw=randwrite\nbs=4k\nsize=1m\n")
    before = image_digest(small)
    small.chmod(0o555)
    try:
        for args in (["fio", small, job], ["power-cycle", small], ["precondition", small, "--rand", "4k", "--amount", "1MiB"]):
            p = subprocess.run([*prefix, *SSDTWIN, *map(str, args)], capture_output=True, text=True, timeout=120)
            r = Run([str(a) for a in args], p.returncode, p.stdout, p.stderr)
            assert_one_line_error(r, f"{small} cannot be opened for writing: no permission to write in it (read-only commands still work)")
            assert r.stdout == "", "the run went ahead"
        p = subprocess.run([*prefix, *SSDTWIN, "check", str(small)], capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
    finally:
        small.chmod(0o755)
    assert image_digest(small) == before


@pytest.mark.damages_image
def test_current_names_no_generation(small: Path) -> None:
    (small / "CURRENT").write_text("nonsense\n")
    fails_cleanly(
        small, "nvme", "list", str(small), needles=("drive image damaged", "CURRENT", "'nonsense' is not a generation name"), listable=False
    )
    (small / "CURRENT").write_text("gen-000777\n")
    fails_cleanly(small, "nvme", "list", str(small), needles=("drive image damaged", "gen-000777"), listable=False)


@pytest.mark.damages_image
def test_a_journal_whose_header_does_not_check_is_dropped_by_repair(small: Path) -> None:
    # The error names `check --repair`, which refused the same journal: the user went round in a circle.
    journal = small / "journal.bin"
    garbage = bytes(range(256)) * 4
    journal.write_bytes(garbage)
    for args in (["check", small], ["nvme", "list", small], ["precondition", small, "--rand", "4k"]):
        fails_cleanly(
            small,
            *map(str, args),
            needles=(f"{journal}: damaged at byte 0: its header does not check", f"`ssdtwin check --repair {small}`"),
            listable=False,
        )
    r = run_cli("check", small, "--repair")
    assert "dropped whole (1024 bytes, none replayed)" in r.stderr, r.stderr
    (kept,) = small.glob("journal.damaged-gen-*.bin")
    assert kept.read_bytes() == garbage and not journal.exists()
    run_cli("check", small)


@pytest.mark.damages_image
def test_invalid_spec_toml(small: Path) -> None:
    spec = small / "spec.toml"
    spec.write_text(spec.read_text().replace("[nand.channels]", "[nand.channels]\nbogus_field = 1"))
    fails_cleanly(small, "nvme", "list", str(small), needles=(str(spec), "bogus_field"), listable=False)


def test_a_report_that_cannot_be_written_names_the_file(small: Path, tmp_path: Path) -> None:
    # A full disk after the run: it was "[Errno 28] No space left on device", naming no file
    # and not saying that the run itself was committed.
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    job = tmp_path / "w.fio"
    job.write_text("[w]\nrw=randwrite\nbs=4k\nsize=1m\n")
    before = image_digest(small)
    r = run_cli("fio", small, job, "--output", "/dev/full", "--scratch", check=False)
    line = assert_one_line_error(r, "--output /dev/full: No space left on device")
    assert "committed" not in line and image_digest(small) == before
    r = run_cli("fio", small, job, "--output", "/dev/full", check=False)
    assert_one_line_error(r, f"--output /dev/full: No space left on device; the run is committed to {small}; only its report is lost")


# --------------------------------------------------------------------------- locked image


HOLDER = textwrap.dedent(
    """
    import sys, time
    from ssdtwin import Drive
    d = Drive.open(sys.argv[1], writable=True)
    print("locked", flush=True)
    sys.stdin.read()  # hold the image until the test closes our stdin
    """
)


def test_image_locked_by_another_process(small: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(small)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        for args in (
            ["precondition", small, "--rand", "4k", "--amount", "1MiB"],
            ["nvme", "delete-ns", small, "-n", "1"],
            ["nvme", "format", small, "-n", "1"],
            ["power-cycle", small],
        ):
            r = run_cli(*args, check=False)
            assert_one_line_error(r, f"{small} is in use by another ssdtwin process (pid {holder.pid}); stop it first")
        # Readers are not blocked by a writer: they see the last committed state.
        run_cli("nvme", "list", small)
        run_cli("nvme", "smart-log", small)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    before = image_digest(small)
    # The lock goes with the process: the image is writable again.
    run_cli("precondition", small, "--rand", "4k", "--amount", "1MiB", "-q")
    assert image_digest(small) != before


def test_lock_of_a_killed_process_is_released(small: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(small)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    holder.kill()
    holder.wait(timeout=30)
    run_cli("precondition", small, "--rand", "4k", "--amount", "1MiB", "-q")
    run_cli("check", small)


# --------------------------------------------------------------------------- no traceback, whatever the input

# Every verb fed what a user can get wrong: paths that are missing, plain files or foreign
# directories; numbers out of their NVMe field's range, negative, not numbers, not finite;
# unknown names. Each must be one line on stderr and a non-zero exit (2 for what the
# argument parser refuses), never a Python traceback or a Rust panic.
NO_TRACEBACK = [
    "models nosuch",
    "models -o xml",
    "create {tmp}/n --model {cm6} --seed -1",
    "create {tmp}/n --model {cm6} --seed 99999999999999999999999",
    "create {tmp}/n --model {cm6} --seed abc",
    "create {tmp}/n --model ''",
    "create {file}/sub --model {cm6} --scale 1/454",
    "create {tmp}/n --model {cm6} --scale 1/-3",
    "create {tmp}/n --model {cm6} --scale 1/1e3",
    "check {missing}",
    "check {file}",
    "check {foreign}",
    "power-cycle {file}",
    "power-cycle {foreign}",
    "precondition {d} --rand 4k -n -1",
    "precondition {d} --rand 4k -n 99999999999",
    "precondition {d} --seq 128k --loops nan",
    "precondition {d} --seq 128k --loops inf",
    "precondition {d} --seq 128k --loops 1e30",
    "precondition {d} --rand 4k --amount -1x",
    "precondition {d} --rand 4k --amount 1e400x",
    "precondition {d} --rand 4k --amount nanx",
    "precondition {d} --rand 4k --amount 1e30x",
    "precondition {d} --rand 4k --seed -5",
    "precondition {d} --rand 4k --seed 99999999999999999999999",
    "precondition {d} --seq 1t",
    "precondition {d} --rand 4k --amount 99999999999999999999999",
    "precondition {d} --rand -4k",
    "waf {d} -- no-such-program-here",
    "waf {missing} -- true",
    "demo --sizes abc",
    "demo --sizes 5",
    "demo --sizes 0",
    "demo --sizes nan",
    "demo --sizes ''",
    "demo --scale 1/0",
    "demo --model nosuch",
    "demo --seed -1",
    "fio {d} {tmp}",
    "fio {d} {tmp}/nosuch.fio",
    "fio {missing} {job}",
    "fio {file} {job}",
    "fio {d} {job} --namespace 9",
    "fio {d} {job} --namespace -1",
    "fio {d} {job} --output {tmp}/nowhere/out.json",
    "fio {d} {job} --output {tmp}",
    "fio {d} {job} --output-format xml",
    "fio {d} {job} --log-dir {file}",
    "fio {d} {job} --seed -1",
    "serve {d}",
    "serve {d} --listen junk",
    "serve {d} --listen 127.0.0.1:99999",
    "serve {d} --listen nosuchhost.invalid:10809",
    "serve {d} --metrics junk --listen 127.0.0.1:0",
    "serve {d} --unix {tmp}/nowhere/sock",
    "serve {foreign} --listen 127.0.0.1:0",
    "serve {file} --listen 127.0.0.1:0",
    "serve {missing} --listen 127.0.0.1:0",
    "serve {d} --listen 127.0.0.1:0 --spin-us 99999999999",
    "serve {d} --listen 127.0.0.1:0 --pace fast",
    "serve {d} --listen 127.0.0.1:0 --tls-verify-peer",
    "serve {d} --listen 127.0.0.1:0 --send-timeout inf",
    "serve {d} --listen 127.0.0.1:0 --send-timeout 1e300",
    "serve {d} --listen 127.0.0.1:0 --handshake-timeout nan",
    "serve {d} --listen 127.0.0.1:0 --handshake-timeout 1e300",
    "calibrate --tol 0",
    "calibrate --tol nan",
    "calibrate --scale abc",
    "calibrate nosuch",
    "reproduce nosuch",
    "reproduce cm6 --scale 1/0",
    "reproduce cm6 -o xml",
    "reproduce cm6 --seed -1",
    "reproduce cm6 --sizes 9",
    "reproduce p5316 --sizes 3.2",
    "reproduce pblaze5 --part nosuch",
    "reproduce pblaze5 --part doublewrite --quick",
    "reproduce pblaze5 --threads 4",
    "reproduce cm6 --part doublewrite",
    "reproduce pblaze5 --part doublewrite --threads 7",
    "reproduce pblaze5 --part doublewrite --threads 0",
    "reproduce pblaze5 --part doublewrite --threads x",
    "reproduce pblaze5 --part doublewrite --placements shared,shared",
    "reproduce pblaze5 --part doublewrite --placements cloud",
    "reproduce pblaze5 --part doublewrite --scale 1/99999",
    "reproduce pblaze5 --part doublewrite --drive-state full",
    "reproduce pblaze5 --part doublewrite --drive-state trimmed,trimmed",
    "reproduce pblaze5 --part mariadb --drive-state written",
    "reproduce pblaze5 --drive-state written",
    "reproduce pblaze5 --part mariadb --threads 4,8",
    "reproduce pblaze5 --part mariadb --run-s 0",
    "bench rate --ios 0",
    "bench rate --rate-iops 0",
    "bench rate --ios 100000000000",
    "bench engine --seconds 0",
    "bench engine --seconds nan",
    # the fio job's runtime: inf was an OverflowError, 1e300 a FioJobError, both tracebacks
    "bench engine --scale 1/407 --seconds inf",
    "bench engine --scale 1/407 --seconds 1e300",
    # fio keeps rate_iops in 32 bits: the unlimited runs went first, then the job failed
    "bench rate --scale 1/407 --ios 1000 --rate-iops 99999999999999999999",
    "bench engine --numjobs 0",
    "bench engine --model nosuch",
    "bench engine --scale x",
    "bench ftl --steady -1",
    "bench ftl --model nosuch",
    "bench ftl --steady 1000",
    "bench ftl --count 0",
    "bench ftl --count nan",
    "bench ftl --inflight 0",
    "bench ftl --inflight 65",
    "bench ftl --rmw-ops 0",
    "bench ftl --scale 1/0",
    "bench ftl --partitions 3",
    "bench ftl --partitions 32",
    "bench ftl --threads -1",
    "bench nbd --seconds 0",
    "bench nbd --seconds inf",
    "bench nbd --size junk",
    "bench nosuch",
    "nosuch",
    "nvme nosuch",
    "nvme list {file}",
    "nvme list {foreign}",
    "nvme list {missing}",
    "nvme list {d} -o junk",
    "nvme id-ctrl {d} -o junk",
    "nvme id-ns {d} -n -1",
    "nvme id-ns {d} -n 4294967296",
    "nvme create-ns {d} -s 1e3 -c 1e3",
    "nvme create-ns {d} -s 99999999999999999999999 -c 99999999999999999999999",
    "nvme create-ns {d} -s 100 -c 100 -b -512",
    "nvme create-ns {d} -s 100 -c 100 -f -1",
    "nvme create-ns {d} -s 100 -c 100 -f 99999999999",
    "nvme create-ns {d} -s 100 -c 100 -m 5",
    "nvme delete-ns {d} -n x",
    "nvme delete-ns {d} -n -1",
    "nvme delete-ns {d} -n 0x100000000",
    "nvme attach-ns {d} -n 1 -c ''",
    "nvme attach-ns {d} -n 1 -c 99999999999",
    "nvme attach-ns {d} -n -1 -c 1",
    "nvme detach-ns {d} -n 99999999999",
    "nvme format {d} -n 1 --ses -1",
    "nvme format {d} -n 1 -l -1",
    "nvme format {d} -n 1 --ses 99999999999",
    "nvme get-feature {d} -f -1",
    "nvme get-feature {d} -f 0x100000000",
    "nvme get-feature {d} -f 2 -n -1",
    "nvme set-feature {d} -f 2 -v -1",
    "nvme set-feature {d} -f 2 -v 0x1ffffffff",
    "nvme smart-log {file}",
    "nvme vendor-log {foreign}",
]


@pytest.mark.parametrize("template", NO_TRACEBACK)
def test_no_traceback_whatever_the_input(small: Path, tmp_path: Path, template: str) -> None:
    import shlex

    (tmp_path / "file").write_text("not an image\n")
    (tmp_path / "foreign").mkdir()
    (tmp_path / "job.fio").write_text("[j]\nrw=read\nsize=1m\n")
    args = shlex.split(
        template.format(
            d=small,
            tmp=tmp_path,
            cm6=CM6,
            file=tmp_path / "file",
            foreign=tmp_path / "foreign",
            missing=tmp_path / "missing",
            job=tmp_path / "job.fio",
        )
    )
    before = image_digest(small)
    r = run_cli(*args, check=False)
    assert "Traceback" not in r.stderr and "panicked" not in r.stderr, r.stderr
    assert r.returncode in (1, 2), f"exit {r.returncode}: {r.stderr}"
    assert_one_line_error(r, status=r.returncode)
    assert image_digest(small) == before, f"{template} changed the image"
    assert not (tmp_path / "n").exists(), "a failed create left a directory behind"


# --------------------------------------------------------------------------- predictable latency (IO Determinism)


def test_predictable_latency_refusals(small: Path, tmp_path: Path) -> None:
    # A drive without NVM Sets has no per-set windows.
    fails_cleanly(
        small,
        "nvme",
        "set-feature",
        str(small),
        "-f",
        "0x13",
        "-V",
        "1",
        "-c",
        "1",
        needles=("INVALID_FIELD(0x4002)", "without NVM Sets"),
        listable=False,
    )
    fails_cleanly(small, "nvme", "predictable-lat-log", str(small), "-i", "1", needles=("INVALID_FIELD", "without NVM Sets"))
    pb5 = tmp_path / "pb5"
    run_cli("create", pb5, "--model", "memblaze-pblaze5-910-3.84t", "--scale", "1/256", "--nvm-sets", "2")
    fails_cleanly(
        pb5,
        "nvme",
        "set-feature",
        str(pb5),
        "-f",
        "0x14",
        "-V",
        "1",
        "-c",
        "1",
        needles=("CMD_SEQ_ERROR(0x400c)", "not in Predictable Latency Mode"),
        listable=False,
    )
    fails_cleanly(
        pb5,
        "nvme",
        "set-feature",
        str(pb5),
        "-f",
        "0x13",
        "-V",
        "3",
        "-c",
        "1",
        needles=("INVALID_FIELD", "NVM Set 3 does not exist", "1..=2"),
        listable=False,
    )
    fails_cleanly(
        pb5, "nvme", "predictable-lat-log", str(pb5), "-i", "0", needles=("INVALID_FIELD", "NVM Set 0 does not exist"), listable=False
    )
    run_cli("nvme", "set-feature", pb5, "-f", "0x13", "-V", "1", "-c", "1")
    # Entering the deterministic window before NDWIN Time Minimum has passed.
    fails_cleanly(
        pb5,
        "nvme",
        "set-feature",
        str(pb5),
        "-f",
        "0x14",
        "-V",
        "1",
        "-c",
        "1",
        needles=("CMD_SEQ_ERROR(0x400c)", "0 ms of its minimum 1000 ms"),
        listable=False,
    )
    fails_cleanly(pb5, "nvme", "set-feature", str(pb5), "-f", "0x14", "-V", "1", "-c", "3", needles=("INVALID_FIELD", "window select 3"))


# --------------------------------------------------------------------------- Asymmetric Namespace Access


def test_ana_refusals(small: Path, tmp_path: Path) -> None:
    fails_cleanly(
        small,
        "nvme",
        "ana-state",
        str(small),
        "-g",
        "1",
        "-s",
        "standby",
        needles=("INVALID_FIELD(0x4002)", "ANA state 'standby' is not supported", "persistent-loss"),
        listable=False,
    )
    fails_cleanly(
        small, "nvme", "ana-state", str(small), "-g", "2", "-s", "inaccessible", needles=("INVALID_FIELD", "ANA group 2 does not exist")
    )
    pb5 = tmp_path / "pb5"
    run_cli("create", pb5, "--model", "memblaze-pblaze5-910-3.84t", "--scale", "1/256")
    fails_cleanly(
        pb5,
        "nvme",
        "ana-state",
        str(pb5),
        "-g",
        "1",
        "-s",
        "inaccessible",
        needles=("INVALID_FIELD", "does not report Asymmetric Namespace Access"),
        listable=False,
    )
    fails_cleanly(pb5, "nvme", "ana-log", str(pb5), needles=("INVALID_LOG_PAGE", "log page 0x0c"))


# --------------------------------------------------------------------------- LBA status (rebuild assist)


def test_lba_status_refusals(small: Path) -> None:
    fails_cleanly(
        small,
        "nvme",
        "get-lba-status",
        str(small),
        "-n",
        "1",
        "-a",
        "0x12",
        needles=("INVALID_FIELD(0x4002)", "action type 0x12"),
        listable=False,
    )
    fails_cleanly(small, "nvme", "get-lba-status", str(small), "-n", "2", needles=("INVALID_NS(0x400b)",), listable=False)
    fails_cleanly(
        small, "nvme", "inject-media-error", str(small), "-n", "1", "-s", "99999999999", "-c", "1", needles=("LBA_RANGE(0x4080)",)
    )
