"""Host stacks end to end (docs/host.md): a stack image over a P5316 image, fio
through it, its counters against the drive's own, a drive changed underneath refused, and
bad input refused in one line with both images untouched."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from test_bad_input import assert_one_line_error
from twin import P5316, check_image, copy_image, image_digest, make_two_namespaces, run_cli

JOB = """
[global]
ioengine=libaio
direct=1
bs=4k
rw=randwrite
size=1g
io_size=256m
iodepth=8
randrepeat=1

[w]
"""


@pytest.fixture(scope="session")
def p5316_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A factory-fresh P5316 at 1/256 (60 GB, 64 KiB IU), made once."""
    d = tmp_path_factory.mktemp("p5316") / "p5316"
    run_cli("create", d, "--model", P5316, "--scale", "1/256")
    return d


@pytest.fixture
def p5316(tmp_path: Path, p5316_template: Path) -> Path:
    return copy_image(p5316_template, tmp_path / "p5316")


def make_tier(tmp_path: Path, drive: Path) -> Path:
    """TMP/tier: a 64 MiB PMem write-shaping tier (iu-fill) in front of `drive`."""
    stack = tmp_path / "tier"
    run_cli("stack", stack, "--drive", drive, "--shaping", "pmem:64MiB")
    return stack


def counters(stack: Path) -> dict:
    return run_cli("stack", stack, "--show", "-o", "json").json()


@pytest.mark.parametrize("policy", ["iu-fill", "log"])
def test_fio_through_a_stack_commits_tier_and_drive(tmp_path: Path, p5316: Path, policy: str) -> None:
    stack = tmp_path / "tier"
    # log: an 8 GiB host-mapped area keeps the host map (state.json) small for CI.
    area = ["--area", "8GiB"] if policy == "log" else []
    run_cli("stack", stack, "--drive", p5316, "--shaping", "pmem:128MiB", "--policy", policy, *area)
    assert (stack / "stack.toml").read_text().startswith('format = "ssdtwin-stack"')
    job = tmp_path / "w.fio"
    job.write_text(JOB)
    out = run_cli("fio", stack, job, "--output-format", "json").json()
    assert out["jobs"][0]["write"]["io_bytes"] == 256 << 20
    c = counters(stack)
    assert c["host_write_bytes"] == 256 << 20
    # Every byte the drive's vendor log counts as host-written came from the stack.
    assert c["drive_host_write_bytes"] == c["stack_drive_write_bytes"] > 0
    assert c["end_to_end_waf_window_raw"] == pytest.approx(c["tier_waf"] * c["drive_waf_window_raw"])
    # 256 MiB of a 60 GB namespace, no GC cycle: the drive's ratio is a window's, not its WAF.
    assert c["drive_waf_verdict"] == "insufficient" and c["drive_waf"] is None and c["end_to_end_waf"] is None
    assert c["drive_waf_host_bytes"] == c["drive_host_write_bytes"]
    assert c["resident_bytes"] <= 128 << 20
    vendor = run_cli("nvme", "vendor-log", p5316, "-o", "json").json()
    assert vendor["host_write_bytes"] == c["drive_host_write_bytes"]
    # A second run continues from the committed tier.
    run_cli("fio", stack, job, "--output-format", "json")
    assert counters(stack)["host_write_bytes"] == 512 << 20
    check_image(p5316)


def test_a_drive_changed_underneath_is_refused(tmp_path: Path, p5316: Path) -> None:
    stack = make_tier(tmp_path, p5316)
    job = tmp_path / "w.fio"
    job.write_text(JOB)
    run_cli("fio", stack, job)
    run_cli("fio", p5316, job)  # the drive alone: the tier's view of it is now stale
    before = (image_digest(p5316), (stack / "state.json").read_bytes())
    r = run_cli("fio", stack, job, check=False)
    assert_one_line_error(r, str(stack), "changed since the stack last ran")
    assert (image_digest(p5316), (stack / "state.json").read_bytes()) == before


