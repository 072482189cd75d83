"""The sweep file's grid (docs/sweep.md), by property and by example: every combination once,
in order; a point's id and seeds come from its parameters, so adding values or reordering axes
leaves other points alone; rate caps split across clones add up; a grid past the points limit
is one line before any point is made. The end-to-end and bad-input tests are in test_sweep.py.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ssdtwin.sweep import config
from test_sweep import TINY, sweep_doc
from twin import CM6, run_cli

# --------------------------------------------------------------------------- the grid

values = st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=4, unique=True)
axes_st = st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), values, min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(axes_st)
def test_expand_gives_every_combination_once_first_axis_slowest(axes: dict[str, list[int]]) -> None:
    combos = config.expand(axes)
    n = 1
    for v in axes.values():
        n *= len(v)
    assert len(combos) == n
    keys = [tuple(c[k] for k in axes) for c in combos]
    assert len(set(keys)) == n
    assert keys == sorted(keys, key=lambda t: tuple(list(axes.values())[i].index(x) for i, x in enumerate(t)))


sizes_st = st.lists(st.sampled_from([3.84, 3.6, 3.52, 3.4, 3.2, 2.88, 2.56, 1.92]), min_size=1, max_size=4, unique=True)
runtimes_st = st.lists(st.sampled_from(["1s", "2s", "500ms"]), min_size=1, max_size=3, unique=True)


@settings(max_examples=25, deadline=None)
@given(sizes_st, runtimes_st, st.sampled_from([3.0, 2.2, 1.94]), st.booleans())
def test_a_point_is_its_parameters_not_its_position(sizes: list[float], runtimes: list[str], extra: float, swap: bool) -> None:
    grid: dict[str, Any] = {"namespace_tb": sizes, "vars": {"RUNTIME": runtimes}}
    if swap:  # the same grid written with its axes the other way round
        grid = {"vars": {"RUNTIME": runtimes}, "namespace_tb": sizes}
    base = config.from_dict(sweep_doc(grid))
    assert len(base.points) == len(sizes) * len(runtimes)
    ids = {p.point_id: p for p in base.points}
    assert len(ids) == len(base.points)
    # A value added to an axis: every old point keeps its id and seeds; the new ones are new.
    more = config.from_dict(sweep_doc({"namespace_tb": [extra, *sizes], "vars": {"RUNTIME": runtimes}}))
    again = {p.point_id: p for p in more.points}
    for pid, p in ids.items():
        assert pid in again and (again[pid].seed, again[pid].image_seed, again[pid].image_key) == (p.seed, p.image_seed, p.image_key)
    assert len(again) == len(ids) + (0 if extra in sizes else len(runtimes))
    # Points that differ only in the job share one image; points of different sizes do not.
    keys = {(p.params["namespace_tb"], p.image_key) for p in more.points}
    assert len({k for _, k in keys}) == len({s for s, _ in keys})


def test_only_the_marketed_size_is_the_whole_drive() -> None:
    """namespace_tb = 3.84 on a 3.84 TB drive (3,840,755,982,336 B) is the whole drive; a
    size near it was taken for it too: 3.845 TB, larger than the drive, ran on all of it."""
    full = 3840755982336
    assert config.namespace_fraction({"preset": CM6, "namespace_tb": 3.84}) is None
    assert config.namespace_fraction({"preset": CM6, "namespace_tb": 3.836}) == 3.836e12 / full
    assert config.namespace_fraction({"preset": CM6, "namespace_tb": 3.845}) == 3.845e12 / full > 1
    assert config.namespace_fraction({"preset": "intel-p5316-15.36t", "namespace_tb": 15.36}) is None


def test_the_same_drive_state_written_two_ways_shares_one_image() -> None:
    by_tb = config.from_dict(sweep_doc({"namespace_tb": [3.2]}))
    by_op = config.from_dict(sweep_doc({"namespace_fraction": [3.2e12 / 3840755982336]}))
    assert by_tb.points[0].image_key == by_op.points[0].image_key
    assert by_tb.points[0].point_id != by_op.points[0].point_id  # different parameters, different rows
    ranged = config.from_dict(sweep_doc({"namespace_tb": {"from": 1.94, "to": 3.84, "count": 20}}))
    assert [p.params["namespace_tb"] for p in ranged.points][:3] == [1.94, 2.04, 2.14]


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 5),
    st.floats(allow_nan=True),
    st.sampled_from(["", "1/454", "x", CM6, "cm6-rand-write", "rand"]),
)
values_any = st.one_of(
    scalars, st.lists(scalars, max_size=3), st.dictionaries(st.sampled_from(["from", "to", "count", "RUNTIME", "x"]), scalars, max_size=3)
)
tables = st.dictionaries(st.sampled_from([*config.AXES, "bogus"]), values_any, max_size=5)


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(st.sampled_from([*config.TOP_KEYS, "bogus"]), st.one_of(values_any, tables, st.lists(tables, max_size=2)), max_size=4)
)
def test_any_sweep_file_is_a_sweep_or_one_config_error(doc: dict[str, Any]) -> None:
    """Whatever the tables hold, loading gives points or a SweepConfigError (one line), never another exception."""
    try:
        sweep = config.from_dict(doc)
    except config.SweepConfigError as e:
        assert "\n" not in str(e)
    else:
        assert sweep.points


def test_loading_a_sweep_takes_time_in_proportion_to_its_points() -> None:
    """10,000 points took a minute to load (a set over every point rebuilt for each point):
    eight times the points must cost about eight times the CPU, not sixty-four."""

    def cpu_s(n: int) -> float:
        doc = sweep_doc({"namespace_tb": {"from": 1.0, "to": 3.84, "count": n}})
        t0 = time.process_time()
        assert len(config.from_dict(doc).points) == n
        return time.process_time() - t0

    cpu_s(50)  # imports and caches
    small, large = min(cpu_s(500) for _ in range(2)), cpu_s(4000)
    assert large < 20 * small, (small, large)


def test_a_grid_past_the_points_limit_is_one_line_before_any_point_is_made(tmp_path: Path) -> None:
    # Two 100,000-value ranges are 10^10 points: expanding them alone ran for hours.
    f = tmp_path / "sweep.toml"
    huge = TINY.replace("[3.84, 3.2, 5.0]", "{ from = 1.0, to = 3.84, count = 100000 }")
    f.write_text(huge.replace("[grid]", '[grid]\nruntime = ["1s", "2s"]'))
    t0 = time.monotonic()
    r = run_cli("sweep", f, "--out", tmp_path / "out", "--in-process", check=False, process=True, timeout=60)
    assert r.returncode == 1 and len(r.stderr_lines) == 1, r.stderr
    assert r.stderr_lines[0] == (
        f"ssdtwin sweep: error: {f}: grid: 400,000 points (2 runtime x 100000 namespace_tb x 2 job); a sweep holds at most 100,000"
    )
    assert time.monotonic() - t0 < 30 and not (tmp_path / "out").exists()


CLONE = st.tuples(st.sampled_from([["read"], ["write"], ["read", "write"]]), st.integers(0, 100))  # directions, rwmixread


@settings(max_examples=300, deadline=None)
@given(st.lists(CLONE, min_size=1, max_size=16), st.integers(1, 10**7))
def test_rate_iops_is_split_into_caps_that_add_up_to_it(clones: list[tuple[list[str], int]], rate: int) -> None:
    """The clones' caps added up to more than rate_iops (3 over 8 clones ran 8 IOPS: each
    got at least 1) or less (1001 over 8: 1000). fio's rate_iops=0 is no cap: a rate too
    small to give each direction of each clone 1 is the point's failure, said so; a mixed
    clone among pure ones must not be left a share of 1 (3 over a randread and a randrw
    clone left the randrw one's reads uncapped: 5.9 IOPS under a cap of 3)."""
    from ssdtwin.sweep.point import adjust_specs

    specs: Any = [{"directions": dirs, "rwmixread": mix} for dirs, mix in clones]
    mixed = [dirs == ["read", "write"] and 0 < mix < 100 for dirs, mix in clones]
    least = len(clones) + sum(mixed)
    if rate < least:
        with pytest.raises(ValueError, match=f"rate_iops {rate}: below {least}, one I/O per second"):
            adjust_specs(specs, {"rate_iops": rate})
        return
    adjust_specs(specs, {"rate_iops": rate})
    caps = [s["rate_iops"] for s in specs]
    assert sum(c["read"] + c["write"] for c in caps) == rate
    assert max(c["read"] + c["write"] for c in caps) - min(c["read"] + c["write"] for c in caps) <= 1  # evenly
    for c, (dirs, mix), is_mixed in zip(caps, clones, mixed):
        both = dirs == ["read", "write"]
        assert (c["read"] >= 1) == ("read" in dirs and (mix > 0 or not both))
        assert (c["write"] >= 1) == ("write" in dirs and (mix < 100 or not both))
        if is_mixed:
            assert abs(c["read"] - (c["read"] + c["write"]) * mix / 100) <= 1  # the share split by rwmixread


def test_a_randrw_clone_beside_a_randread_one_keeps_both_caps_at_the_smallest_rate() -> None:
    from ssdtwin.sweep.point import adjust_specs

    specs: Any = [{"directions": ["read"], "rwmixread": 50}, {"directions": ["read", "write"], "rwmixread": 70}]
    adjust_specs(specs, {"rate_iops": 3})
    assert [s["rate_iops"] for s in specs] == [{"read": 1, "write": 0, "trim": 0}, {"read": 1, "write": 1, "trim": 0}]
