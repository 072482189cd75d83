"""`ssdtwin bench engine` and `bench rate`: the timed engine's speed benches. Shapes and
simulated physics only, never a wall-clock figure; `-o json` prints the JSON alone on stdout
(the progress lines go to stderr)."""

from __future__ import annotations

import pytest

from twin import run_cli


def test_bench_engine_json_is_only_json_and_the_table_is_on_stdout_without_it() -> None:
    args = ("bench", "engine", "--scale", "1/454", "--seconds", "0.02")
    r = run_cli(*args, "-o", "json")
    res = r.json()  # fails if anything but the JSON reached stdout
    assert "preconditioned" in r.stderr and "randread" in r.stderr
    assert (res["scale"], res["numjobs"], res["simulated_seconds"]) == (454, 1, 0.02)
    for rw in ("randread", "randwrite"):
        x = res[rw]
        assert x["ios"] > 0 and x["simulated_iops"] == pytest.approx(x["ios"] / 0.02)
    # A steady-state drive reads 4 KiB faster than it writes (GC and programs behind writes).
    assert res["randread"]["simulated_iops"] > res["randwrite"]["simulated_iops"]
    t = run_cli(*args)
    assert "randread" in t.stdout and "M simulated I/Os per second" in t.stdout


def test_bench_engine_runs_the_simulated_seconds_its_iops_are_divided_by() -> None:
    # 1.5 ms ran 1 ms (whole milliseconds), and under 1 ms ran with no limit at all (fio's
    # runtime=0): the whole namespace, its IOPS divided by the fraction of a millisecond asked.
    res = run_cli("bench", "engine", "--scale", "1/454", "--seconds", "0.0015", "-o", "json").json()
    for rw in ("randread", "randwrite"):
        assert res[rw]["simulated_seconds"] == pytest.approx(0.0015, rel=0.1), res[rw]
    for bad in ("0.0005", "1e-12", "0", "nan", "inf"):
        r = run_cli("bench", "engine", "--scale", "1/454", "--seconds", bad, check=False)
        assert (r.returncode, r.stdout) == (1, ""), r.stderr
        want = f"ssdtwin bench engine: error: --seconds {float(bad)}: must be 0.001 to 86400 simulated seconds per workload"
        assert r.stderr_lines == [want]


def test_bench_rate_json_is_only_json() -> None:
    r = run_cli("bench", "rate", "--scale", "1/454", "--ios", "2000", "--rate-iops", "50000", "-o", "json")
    res = r.json()
    for rw in ("randread", "randwrite"):
        free, capped = res[rw]["unlimited"], res[rw]["rate_limited"]
        assert free["ios"] == capped["ios"] == 2000
        # 2,000 I/Os at 50,000 IOPS take 40 ms of drive time, whatever the drive could do.
        assert capped["simulated_seconds"] == pytest.approx(2000 / 50_000, rel=0.01)
        assert free["simulated_seconds"] < capped["simulated_seconds"]