def test_a_missing_drive_is_named(tmp_path: Path, p5316: Path) -> None:
    stack = make_tier(tmp_path, p5316)
    moved = p5316.rename(tmp_path / "elsewhere")
    job = tmp_path / "w.fio"
    job.write_text(JOB)
    assert_one_line_error(run_cli("fio", stack, job, check=False), "its drive", "is missing")
    moved.rename(p5316)


def test_a_bad_tier_in_state_json_is_named_by_its_key_there(tmp_path: Path, p5316: Path) -> None:
    """A state.json whose tier parameters do not hold is refused naming the key it holds
    (it said `high_watermark 0`, a key no file has)."""
    stack = make_tier(tmp_path, p5316)
    state = json.loads((stack / "state.json").read_text())
    state["stack"]["tier"]["config"]["high_watermark_pct"] = 0
    (stack / "state.json").write_text(json.dumps(state))
    assert_one_line_error(
        run_cli("stack", stack, "--show", check=False), "state.json: stack state: high_watermark_pct 0: 1 to 100 (percent of the tier)"
    )
    check_image(p5316)


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--drive", "{missing}", "--shaping", "pmem:64MiB"], ("--drive", "no drive image")),
        (["--shaping", "dram:1GiB"], ("--shaping dram:1GiB", "capacity 1073741824: at most 67108864")),
        (["--shaping", "flash:1GiB"], ("unknown media 'flash'", "pmem, optane-ssd, dram")),
        (["--shaping", "pmem"], ("--shaping pmem: MEDIA:SIZE",)),
        (["--shaping", "pmem:64MiB", "--policy", "lru"], ("--policy lru: one of iu-fill, log",)),
        (
            ["--shaping", "pmem:64MiB", "--high-watermark", "50", "--low-watermark", "70"],
            ("--low-watermark 70: 0 to --high-watermark - 1 (49)",),
        ),
        (["--shaping", "pmem:64MiB", "--high-watermark", "120"], ("--high-watermark 120: 1 to 100",)),
        (["--shaping", "pmem:64KiB"], ("capacity 65536: a multiple of 4096 from 1048576",)),
        (["--shaping", "pmem:64MiB", "--destage-concurrency", "0"], ("--destage-concurrency 0: 1 to 1024",)),
        # A negative value was "tier parameters: OverflowError: out of range integral type conversion".
        (["--shaping", "pmem:64MiB", "--high-watermark", "-5"], ("--high-watermark -5: 1 to 100",)),
        (["--shaping", "pmem:64MiB", "--destage-concurrency", "-1"], ("--destage-concurrency -1: 1 to 1024",)),
        (["--shaping", "pmem:64MiB", "--policy", "log", "--host-op", "-20"], ("--host-op -20: 5 to 50",)),
        (
            ["--shaping", "pmem:64MiB", "--policy", "log", "--area", "100"],
            ("the default --band 1048576: the host-mapped area, --area 100 must hold at least 8 bands",),
        ),
        (["--shaping", "pmem:64MiB", "--policy", "log", "--area", "1TiB"], ("--area 1099511627776: at most the namespace's",)),
        (["--shaping", "pmem:64MiB", "--policy", "log", "--host-op", "60"], ("--host-op 60: 5 to 50",)),
        # 8 bands with 20 % spare (1.6 bands): the host GC, which runs below 3 free bands,
        # could find every closed band full (accepted; a fio run through it never ended).
        (
            ["--shaping", "pmem:64MiB", "--policy", "log", "--area", "1GiB", "--band", "128MiB"],
            ("--band 134217728: too few bands for the default --host-op 20 %: at most 67108864 bytes", "or raise the default --host-op"),
        ),
        # Accepted and silently unused: an area of 0 (all of it) and the log's options under iu-fill.
        (["--shaping", "pmem:64MiB", "--policy", "log", "--area", "0"], ("--area 0: above 0 (leave --area out for the whole namespace)",)),
        (["--shaping", "pmem:64MiB", "--area", "1GiB", "--stripe", "64KiB"], ("--stripe, --area: only with --policy log",)),
        # A tier larger than what it fronts never fills: 128 GiB on this 75 GB 1/256 P5316
        # was taken, and its watermarks never acted.
        (
            ["--shaping", "pmem:128GiB"],
            ("--shaping pmem:128GiB: capacity 137438953472: 1048576 to 75231657984 bytes, the namespace it fronts", "never fills"),
        ),
        (
            ["--shaping", "pmem:64MiB", "--policy", "log", "--area", "32MiB", "--stripe", "64KiB"],
            ("--shaping pmem:64MiB: capacity 67108864: 262144 to 33554432 bytes, the host-mapped area (--area)",),
        ),
    ],
)
def test_bad_stacks_are_one_line_and_touch_nothing(tmp_path: Path, p5316: Path, args: list[str], needles: tuple[str, ...]) -> None:
    stack = tmp_path / "tier"
    args = [a.format(missing=tmp_path / "nope") for a in args]
    if "--drive" not in args:
        args = ["--drive", str(p5316), *args]
    before = image_digest(p5316)
    line = assert_one_line_error(run_cli("stack", stack, *args, check=False), *needles)
    # The flags typed, never the core's field names (it said "low_watermark 70: 0 to
    # high_watermark - 1", "band_bytes 134217728: too few bands for host_op 20 %").
    assert not re.search(r"\b[a-z]+_(pct|bytes|watermark|op|concurrency)\b", line), line
    assert image_digest(p5316) == before
    assert not stack.exists()


