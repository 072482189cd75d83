"""XSR, CBW and DIRTH (PTS tests 6-8, docs/pts.md): the element texts, the point selection
and the settings. A reduced CLI run of each on a small twin, checked against physics
(Little's law in the demand-intensity matrix; random writes leave sequential writes slower
until the drive is rewritten) and rendered in headless Chromium, is in test_records.py: the
run of every PTS test there serves both."""

from __future__ import annotations

from pathlib import Path

import pytest

from ssdtwin.pts import settings, tables
from ssdtwin.pts import tests as T
from ssdtwin.pts.target import PtsError
from twin import run_cli


def test_cbw_element_carries_the_composite_pattern() -> None:
    el = T.cbw_workload().element(40, 32, 16, 60, "")
    text = el.job_text()
    assert el.name == "cbw-40_60-tc32-qd16" and el.bs_bytes == 0
    assert f"bssplit={T.CBW_BSSPLIT}" in text and "random_distribution=zoned:50/5:30/15:20/80" in text
    assert "\nbs=" not in text and "rwmixread=40" in text and "numjobs=32" in text and "iodepth=16" in text
    assert T.dirth_workload(8192, 65).element(65, 1, 1, 60, "").name == "rnd-8k-65_35-tc1-qd1"


def test_the_histogram_points_follow_the_spec() -> None:
    table = [
        {"numjobs": 32, "iodepth": 32, "oio": 1024, "iops": 400e3, "lat_mean_us": 2560.0},
        {"numjobs": 32, "iodepth": 8, "oio": 256, "iops": 380e3, "lat_mean_us": 670.0},
        {"numjobs": 8, "iodepth": 32, "oio": 256, "iops": 390e3, "lat_mean_us": 6500.0},  # above 5 ms: never max
        {"numjobs": 4, "iodepth": 4, "oio": 16, "iops": 200e3, "lat_mean_us": 80.0},
        {"numjobs": 2, "iodepth": 1, "oio": 2, "iops": 40e3, "lat_mean_us": 50.0},
        {"numjobs": 1, "iodepth": 1, "oio": 1, "iops": 20e3, "lat_mean_us": 50.0},
    ]
    table[0]["lat_mean_us"] = 5100.0  # the highest IOPS, but over the limit
    points = tables.di_points(table, 5000.0)
    assert points["max"] == (32, 8)  # the highest IOPS below 5 ms
    assert points["mid"] == (4, 4)  # nearest to (380K + 20K) / 2
    assert points["min"] == (1, 1)


def test_xsr_recovery_is_measured_against_ag1s_end() -> None:
    def seg(i: int, ag: str, bw: float) -> dict:
        return {"phase": ag, "t_start_s": float(i), "t_end_s": float(i + 1), "write_bw_bytes_s": bw}

    rows_ = [seg(i, "AG1", 4e9) for i in range(6)] + [seg(6 + i, "AG2", 2e9) for i in range(3)]
    rows_ += [seg(9, "AG3", 1.5e9), seg(10, "AG3", 3.5e9), seg(11, "AG3", 3.7e9)]
    assert tables.xsr_recovery_s(rows_) == 3.0  # AG3's third segment reaches 3.6 GB/s, 90 % of AG1's 4 GB/s
    assert tables.xsr_recovery_s(rows_[:-1]) is None


def test_xsr_recovery_is_told_to_the_segment() -> None:
    """The recovery time is known only to a segment: with AG3 in one segment there is none to
    give (the message said "after 1.011 s", the one segment's length, as if measured), with
    several it is within the end of the first segment at 90 %, named with its number."""

    def seg(t: float, ag: str, bw: float, length: float = 1.0) -> dict:
        return {"phase": ag, "t_start_s": t, "t_end_s": t + length, "write_bw_bytes_s": bw}

    one = [seg(0.0, "AG1", 4e9, 1.011), seg(1.011, "AG2", 2e9, 1.011), seg(2.022, "AG3", 3.8e9, 1.011)]
    text = tables.xsr_recovery_text(one)
    assert text.startswith("AG3's one segment (1.011 s) averaged 90 % of AG1's final throughput or more")
    assert "cannot time the recovery" in text and "--xsr-segment" in text and "after" not in text
    many = [seg(float(i), "AG1", 4e9) for i in range(3)] + [seg(3.0, "AG2", 2e9)]
    many += [seg(4.0, "AG3", 1.5e9), seg(5.0, "AG3", 3.7e9), seg(6.0, "AG3", 3.9e9)]
    assert tables.xsr_recovery_text(many) == "AG3 back to 90 % of AG1's final throughput in its segment 2 of 3, within 2 s"
    assert tables.xsr_recovery_text(many[:5]) == "AG3 did not return to 90 % of AG1's final throughput in its 1 segment (1 s)"
    slow = many[:4] + [seg(4.0, "AG3", 1.5e9), seg(5.0, "AG3", 2.0e9)]
    assert tables.xsr_recovery_text(slow) == "AG3 did not return to 90 % of AG1's final throughput in its 2 segments (2 s)"


