"""`ssdtwin bench ftl` (docs/performance.md, Speed II): the FTL's steady-state rate, its random map lines per host
write and the machine's random read-modify-write rate, in one run. Shapes and physics only:
no assertion on a timing."""

from __future__ import annotations

import math

import pytest

from ssdtwin import Drive, _core
from ssdtwin.commands import cli
from ssdtwin.studies import benchmarks
from twin import run_cli

CM6 = "kioxia-cm6-r-3.84t"


def test_bench_ftl_json_and_table() -> None:
    r = run_cli("bench", "ftl", "--scale", "1/256", "--steady", "0.1", "--count", "0.2", "--rmw-ops", "1048576", "-o", "json")
    res = r.json()  # stdout holds the JSON and nothing else
    assert "machine (before)" in r.stderr and "FTL at" in r.stderr
    assert res["maps_bytes"] == benchmarks.maps_bytes(Drive.in_memory(CM6, scale=256).ftl_info())
    for when in ("rmw_before", "rmw_after"):
        m = res[when]
        assert m["array_bytes"] == res["l2p_bytes"] and m["ops"] == 1 << 20 and m["inflight"] == 32 and m["rmw_per_s"] > 0
    # The same seed, size and count: the same addresses and values, whatever the timing.
    assert res["rmw_before"]["checksum"] == res["rmw_after"]["checksum"]
    c = res["counted_rand_4k"]
    assert c["ios"] == math.ceil(round(0.2 * res["namespace_bytes"]) / 4096)
    # At steady state every random 4 KiB write programs one host IU (the buffer rarely
    # merges random writes) and GC relocates WAF - 1 IUs per host IU, each checked through
    # the L2P; the victims' stale IUs are checked too.
    assert c["host_l2p_per_write"] == pytest.approx(1.0, abs=0.01)
    assert c["gc_relocated_per_write"] == pytest.approx(c["waf"] - c["host_l2p_per_write"], rel=1e-9)
    assert c["waf"] > 2 and c["gc_stale_checks_per_write"] > 0.5
    assert c["touches_per_write"] == pytest.approx((c["host_l2p"] + c["gc_checks"]) / c["ios"])
    assert c["gc_checks"] >= c["gc_relocated"]
    b = res["bound"]
    assert b["touches_per_write"] == c["touches_per_write"]
    assert b["host_writes_per_s_bound"] == pytest.approx(b["rmw_per_s"] / b["touches_per_write"])
    assert b["fraction_of_bound"] == pytest.approx(b["host_writes_per_s"] / b["host_writes_per_s_bound"])
    assert res["steady_rand_4k"]["waf"] > 2
    # Each phase's ratio says what it spans: two namespace passes are the drive's WAF; a
    # tenth of one (0.4 GC cycles at WAF ~4) is a ratio of the window only.
    seq, steady = res["seq_128k_2x"], res["steady_rand_4k"]
    assert (seq["waf_basis"], seq["waf_verdict"], seq["waf_namespace_passes"]) == ("fast_forward", "steady", pytest.approx(2.0))
    assert steady["waf_namespace_passes"] == pytest.approx(0.1, rel=0.01) and steady["waf_gc_cycles"] < 1
    assert steady["waf_verdict"] == "insufficient"
    assert c["waf_verdict"] == ("steady" if c["waf_gc_cycles"] >= 1 else "insufficient")
    lines = {line.split()[0]: line for line in r.stderr.splitlines() if line.split()[:1] in (["seq_128k_2x"], ["steady_rand_4k"])}
    assert lines["seq_128k_2x"].endswith("2.00 namespace passes, " + f"{seq['waf_gc_cycles']:.1f} GC cycles; steady]")
    assert lines["steady_rand_4k"].endswith("GC cycles; under 1 GC cycle or 1 namespace pass: a window ratio, not the drive's WAF]")


@pytest.mark.parametrize("ops", ["1", "1048575"])
def test_bench_ftl_refuses_a_machine_measurement_too_short_to_bound_anything(ops: str) -> None:
    # --rmw-ops 1 timed one operation and the threads' start: 99 RMW/s, a bound of 16 host
    # writes/s and "FTL at 15214305 % of the bound".
    r = run_cli("bench", "ftl", "--scale", "1/407", "--steady", "0.01", "--count", "0.001", "--rmw-ops", ops, "-o", "json", check=False)
    assert (r.returncode, r.stdout) == (2, ""), r.stderr
    want = f"Invalid value for '--rmw-ops': {ops} is not in the range 1048576<=x<=100000000000."
    assert r.stderr_lines == [f"ssdtwin bench ftl: error: {want} (see 'ssdtwin bench ftl --help')"]


@pytest.mark.parametrize("fraction", [0.5, 1.5])
def test_an_ftl_above_its_bound_is_noted(fraction: float) -> None:
    counted = {"touches_per_write": 5.0, "host_l2p_per_write": 1.0, "gc_relocated_per_write": 3.0, "gc_stale_checks_per_write": 1.0}
    bound = {"rmw_per_s": 10e6, "host_writes_per_s_bound": 2e6, "host_writes_per_s": fraction * 2e6, "ftl_rmw_per_s": fraction * 10e6}
    res = {"counted_rand_4k": counted, "bound": bound | {"fraction_of_bound": fraction}, "precondition_seconds": 1.0, "peak_rss_bytes": 1}
    notes = [line for line in benchmarks._bound_lines(res) if line.startswith("note:")]
    assert notes == ([] if fraction < 1 else [notes[0]]) and all("above the bound" in n and "--rmw-ops" in n for n in notes)