def test_the_python_api_takes_string_paths_and_says_each_problem_on_a_line(tmp_path: Path, p5316: Path) -> None:
    from ssdtwin import stack as stacklib

    # str paths were an AttributeError ('str' object has no attribute 'exists').
    created = stacklib.create(str(tmp_path / "tier"), str(p5316), "pmem:64MiB", "log")
    config, _ = stacklib.load(str(tmp_path / "tier"))
    assert config["drive"] == created["drive"] == str(p5316.resolve())
    # Two problems printed as a tuple: "('high_watermark 0: ...', 'low_watermark 60: ...')".
    # Each names the keyword argument given (it said `high_watermark`, a name nothing has).
    with pytest.raises(stacklib.StackError) as e:
        stacklib.create(tmp_path / "other", p5316, "pmem:64MiB", "log", high_watermark_pct=0)
    assert str(e.value).splitlines() == [
        "high_watermark_pct 0: 1 to 100 (percent of the tier)",
        "low_watermark_pct 60: 0 to high_watermark_pct - 1 (0)",
    ]
    assert not (tmp_path / "other").exists()
    check_image(p5316)


@pytest.mark.parametrize(
    "damage, needle",
    [
        ("hex", "stack state: a hex map holds a non-hex digit"),
        ("field", "stack state: missing field `counters`"),
        ("shape", "not a stack image's state"),
        # A truncated state.json was "tier: not a readable stack image (Expecting value: ...)".
        ("truncated", "not JSON ("),
    ],
)
def test_a_damaged_stack_state_is_one_line_and_touches_nothing(tmp_path: Path, p5316: Path, damage: str, needle: str) -> None:
    stack = tmp_path / "tier"
    run_cli("stack", stack, "--drive", p5316, "--shaping", "pmem:64MiB", "--policy", "log", "--area", "1GiB")
    state = stack / "state.json"
    saved = json.loads(state.read_text())
    if damage == "hex":
        log = saved["stack"]["tier"]["state"]["Log"]
        log["l2p"] = "zz" + log["l2p"][2:]
    elif damage == "field":
        del saved["stack"]["tier"]["counters"]
    elif damage == "shape":
        saved = [saved]
    state.write_text(json.dumps(saved)[: 300 if damage == "truncated" else None])
    job = tmp_path / "w.fio"
    job.write_text(JOB)
    before = (image_digest(p5316), state.read_bytes())
    for args in (["fio", stack, job], ["stack", stack, "--show"]):
        assert_one_line_error(run_cli(*args, check=False), f"{state}: ", needle)
    assert (image_digest(p5316), state.read_bytes()) == before