def test_xsr_access_groups_run_their_duration_whatever_the_segment() -> None:
    """Each access group is the fewest equal segments of at most --xsr-segment that make up
    its duration: a segment longer than the group no longer runs whole (a 10 s segment made
    a 1 s group ten times too long), and 2.5 segments' worth is not rounded down to 2."""
    st = settings.Settings(xsr_hours=(0.01, 0.5, 8.0), xsr_segment_s=10.0)
    plan = st.xsr_group_segments(256)
    assert st.xsr_group_seconds(256) == [1.0, 7.031, 112.5]  # 36 s / 256 is below 1 s: 1 s
    assert plan == [(1, 1.0), (1, 7.031), (12, 9.375)]
    for (n, seg_s), group_s in zip(plan, st.xsr_group_seconds(256)):
        assert seg_s <= 10.0 and n * seg_s == pytest.approx(group_s, abs=0.002)
    assert settings.Settings(xsr_hours=(1.0, 1.0, 1.0), xsr_segment_s=1440.0).xsr_group_segments(1) == [(3, 1200.0)] * 3
    # The full drive's defaults divide evenly: 8 h in 60 s segments.
    assert settings.Settings().xsr_group_segments(1) == [(480, 60.0), (360, 60.0), (480, 60.0)]


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"xsr_hours": (8.0, 6.0)}, "--xsr-hours"),
        ({"di_tc": (0, 4)}, "--di-tc"),
        ({"di_pc_intervals": 0}, "--di-pc-intervals"),
        ({"di_rth_s": 0.5}, "--di-rth"),
        ({"dirth_bs": 1000}, "--dirth-bs"),
        ({"dirth_mix": 101}, "--dirth-mix"),
    ],
)
def test_bad_settings_are_one_line_errors(kw: dict, message: str) -> None:
    with pytest.raises(PtsError, match=message) as e:
        settings.Settings(**kw).validate()
    assert "\n" not in str(e.value)


HOSTILE = [1e300, -1, 0, float("nan"), float("inf"), "abc", 1.5, True]
# Hostile values that are a field's own: 0 % reads, a 0 seed, 0 drive fills before judging;
# 1.5 of a number that may be fractional; True for a switch; a purge name (checked once the
# target is open: its methods depend on the target).
ALLOWED = {
    "0": {"iops_mixes", "lat_mixes", "dirth_mix", "seed", "wsat_min_fills", "hir_pre_fills"},
    "1.5": {n for n, f in settings.FIELDS.items() if f[1].split()[-1] in ("float", "seconds")},
    "True": {"wsat_stop_steady", "converge"},
    "'abc'": {"purge"},
}


@pytest.mark.parametrize("name", list(settings.FIELDS))
def test_every_setting_refuses_hostile_values_in_one_short_line(name: str) -> None:
    """1e300, -1, 0, nan, inf, "abc", 1.5 and a bool in every field (through the API, as a
    file of settings would give them): one line naming the field and what it allows, or the
    value is one the field takes. A string was a TypeError traceback, 1.5 repetitions and
    True threads ran, a seed of 1e300 or nan ran."""
    label, kind, allowed = settings.FIELDS[name]
    default = getattr(settings.Settings(), name)
    for v in HOSTILE:
        if isinstance(default, dict):
            value: object = {"tp": (v, 1)}
        elif isinstance(default, tuple) or kind.startswith("list"):
            value = (v, 1.0, 1.0) if name == "xsr_hours" else (v,)
        else:
            value = v
        try:
            settings.Settings(**{name: value}).validate()
        except PtsError as e:
            msg = str(e)
            assert "\n" not in msg and len(msg) <= 150 and label in msg.split(":")[0], (name, v, msg)
            assert any(w in msg for w in ("from", "at most", "<=", "..", "up to", "one of", "True or False")), (
                name,
                v,
                msg,
            )  # what it allows
        else:
            assert name in ALLOWED.get(repr(v) if not isinstance(v, float) or v != 1.5 else "1.5", set()), (name, v, "accepted")
    assert set(settings.FIELDS) == set(settings.Settings.__dataclass_fields__)


def test_run_refuses_bad_keywords_in_one_short_line(tmp_path: Path) -> None:
    """ssdtwin.pts.run's own arguments: an unknown setting listed all 39 fields (a 400-character
    line), a --jobs or round that is no number was a TypeError or ValueError traceback."""
    from ssdtwin.pts import run

    for kw, message in (
        ({"hir_rep": 3}, "unknown setting 'hir_rep' (did you mean 'hir_reps'?"),
        ({"jobs": "2"}, "--jobs '2': a whole number from 1 to 64"),
        ({"round_s": "abc"}, "--round 'abc': a round from 1 s to 1 day"),
        ({"round_s": float("nan")}, "--round nan"),
    ):
        with pytest.raises(PtsError) as e:
            run(str(tmp_path / "none"), "lat", tmp_path / "rep", **kw)  # type: ignore[arg-type]
        assert str(e.value).startswith(message) and len(str(e.value)) <= 150, str(e.value)
    assert not (tmp_path / "rep").exists()


def test_bad_cli_options_leave_nothing_behind(tmp_path: Path) -> None:
    r = run_cli("pts", tmp_path, "--tests", "xsr", "--xsr-hours", "8,x,8", "--report", tmp_path / "rep", check=False)
    assert r.returncode != 0 and len(r.stderr_lines) == 1 and "--xsr-hours" in r.stderr
    assert not (tmp_path / "rep").exists()
