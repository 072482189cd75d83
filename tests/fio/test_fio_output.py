"""fio-format output: byte-for-byte against real fio runs, the JSON schema of
fio-sample.json, group_reporting aggregation, and golden snapshots."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import Any

import pytest
from fio_fake_engine import run as fake_run
from fio_realstats import pids_and_time, thread_stats_from_json

from conftest import DATA, REFERENCE, golden
from shape import mismatches
from ssdtwin.fio import EngineResultError, parse, parse_string
from ssdtwin.fio import output as out
from ssdtwin.fio.contract import CloneOut, DirOut, SampleStatOut, StatOut
from ssdtwin.fio.hist import value_to_index
from ssdtwin.fio.stats import IoStat, ThreadStat, aggregate, from_engine

TS_MS = 1795311722860  # the timestamp of fio-sample.json
VERSION = "fio-3.33 (ssdtwin)"  # fixed so goldens do not change with the package version


# --- against the real fio binary ----------------------------------------------------------


def _real(name: str):
    run = parse(DATA / "real" / f"{name}.fio", env={})
    jtxt = (DATA / "real" / f"{name}.jsonplus").read_text()
    ntxt = (DATA / "real" / f"{name}.normal").read_text()
    doc = json.loads(jtxt)
    pids, when = pids_and_time(ntxt)
    threads = []
    for job, pid, clone in zip(doc["jobs"], pids, run.clones):
        ts = thread_stats_from_json(job, pid)
        st = clone.job.state
        # Everything that comes from the job file comes from *our* parser.
        ts.thread_number = clone.thread_number
        ts.options = list(clone.job.options)
        ts.clat_percentiles, ts.lat_percentiles, ts.slat_percentiles = st["clat_percentiles"], st["lat_percentiles"], st["slat_percentiles"]
        ts.percentile_list, ts.percentile_precision = list(st["percentile_list"]), st["percentile_precision"]
        ts.kb_base, ts.sig_figs = st["kb_base"], st["significant_figures"]
        threads.append(ts)
    report = out.report_from_threads(run, threads)
    report.elapsed_s = doc["jobs"][0]["elapsed"]
    report.eta_s = doc["jobs"][0]["eta"]
    when_ms = int(time.mktime(time.strptime(when, "%a %b %d %H:%M:%S %Y"))) * 1000
    return run, report, doc, jtxt, ntxt, when_ms


def _without_ssdtwin(text: str) -> str:
    """Our JSON less ssdtwin's own object, which follows fio's keys (docs/fio.md §6.1)."""
    cut = text.rindex(',\n  "ssdtwin" : {')
    assert text.endswith("\n  }\n}\n")
    return text[:cut] + "\n}\n"


@pytest.mark.parametrize("name", ["r1", "r2"])
def test_json_plus_is_byte_identical_to_fio(name: str) -> None:
    # r1: null engine, numjobs=2, rate limits, description, lat_percentiles, custom
    #     percentile_list; r2: libaio on a disk (usec/msec scaling), psync, kb_base=1000,
    #     bssplit, significant_figures=5. disk_util was removed from r2 (we have no disk).
    run, report, doc, jtxt, _, _ = _real(name)
    mine = out.json_text(run, report=report, plus=True, timestamp_ms=doc["timestamp_ms"], fio_version="fio-3.33")
    assert _without_ssdtwin(mine) == jtxt
    assert json.loads(mine)["ssdtwin"]["ignored_options"] == [
        {"job": e["job"], "option": e["option"], "reason": e["reason"], **({} if e["value"] is None else {"value": e["value"]})}
        for e in run.ignored
    ]


@pytest.mark.parametrize("name", ["r1", "r2"])
def test_json_is_fio_json_without_bins(name: str) -> None:
    run, report, doc, jtxt, _, _ = _real(name)
    plain = re.sub(r',\n *"bins" : \{[^}]*\}', "", jtxt)
    assert _without_ssdtwin(out.json_text(run, report=report, timestamp_ms=doc["timestamp_ms"], fio_version="fio-3.33")) == plain


@pytest.mark.parametrize("name", ["r1", "r2"])
def test_normal_output_is_byte_identical_to_fio(name: str) -> None:
    run, report, _, _, ntxt, when_ms = _real(name)
    assert out.normal_text(run, report=report, timestamp_ms=when_ms, fio_version="fio-3.33") == ntxt


# --- schema -------------------------------------------------------------------------------


def _sample_run():
    text = (REFERENCE / "fio-sample.fio").read_text()
    return parse_string(text, name="fio-sample.fio", env={})


def _keys(obj: Any, path: str = "") -> set:
    keys = set()
    if isinstance(obj, dict):
        for k, v in obj.items():
            keys.add(path + "/" + k)
            if k not in ("percentile", "bins", "job options", "global options"):
                keys |= _keys(v, path + "/" + k)
    elif isinstance(obj, list):
        for v in obj:
            keys |= _keys(v, path + "[]")
    return keys


def test_json_keys_match_fio_sample() -> None:
    run = _sample_run()
    results = fake_run(run.to_engine(64 << 20, 512))
    mine = out.json_dict(run, results, timestamp_ms=TS_MS)
    real = json.loads((REFERENCE / "fio-sample.json").read_text())
    missing = _keys(real) - _keys(mine)
    # We leave out what needs a real disk.
    assert {k for k in missing if not k.startswith("/disk_util")} == set()
    assert {k for k in _keys(mine) - _keys(real) if not k.startswith("/ssdtwin")} == set()
    assert [(e["job"], e["option"]) for e in mine["ssdtwin"]["ignored_options"]] == [(j["jobname"], "direct") for j in real["jobs"]]
    assert len(mine["jobs"]) == len(real["jobs"]) == 3
    for ours, theirs in zip(mine["jobs"], real["jobs"]):
        assert ours["jobname"] == theirs["jobname"] and ours["groupid"] == theirs["groupid"]
        assert ours["job options"] == theirs["job options"]
        assert list(ours["read"]["clat_ns"].get("percentile", {})) == list(theirs["read"]["clat_ns"].get("percentile", {}))
    assert mine["global options"] == real["global options"]
    assert mine["fio version"].startswith("fio-3.33 (ssdtwin")


def test_json_value_types_follow_fio() -> None:
    run = _sample_run()
    text = out.json_text(run, fake_run(run.to_engine(64 << 20, 512)), timestamp_ms=TS_MS)
    # floats print with six decimals, ints without, as fio's json.c does
    assert re.search(r'"iops" : \d+\.\d{6},', text)
    assert re.search(r'"bw" : \d+,', text)
    assert re.search(r'"99.900000" : \d+', text)
    assert '"time" : "' in text and '"timestamp" : 1795311722,' in text


# --- from engine results ------------------------------------------------------------------


_NO_STAT: StatOut = {"n": 0, "min_ns": 0, "max_ns": 0, "sum_ns": 0, "m2": 0.0, "hist": []}
_NO_SAMPLES: SampleStatOut = {"n": 0, "min": 0, "max": 0, "mean": 0.0, "m2": 0.0}
_UNUSED: DirOut = {
    "io_bytes": 0,
    "total_ios": 0,
    "runtime_ns": 0,
    "short_ios": 0,
    "drop_ios": 0,
    "clat": _NO_STAT,
    "slat": _NO_STAT,
    "lat": _NO_STAT,
    "bw_sample_stat": _NO_SAMPLES,
    "iops_sample_stat": _NO_SAMPLES,
}


def _no_io_result(thread_number: int) -> CloneOut:
    return {
        "version": 1,
        "thread_number": thread_number,
        "start_ns": 0,
        "elapsed_ns": 0,
        "runtime_ns": 0,
        "read": _UNUSED,
        "write": _UNUSED,
        "trim": _UNUSED,
        "iodepth_level": (0,) * 7,
        "iodepth_submit": (0,) * 7,
        "iodepth_complete": (0,) * 7,
        "latency_buckets": {"ns": [0] * 10, "us": [0] * 10, "ms": [0] * 12},
        "logs": {},
        "latency_depth": 1,
        "error": 0,
    }


def _one_clone_result(**over: Any) -> CloneOut:
    hist = [(value_to_index(100_000), 3), (value_to_index(200_000), 1)]
    stat: StatOut = {"n": 4, "min_ns": 99_000, "max_ns": 201_000, "sum_ns": 500_000, "m2": 7.5e9, "hist": hist}
    r: CloneOut = {
        "version": 1,
        "thread_number": 1,
        "start_ns": 0,
        "elapsed_ns": 2_500_000_000,
        "runtime_ns": 2_000_000_000,
        "read": {
            **_UNUSED,
            "io_bytes": 4 * 4096,
            "total_ios": 4,
            "runtime_ns": 1_999_000_001,
            "clat": stat,
            "lat": stat,
            "bw_sample_stat": {"n": 2, "min": 19531, "max": 39062, "mean": 29296.5, "m2": 190738512.5},
            "iops_sample_stat": {"n": 2, "min": 5000, "max": 10000, "mean": 7500.0, "m2": 12500000.0},
        },
        "write": _UNUSED,
        "trim": _UNUSED,
        "iodepth_level": (0, 0, 4, 0, 0, 0, 0),
        "iodepth_submit": (0, 4, 0, 0, 0, 0, 0),
        "iodepth_complete": (0, 4, 0, 0, 0, 0, 0),
        "latency_buckets": {"ns": [0] * 10, "us": [0, 0, 0, 0, 0, 0, 3, 1, 0, 0], "ms": [0] * 12},
        "logs": {},
        "latency_depth": 4,
        "error": 0,
    }
    r.update(over)  # type: ignore[typeddict-item]
    return r


def test_hand_made_results_have_the_engines_type() -> None:
    assert mismatches(_one_clone_result(), CloneOut, "CloneOut") == []
    assert mismatches(_no_io_result(2), CloneOut, "CloneOut") == []


def test_from_engine_conversions() -> None:
    run = parse_string("[a]\nrw=read\nioengine=libaio\niodepth=4\n", env={})
    ts = from_engine(_one_clone_result(), run.clones[0])
    d = ts.ddir[0]
    assert d.runtime_ms == 1999  # ns -> us, rounded up to ms like backend.c
    assert (d.clat.n, d.clat.min, d.clat.max, d.clat.mean) == (4, 99_000, 201_000, 125_000.0)
    assert d.clat.stddev == pytest.approx((7.5e9 / 3) ** 0.5)
    assert (d.bw.n, d.bw.min, d.bw.max, d.bw.mean) == (2, 19531, 39062, 29296.5)
    assert (d.iops.n, d.iops.min, d.iops.max) == (2, 5000, 10000)
    assert ts.total_run_time_ms == 2000
    assert (ts.lat_u[6], ts.lat_u[7]) == (3, 1)
    assert ts.io_u_map == [0, 0, 4, 0, 0, 0, 0] and ts.io_u_submit == [0, 4, 0, 0, 0, 0, 0]
    assert ts.total_submit == ts.total_complete == 4 and ts.latency_depth == 4


def test_engine_results_must_match_the_run() -> None:
    run = parse_string("[a]\n[b]\n", env={})
    with pytest.raises(EngineResultError, match=r"no engine result for thread\(s\) \[2\]"):
        out.build_report(run, [_one_clone_result()])
    with pytest.raises(EngineResultError, match="two engine results"):
        out.build_report(run, [_one_clone_result(), _one_clone_result()])
    with pytest.raises(EngineResultError, match="unknown thread"):
        out.build_report(run, [_one_clone_result(), _one_clone_result(thread_number=2), _one_clone_result(thread_number=3)])


def test_percentiles_from_a_synthetic_histogram_in_json() -> None:
    run = parse_string("[a]\nrw=read\npercentile_list=50:75:99\n", env={})
    doc = out.json_dict(run, [_one_clone_result()], timestamp_ms=TS_MS)
    pct = doc["jobs"][0]["read"]["clat_ns"]["percentile"]
    # 3 of 4 samples in the bucket [99328, 100351] (midpoint 99840), 1 in [198656, 200703]
    assert pct == {"50.000000": 99840, "75.000000": 99840, "99.000000": 199680}


# --- group_reporting -----------------------------------------------------------------------


def _ts(name: str, gid: int, clat: Sequence[int], bw: Sequence[int], runtime: int, options: list[Any]) -> ThreadStat:
    ts = ThreadStat(name=name, groupid=gid, thread_number=0, members=1, options=options, percentile_list=[50.0])
    d = ts.ddir[0]
    d.clat = IoStat.from_samples(clat)
    d.lat = IoStat.from_samples([c + 1000 for c in clat])
    for c in clat:
        d.clat_hist[value_to_index(c)] += 1
    d.bw = IoStat.from_samples(bw)
    d.iops = IoStat.from_samples([b // 4 for b in bw])
    d.io_bytes = 4096 * len(clat)
    d.total_ios = len(clat)
    d.runtime_ms = runtime
    ts.total_run_time_ms = runtime
    ts.io_u_map = [len(clat), 0, 0, 0, 0, 0, 0]
    return ts


def test_group_reporting_aggregation_rules() -> None:
    a = _ts("a", 0, [100, 200, 300], [1000, 1200], 2000, [("rw", "randread")])
    b = _ts("b", 0, [1000, 3000], [500, 700, 900], 2500, [("rw", "randwrite")])
    (entry,) = aggregate([(a, True), (b, True)])
    d = entry.ddir[0]
    # name from the first member, options from the last (measured on fio 3.33)
    assert entry.name == "a" and entry.options == [("rw", "randwrite")] and entry.members == 2
    assert (d.io_bytes, d.total_ios, d.runtime_ms) == (4096 * 5, 5, 2500)
    pooled = IoStat.from_samples([100, 200, 300, 1000, 3000])
    assert (d.clat.n, d.clat.min, d.clat.max) == (5, 100, 3000)
    assert d.clat.mean == pytest.approx(pooled.mean) and d.clat.m2 == pytest.approx(pooled.m2)
    # bandwidth samples are "pure sums": min, max and mean add up across members
    assert (d.bw.n, d.bw.min, d.bw.max) == (5, 1500, 2100)
    assert d.bw.mean == pytest.approx(1100 + 700)
    assert entry.total_run_time_ms == 4500 and entry.io_u_map[0] == 5
    assert sum(d.clat_hist) == 5


def test_group_reporting_entries() -> None:
    a = _ts("a", 0, [1], [1], 1, [])
    b = _ts("b", 0, [1], [1], 1, [])
    c = _ts("c", 1, [1], [1], 1, [])
    d = _ts("d", 1, [1], [1], 1, [])
    # without group_reporting each thread has its own entry
    assert [e.name for e in aggregate([(a, False), (b, False), (c, False), (d, False)])] == ["a", "b", "c", "d"]
    # a thread joins the entry before it when it has group_reporting and the same group
    assert [(e.name, e.members) for e in aggregate([(a, True), (b, True), (c, True), (d, True)])] == [("a", 2), ("c", 2)]
    assert [(e.name, e.members) for e in aggregate([(a, True), (b, False), (c, True), (d, True)])] == [("a", 1), ("b", 1), ("c", 2)]


def test_group_reporting_end_to_end_and_bw_agg() -> None:
    run = parse_string(
        "[global]\ngroup_reporting\nioengine=libaio\nfilename=ns1\ntime_based\nruntime=1\n[a]\nrw=randread\nnumjobs=2\n[b]\nrw=randwrite\n[c]\nstonewall\nrw=write\n",
        env={},
    )
    results = fake_run(run.to_engine(1 << 30, 512))
    doc = out.json_dict(run, results, timestamp_ms=TS_MS)
    jobs = doc["jobs"]
    assert [(j["jobname"], j["groupid"], j["job options"]) for j in jobs] == [("a", 0, {"rw": "randwrite"}), ("c", 1, {"rw": "write"})]
    first = jobs[0]
    assert first["read"]["total_ios"] == sum(r["read"]["total_ios"] for r in results[:2])
    assert first["write"]["total_ios"] == results[2]["write"]["total_ios"]
    assert first["read"]["bw_agg"] == pytest.approx(100.0, abs=1.0)
    text = out.normal_text(run, results, timestamp_ms=TS_MS)
    assert "a: (groupid=0, jobs=3): err= 0" in text
    assert text.count("Run status group") == 2


def test_normal_output_skips_threads_without_io() -> None:
    run = parse_string("[a]\n[b]\n", env={})
    text = out.normal_text(run, [_one_clone_result(), _no_io_result(2)], timestamp_ms=TS_MS, header=False)
    assert "a: (groupid=0" in text and "b: (groupid=0" not in text


# --- golden snapshots -------------------------------------------------------------------


def test_golden_sample_run() -> None:
    run = _sample_run()
    results = fake_run(run.to_engine(64 << 20, 512))
    golden("sample_fake.normal", out.normal_text(run, results, timestamp_ms=TS_MS, fio_version=VERSION))
    golden("sample_fake.json", out.json_text(run, results, timestamp_ms=TS_MS, fio_version=VERSION))


def test_golden_mixed_features() -> None:
    run = parse_string(
        "[global]\nioengine=io_uring\nfilename=ns1\ntime_based\nruntime=2\n"
        "[lat]\ndescription=QD1 4k random read\nrw=randread\nlat_percentiles=1\nslat_percentiles=1\n"
        "percentile_list=50:99:99.9:99.999\n"
        "[mixed]\nstonewall\nrw=randrw\nrwmixread=30\nbssplit=4k/50:64k/50,16k\niodepth=32\nnumjobs=2\nsignificant_figures=6\n",
        env={},
    )
    results = fake_run(run.to_engine(1 << 30, 512), mean_lat_ns=2_500_000)
    golden("mixed_fake.normal", out.normal_text(run, results, timestamp_ms=TS_MS, fio_version=VERSION))
    golden("mixed_fake.jsonplus", out.json_text(run, results, plus=True, timestamp_ms=TS_MS, fio_version=VERSION))