@pytest.mark.parametrize(
    "edit, needle",
    [
        (
            ("capacity_bytes = 67108864", "capacity_bytes = 134217728"),
            "[tier] capacity_bytes = 134217728, but the stack was made with 67108864",
        ),
        (('policy = "iu-fill"', 'policy = "log"'), 'policy = "log", but the stack was made with "iu-fill"'),
        (('media = "pmem"', 'media = "optane-ssd"'), 'media = "optane-ssd", but the stack was made with "pmem"'),
        (("high_watermark_pct = 80", "high_watermark_pct = 95"), "[tier] high_watermark_pct = 95, but the stack was made with 80"),
        (("namespace = 1", "namespace = 2"), "namespace = 2, but the stack was made on a 75,231,657,984-byte NAND namespace"),
    ],
)
def test_an_edited_stack_toml_is_refused_not_ignored(tmp_path: Path, p5316: Path, edit: tuple[str, str], needle: str) -> None:
    """Runs use the tier state.json holds: an edited stack.toml (a larger tier, another policy)
    was silently ignored by every run, and --show printed its media and policy as the stack's."""
    stack = make_tier(tmp_path, p5316)
    toml = stack / "stack.toml"
    assert edit[0] in toml.read_text()
    toml.write_text(toml.read_text().replace(edit[0], edit[1]))
    job = tmp_path / "w.fio"
    job.write_text(JOB)
    before = (image_digest(p5316), (stack / "state.json").read_bytes())
    runs = [["fio", stack, job]] + ([] if edit[0].startswith("namespace") else [["stack", stack, "--show"]])
    for args in runs:
        assert_one_line_error(run_cli(*args, check=False), f"{toml}: ", needle)
    assert (image_digest(p5316), (stack / "state.json").read_bytes()) == before


def test_a_job_on_another_namespace_is_one_line(tmp_path: Path) -> None:
    """A job naming a namespace the stack is not on is told the stack is on namespace 1 only
    (it was told that namespace 2, attached, "does not exist"; the engine's own refusal of a
    stack run came out as "ssdtwin fio: error: ssdtwin fio: STACK: ...")."""
    drive = make_two_namespaces(tmp_path / "cm6", 1 << 16, 1 << 13)
    stack = tmp_path / "tier"
    run_cli("stack", stack, "--drive", drive, "--shaping", "pmem:4MiB")
    job = tmp_path / "w.fio"
    job.write_text("[w]\nfilename=ns2\nrw=randwrite\nbs=4k\nsize=1m\n")
    before = (image_digest(drive), (stack / "state.json").read_bytes())
    line = assert_one_line_error(run_cli("fio", stack, job, check=False), f"ssdtwin fio: error: {stack}: job 'w'", "namespace 1 only")
    assert line.count("ssdtwin fio") == 1, line
    assert (image_digest(drive), (stack / "state.json").read_bytes()) == before
    check_image(drive)


def test_a_drive_qos_cap_binds_the_stacks_drive_commands_not_its_tier(tmp_path: Path, p5316: Path) -> None:
    """The namespace's QoS cap is the drive controller's: writes the tier has room for land
    at the fast media's speed (they were held to the drive's 10 MB/s write cap); the drive
    commands the stack sends pass the cap in `DeviceTiming::submit`, as when served."""
    run_cli("nvme", "qos", p5316, "-n", "1", "--write-mbps", "10")
    stack = tmp_path / "tier"
    run_cli("stack", stack, "--drive", p5316, "--shaping", "pmem:256MiB")
    job = tmp_path / "w.fio"
    job.write_text("[w]\nioengine=libaio\nrw=randwrite\nbs=4k\niodepth=32\nsize=16m\n")
    bw = run_cli("fio", stack, job, "--output-format", "json").json()["jobs"][0]["write"]["bw_bytes"]
    assert bw > 100 * 10e6, bw  # PMem speed, not the drive's cap
    c = counters(stack)
    # Every IU filled; those destaged went to the capped drive, the rest wait in the tier.
    assert c["destage_bytes"] > 0 and c["destage_bytes"] + c["resident_bytes"] == 16 << 20, c
    check_image(p5316)


