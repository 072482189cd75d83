"""`ssdtwin fio --converge`: a round timed until its figures converge, the rest carried
through the FTL untimed (docs/fio.md, "Converging rounds"). Checked from what a user reads:
the JSON report's figures and its ``ssdtwin.timing`` object, the stderr note, and the
drive's SMART counters afterwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ssdtwin.pts.measurements import timing_columns
from ssdtwin.pts.twin import converge_rule
from twin import copy_image, run_cli, run_fio, without_timestamps

HEAD = "[global]\nioengine=libaio\ndirect=1\nbs=4k\nsize=1g\ntime_based=1\nruntime=2\n"
READS = HEAD + "[r]\nrw=randread\niodepth=32\n"
WRITES = HEAD + "[w]\nrw=randwrite\niodepth=32\n"


def iops(doc: dict[str, Any], ddir: str) -> float:
    return float(doc["jobs"][0][ddir]["iops"])


def smart(d: Path) -> dict[str, Any]:
    return run_cli("nvme", "smart-log", d, "-o", "json").json()


def near(got: float, want: float, tol: float) -> bool:
    return abs(got - want) <= tol * abs(want)


def test_plain_fio_does_not_converge_and_its_report_has_no_timing(small: Path, tmp_path: Path) -> None:
    r = run_fio(small, READS, tmp_path / "plain")
    assert "timing" not in r.doc["ssdtwin"] and "waf" in r.doc["ssdtwin"]  # the drive's WAF over the run, no converging
    assert "fast-forward" not in r.cli.stderr


def test_a_converged_read_round_reports_what_the_full_round_does(small: Path, tmp_path: Path) -> None:
    other = copy_image(small, tmp_path / "other")
    full = run_fio(small, READS, tmp_path / "full")
    conv = run_fio(other, READS, tmp_path / "conv", "--converge")
    timing = conv.doc["ssdtwin"]["timing"]
    assert set(timing) == {
        "rule",
        "timed_in_full",
        "timed_ns",
        "fast_forward_ns",
        "timed_share",
        "fast_forward_ios",
        "timed_to_end",
        "samples",
        "figures",
    }
    assert timing["timed_in_full"] is None and 0 < timing["timed_share"] < 0.5 and timing["fast_forward_ios"] > 0
    assert timing["timed_to_end"] is None  # reads: no GC
    assert {f["figure"] for f in timing["figures"]} == {"iops", "bw", "lat_mean"}
    assert all(f["rel_half_width"] <= timing["rule"]["rel_half_width"] for f in timing["figures"])
    assert "in fast-forward" in conv.cli.stderr and "95 % confidence" in conv.cli.stderr
    assert near(iops(conv.doc, "read"), iops(full.doc, "read"), 0.01)
    assert near(conv.doc["jobs"][0]["read"]["clat_ns"]["mean"], full.doc["jobs"][0]["read"]["clat_ns"]["mean"], 0.01)
    # The untimed reads are counted on the drive as the timed ones are.
    s_full, s_conv = smart(small), smart(other)
    assert near(s_conv["host_read_commands"], s_full["host_read_commands"], 0.01)


def test_a_converged_write_round_leaves_the_drive_where_the_full_round_does(fresh: Path, tmp_path: Path) -> None:
    # A fresh drive: 2 s of writes fill a quarter of it, no GC, so the rate is stationary
    # (on the small written image GC cycles swing IOPS by 10 % over seconds: timed in full).
    other = copy_image(fresh, tmp_path / "other")
    full = run_fio(fresh, WRITES, tmp_path / "full")
    conv = run_fio(other, WRITES, tmp_path / "conv", "--converge")
    timing = conv.doc["ssdtwin"]["timing"]
    assert timing["timed_in_full"] is None and timing["timed_share"] < 1
    assert near(iops(conv.doc, "write"), iops(full.doc, "write"), 0.01)
    s_full, s_conv = smart(fresh), smart(other)
    assert near(s_conv["host_write_commands"], s_full["host_write_commands"], 0.01)
    assert near(s_conv["data_units_written"], s_full["data_units_written"], 0.01)


def test_a_round_the_rule_does_not_apply_to_is_timed_in_full_and_says_why(small: Path, tmp_path: Path) -> None:
    other = copy_image(small, tmp_path / "other")
    job = READS.replace("iodepth=32\n", "iodepth=4\nthinktime=100\n")
    full = run_fio(small, job, tmp_path / "full")
    conv = run_fio(other, job, tmp_path / "conv", "--converge")
    assert "think time" in conv.doc["ssdtwin"]["timing"]["timed_in_full"]
    assert conv.doc["ssdtwin"]["timing"]["timed_share"] == 1.0
    assert without_timestamps(conv.doc["jobs"]) == without_timestamps(full.doc["jobs"])
    assert "timed in full" in conv.cli.stderr


def test_pts_rows_carry_the_timed_share_and_the_widest_interval() -> None:
    doc = {
        "ssdtwin": {
            "timing": {
                "timed_ns": 3_000_000_000,
                "timed_share": 0.05,
                "figures": [
                    {"figure": "iops", "rel_half_width": 0.001},
                    {"figure": "iops", "rel_half_width": 0.004},
                    {"figure": "lat_mean", "rel_half_width": None},
                ],
            }
        }
    }
    cols = timing_columns(doc)
    assert cols == {"timed_s": 3.0, "timed_share": 0.05, "iops_ci_rel": 0.004, "lat_mean_ci_rel": float("inf")}
    assert timing_columns({"ssdtwin": {"ignored_options": []}}) == {}
    # IOPS and bandwidth only; rounds that write are timed in full (the drive's state exact)
    assert converge_rule("iops") == converge_rule("tp") == converge_rule("hir") == {"latency": False, "writes": False}
    assert converge_rule("curve") == {"percentiles": [99.0, 99.9], "writes": False}  # its table's latencies
    for test in ("lat", "wsat", "xsr", "cbw", "dirth"):  # their reports show the maximum latency
        assert converge_rule(test) is None, test