def test_counting_leaves_the_drive_precondition_leaves() -> None:
    """The counting copy of the write path changes the drive exactly as the plain one."""
    a, b = (Drive.in_memory(CM6, scale=256) for _ in range(2))
    cap = a.namespaces()[0].bytes
    for d in (a, b):
        d.precondition(1, "seq", 131072, loops=1.0, seed=1)
    ra = a.precondition(1, "rand", 4096, amount_bytes=cap, seed=9)
    rb, touches = b.precondition_touches(1, "rand", 4096, cap, 9)
    assert rb == ra
    assert touches["host_l2p"] > 0 and touches["gc_checks"] > 0
    assert a.ftl_fingerprint() == b.ftl_fingerprint()


def test_rmw_rate_is_deterministic_work() -> None:
    runs = [_core.rmw_rate(1 << 20, 50_000, k, 7) for k in (1, 16, 64)]
    assert len({r["checksum"] for r in runs}) == 1  # the prefetch distance changes no address
    assert _core.rmw_rate(1 << 20, 50_000, 16, 8)["checksum"] != runs[0]["checksum"]
    assert all(math.isfinite(r["rmw_per_s"]) and r["rmw_per_s"] > 0 for r in runs)
    for bad in ((1000, 10, 32, 1), (1 << 20, 0, 32, 1), (1 << 20, 10, 0, 1), (1 << 20, 10, 65, 1)):
        with pytest.raises(ValueError):
            _core.rmw_rate(*bad)


def test_partitions_run_alike_on_any_thread_count() -> None:
    """FTL partitions (docs/performance.md, "FTL partitions on both cores"): fast-forward on one thread or two leaves the same drive (two
    threads on one partition: the write buffer runs ahead of the maps), and splitting the CM6
    into two die groups changes its WAF by far less than 0.5 %."""
    runs = []
    for parts, threads in ((2, 1), (2, 2), (1, 1), (1, 2)):
        d = Drive.in_memory(CM6, scale=256, partitions=parts)
        d.set_fast_forward_threads(threads)
        assert d.ftl_info()["partitions"] == parts
        reports = [d.precondition(1, pat, bs, loops=2.0, seed=seed) for pat, bs, seed in (("seq", 131072, 3), ("rand", 4096, 4))]
        runs.append((reports, d.ftl_fingerprint(), d.vendor_log()))
        d.close()
    (two_1, fp_1, log_1), (two_2, fp_2, log_2), (one, one_fp, one_log), (one_2, one_fp_2, one_log_2) = runs
    assert two_1 == two_2 and fp_1 == fp_2 and log_1 == log_2
    assert one == one_2 and one_fp == one_fp_2 and one_log == one_log_2
    assert two_1[1].waf == pytest.approx(one[1].waf, rel=0.005)
    assert two_1[1].waf > 3.5  # steady random writes: GC ran in both partitions


def test_rmw_rate_on_threads_is_deterministic_work() -> None:
    a, b = (_core.rmw_rate(1 << 21, 40_000, 16, 7, 2) for _ in range(2))
    assert a["checksum"] == b["checksum"] and a["threads"] == 2 and a["ops"] == 40_000
    assert a["checksum"] != _core.rmw_rate(1 << 21, 40_000, 16, 7, 1)["checksum"]  # other parts, other seeds
    with pytest.raises(ValueError):
        _core.rmw_rate(1 << 20, 10, 32, 1, 0)


def test_scale_beyond_memory_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(benchmarks, "mem_available_bytes", lambda: 1 << 30)
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "ftl", "--scale", "1"])
    out, err = capsys.readouterr()
    assert e.value.code == 1 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ssdtwin bench ftl: error: --scale 1: the FTL maps of") and "MemAvailable" in lines[0]


@pytest.mark.parametrize("bench", ["engine", "rate"])
def test_engine_and_rate_benches_refuse_a_scale_beyond_memory_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], bench: str
) -> None:
    # They built the drive and preconditioned it, writing every map page, until the kernel's
    # OOM killer ended them without a word; 64 MiB available is short of a CM6's maps at 1/64.
    monkeypatch.setattr(benchmarks, "mem_available_bytes", lambda: 64 << 20)
    ran: list[str] = []
    monkeypatch.setattr(benchmarks, f"run_{bench}_bench", lambda *a, **kw: ran.append(bench) or {})
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", bench, "--scale", "1/64"])
    out, err = capsys.readouterr()
    assert (e.value.code, out, ran) == (1, "", [])
    (line,) = err.strip().splitlines()
    assert line.startswith(f"ssdtwin bench {bench}: error: --scale 1/64: the FTL maps of kioxia-cm6-r-3.84t at 1/64 need ")
    assert line.endswith("available (MemAvailable): use a smaller scale")