def test_show_and_create_options_are_not_mixed(tmp_path: Path, p5316: Path) -> None:
    """--show beside creation options ignored them (`--show --policy log` showed the iu-fill
    stack), and a missing --drive said "ssdtwin stack: error: ssdtwin stack: ..."."""
    stack = make_tier(tmp_path, p5316)
    before = (stack / "state.json").read_bytes()
    for extra, needle in (
        (["--policy", "log"], "--policy: not with --show"),
        (["--drive", str(p5316), "--shaping", "pmem:1GiB"], "--drive, --shaping: not with --show"),
    ):
        assert_one_line_error(run_cli("stack", stack, "--show", *extra, check=False), needle)
    assert (stack / "state.json").read_bytes() == before
    line = assert_one_line_error(run_cli("stack", tmp_path / "new", check=False), "--drive and --shaping are needed")
    assert line.count("ssdtwin stack") == 1, line
    assert not (tmp_path / "new").exists()


def test_show_reads_json_only(tmp_path: Path, p5316: Path) -> None:
    stack = tmp_path / "tier"
    cfg = run_cli(
        "stack", stack, "--drive", p5316, "--shaping", "optane-ssd:64MiB", "--policy", "log", "--area", "4GiB", "-o", "json"
    ).json()
    assert cfg["media"] == "optane-ssd" and cfg["tier"]["stripe_bytes"] == 1 << 20
    c = counters(stack)
    assert c["host_write_bytes"] == 0 and c["tier_waf"] is None
    assert json.loads((stack / "state.json").read_text())["stack"]["media"]["name"] == "optane-ssd"


def test_show_prints_the_drives_waf_as_a_measurement(tmp_path: Path) -> None:
    """``stack --show`` measures the drive's WAF over the stack's runs (docs/models.md,
    "Measuring WAF"): under a namespace pass and a GC cycle, no WAF, the window said; past
    one pass of the drive's attached namespaces (the WAF is the whole drive's: ns1, the
    stack's, and ns2, 32 MiB each), the WAF with its span. ns1 is written once first, so
    the drive's write buffer is full when the stack is made (a window that fills an empty
    buffer is no WAF of the drive's)."""
    drive = make_two_namespaces(tmp_path / "cm6", 1 << 16, 1 << 13)  # ns1: 32 MiB
    run_cli("precondition", drive, "-n", "1", "--seq", "128k", "--loops", "1")
    stack = tmp_path / "tier"
    run_cli("stack", stack, "--drive", drive, "--shaping", "pmem:8MiB")
    job = tmp_path / "seq.fio"

    def run(size: str, loops: int) -> None:
        job.write_text(f"[w]\nioengine=libaio\ndirect=1\nrw=write\nbs=128k\nsize={size}\nloops={loops}\n")
        run_cli("fio", stack, job, "--output-format", "json")

    run("8m", 1)
    c = counters(stack)
    assert c["drive_waf_basis"] == "timed" and c["drive_waf_verdict"] == "insufficient"
    assert c["drive_waf"] is None and c["end_to_end_waf"] is None and c["drive_waf_window_raw"] is not None
    assert c["drive_waf_namespace_passes"] == pytest.approx(c["drive_host_write_bytes"] / (64 << 20))
    text = run_cli("stack", stack, "--show").stdout
    assert "drive WAF                  not measured (the window spans less than 1 GC cycle or 1 namespace pass" in text
    assert "namespace passes" in text and "(basis: timed, the stack's runs)" in text
    run("32m", 2)
    c = counters(stack)
    assert c["drive_waf_verdict"] == "steady" and c["drive_waf_namespace_passes"] >= 1
    assert c["drive_waf"] == c["drive_waf_window_raw"] > 0
    assert c["end_to_end_waf"] == c["end_to_end_waf_window_raw"]
    assert f"drive WAF                  {c['drive_waf']:.4f} (steady" in run_cli("stack", stack, "--show").stdout


def test_the_shaping_study_shows_the_physics() -> None:
    """`reproduce shaping` at smoke size: the structural predictions, not fitted figures."""
    from ssdtwin.studies.shaping import SMOKE, shaping

    lines: list[str] = []
    out = shaping(size=SMOKE, log=lines.append)
    rows = {(r["workload"], r["policy"]): r for r in out["random_4k"]}
    base, iu, log = (rows["4k-randwrite", p] for p in ("none", "iu-fill", "log"))
    # Each run's drive WAF says what its window spans (docs/models.md, "Measuring WAF").
    steady = base["drive_waf_gc_cycles"] >= 1 or base["drive_waf_namespace_passes"] >= 1
    assert base["drive_waf_basis"] == "timed" and base["drive_waf_verdict"] == ("steady" if steady else "insufficient")
    assert base["drive_waf_host_bytes"] == base["host_bytes"]
    assert sum("[drive timed window: " in line for line in lines) >= len(out["random_4k"]), lines
    # 4 KiB writes on a 64 KiB IU: the drive alone read-modify-writes each one.
    assert base["drive_waf"] > 8
    # The log policy hands the drive only whole, sequential stripes: no read-modify-write.
    # (Its drive WAF is not yet 1: the drive still collects what preconditioning left.)
    assert log["drive_waf"] < base["drive_waf"] / 4 and log["end_to_end_waf"] < base["end_to_end_waf"] / 4
    # Every byte reached the drive somehow: iu-fill's tier WAF is at most 1 (it never adds bytes).
    assert 0 < iu["tier_waf"] <= 1
    qd1 = {r["policy"]: r for r in out["qd"]}
    assert qd1["log"]["lat_mean_us"] < qd1["none"]["lat_mean_us"] / 4


def test_a_stack_made_for_another_namespace_is_refused_before_the_run() -> None:
    from ssdtwin import Drive
    from ssdtwin import stack as stacklib
    from ssdtwin.fio import parse_string

    small = Drive.in_memory("kioxia-cm6-r-3.84t", scale=454)
    large = Drive.in_memory("kioxia-cm6-r-3.84t", scale=128)
    state = stacklib.new_state("pmem", stacklib.tier_params(large, "iu-fill", 64 << 20))
    run = parse_string("[w]\nrw=randwrite\nbs=64k\nsize=20g\nnumber_ios=2000\n", name="w.fio")
    before = small.vendor_log()
    # Ran until its first write past the small namespace's end (LBA_RANGE), leaving the
    # stack unusable; on a larger namespace than its own it ran, placing writes for another.
    with pytest.raises(ValueError, match=r"^stack: made for a 30,821,974,016-byte namespace of 4096-byte IUs; namespace 1 here"):
        stacklib.run_parsed(small, state, run)
    assert small.vendor_log() == before
    results, _ = stacklib.run_parsed(large, state, run)  # the stack is whole, and runs on its own drive
    assert results[0]["write"]["total_ios"] == 2000
    small.check()
    large.check()


def test_a_full_tier_with_a_high_watermark_of_100_evicts_for_the_waiting_write(tmp_path: Path, p5316: Path) -> None:
    """100 % is in the high watermark's range: the tier then evicts only for a write it has no
    room for. It never started evicting, so the first write past a full tier failed the run
    ("a write of 4096 bytes cannot fit a tier ... that has nothing left to destage")."""
    stack = tmp_path / "tier"
    run_cli("stack", stack, "--drive", p5316, "--shaping", "pmem:1MiB", "--high-watermark", "100")
    job = tmp_path / "w.fio"
    job.write_text("[w]\nioengine=libaio\nrw=randwrite\nbs=4k\nsize=1g\nio_size=4m\niodepth=4\n")
    out = run_cli("fio", stack, job, "--output-format", "json").json()
    assert out["jobs"][0]["write"]["io_bytes"] == 4 << 20
    c = counters(stack)
    assert c["host_write_bytes"] == 4 << 20 and c["evictions"] > 0 and c["stalls"] > 0
    assert c["resident_bytes"] <= 1 << 20
    check_image(p5316)


def test_a_stripe_that_is_not_a_power_of_two_gets_a_band_of_whole_stripes(tmp_path: Path, p5316: Path) -> None:
    """The default band was SPDK's 1 GiB halved: with a 1.5 MiB stripe, 1 GiB, refused as
    "band_bytes 1073741824: a multiple of stripe_bytes", a field nobody had given."""
    stack = tmp_path / "tier"
    run_cli("stack", stack, "--drive", p5316, "--shaping", "pmem:8MiB", "--policy", "log", "--stripe", "1536KiB", "--area", "1GiB")
    tier = counters(stack)
    assert tier["policy"] == "log"
    toml = (stack / "stack.toml").read_text()
    band = int(next(line for line in toml.splitlines() if line.startswith("band_bytes")).split("=")[1])
    assert band % (1536 << 10) == 0 and (1 << 30) // band >= 64


def test_a_trim_through_a_log_stack_takes_the_tiers_map_update(tmp_path: Path, p5316: Path) -> None:
    """A `log` trim unmaps blocks in the tier's map, on the fast media: it took 1 ns, so a
    trim job ran in 0 ms and fio's report left its trims out."""
    stack = tmp_path / "tier"
    run_cli("stack", stack, "--drive", p5316, "--shaping", "pmem:8MiB", "--policy", "log", "--area", "1GiB")
    job = tmp_path / "t.fio"
    job.write_text("[t]\nioengine=libaio\nrw=randtrim\nbs=64k\nsize=256m\nio_size=8m\niodepth=16\n")
    out = run_cli("fio", stack, job, "--output-format", "json").json()
    trim = out["jobs"][0]["trim"]
    assert trim["total_ios"] == 128 and trim["runtime"] > 0
    assert trim["clat_ns"]["min"] >= 1000  # PMem's write latency, 1 us (docs/host.md)
    text = run_cli("fio", stack, job, "--scratch").stdout
    assert "  trim: IOPS=" in text
    check_image(p5316)


def test_check_on_a_stack_image_checks_the_stack_and_its_drive(tmp_path: Path, p5316: Path) -> None:
    """`ssdtwin check STACKDIR` said "not an ssdtwin drive image (no ssdtwin.toml)"."""
    stack = make_tier(tmp_path, p5316)
    job = tmp_path / "w.fio"
    job.write_text(JOB)
    run_cli("fio", stack, job)
    out = run_cli("check", stack).stdout
    assert out.startswith(f"{stack}: stack consistent") and "drive FTL consistent" in out, out
    assert_one_line_error(run_cli("check", stack, "--repair", check=False), "--repair:", f"ssdtwin check {p5316.resolve()} --repair")
    # The drive changed underneath: refused, as a run would be.
    run_cli("fio", p5316, job)
    assert_one_line_error(run_cli("check", stack, check=False), "changed since the stack last ran on it")
    check_image(p5316)


def test_io_a_stack_cannot_map_names_the_job_file_option_before_the_run(tmp_path: Path, p5316: Path) -> None:
    """bs=512 or offset=512 through a stack was refused only once the engine met the I/O,
    naming the job and an offset it drew, not the job file's line and option."""
    stack = make_tier(tmp_path, p5316)
    before = (image_digest(p5316), (stack / "state.json").read_bytes())
    for body, want in [
        ("bs=512\n", "w.fio:3: bs=512: write block sizes [512] are not multiples of the 4096-byte block a host stack maps"),
        ("bs=4k\noffset=512\n", "w.fio:4: offset=512: offset 512 is not a multiple of the 4096-byte block a host stack maps"),
    ]:
        job = tmp_path / "w.fio"
        job.write_text(f"[w]\nrw=randwrite\n{body}io_size=1m\n")
        r = run_cli("fio", stack, job, check=False)
        assert r.returncode == 1 and r.stderr_lines == [f"ssdtwin fio: error: {job.parent}/{want}"], r
    assert (image_digest(p5316), (stack / "state.json").read_bytes()) == before
