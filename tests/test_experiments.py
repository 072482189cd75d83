"""`ssdtwin demo`, `reproduce` and `calibrate` measure a CM6 figure one way.

The same experiment (preset, scale, namespace size, seed) gives the same figure whichever
command runs it, because all three prepare the drive with `experiments.cm6_drive` and
measure with `experiments.measure_cm6`; and calibrate's report says when a fit ended
outside its tolerance (exit 1) instead of printing it like a success. Runs at 1/454 scale
(a few seconds per figure; docs/models.md, "Scale", says what the scale changes).
"""

from __future__ import annotations

import json
import re
import signal
from typing import Any

import pytest

from ssdtwin.commands import cli
from ssdtwin.studies import experiments
from twin import run_cli


def test_demo_model_counts_the_ius_a_4k_write_programs() -> None:
    """On the P5316 (64 KiB IUs) each 4 KiB random write programs a whole IU: the greedy
    model alone (it counts IUs) was printed beside a WAF 16x its size, "diff +1532.2%"."""
    from ssdtwin import _core

    out = run_cli("demo", "--model", "intel-p5316-15.36t", "--scale", "1/256", "--sizes", "2", "-q").stdout
    row = next(line for line in out.splitlines() if line.strip().startswith("2.00TB"))
    _, _, op, waf, model, diff, _ = row.split()
    alpha = 1 + float(op.rstrip("%")) / 100
    assert float(model) == pytest.approx(16 * _core.waf_greedy(alpha), rel=1e-3), row
    assert abs(float(diff.rstrip("%"))) < 10, row
    assert "model = greedy GC, Lambert-W form x 16 (4 KiB writes into 64 KiB IUs)" in out
    assert "KIOXIA measured" not in out


@pytest.mark.parametrize(
    "sizes, want",
    [
        ((3.84, 3.52, 3.20, 2.56), (3.84, 3.20)),
        ((3.20, 3.84), (3.84, 3.20)),  # compared 3.20 TB with itself: "3.20 TB vs 3.20 TB namespace: WAF ratio 1.00"
        ((2.56, 3.52), (3.52, 2.56)),
        ((3.20, 2.56), (3.20, 2.56)),
        ((3.84, 3.84), None),
        ((3.52,), None),
    ],
)
def test_demo_compares_the_larger_namespace_with_the_smaller(sizes: tuple[float, ...], want: Any) -> None:
    from ssdtwin.studies import demo

    pair = demo.compared_pair([{"namespace_tb": tb} for tb in sizes])
    assert (None if pair is None else (pair[0]["namespace_tb"], pair[1]["namespace_tb"])) == want


def test_demo_names_each_row_by_the_size_run() -> None:
    # 3.205 TB was printed "3.20TB": the row of another namespace (its blocks and OP were 3.205's).
    out = run_cli("demo", "--scale", "1/407", "--sizes", "3.205,3.84", "-q").stdout
    rows = [line.split()[0] for line in out.splitlines() if line.split() and line.split()[0].endswith("TB")]
    assert rows == ["3.205TB", "3.84TB"], out
    assert "3.84 TB vs 3.205 TB namespace:" in out


@pytest.mark.slow
def test_demo_and_reproduce_report_the_same_figure() -> None:
    # 3.52 TB: reproduce's column of that size measures only the random write (3.84 and 3.20
    # add the reads and the sequential write, on a drive of their own); the 3 DWPD column
    # runs whatever the sizes.
    demo = run_cli("demo", "--scale", "1/454", "--sizes", "3.52", "-q").stdout
    row = next(line for line in demo.splitlines() if line.strip().startswith("3.52TB"))
    _, blocks, op, waf, _, _, iops = row.split()
    rows = run_cli("reproduce", "cm6", "--scale", "1/454", "--sizes", "3.52", "-o", "json").json()
    (rw,) = [r for r in rows if r["namespace"] == "3.52" and r["test"] == "rand-write"]
    assert [r["test"] for r in rows if r["namespace"] == "3.52"] == ["rand-write"]
    assert iops == f"{rw['simulated']:,.0f}"
    assert waf == f"{rw['steady_waf']:.3f}"
    assert int(blocks) == rw["blocks"]
    # Both say what their WAF spans: demo's is the fast-forward pass (one namespace), the row's
    # the timed window, the drive's WAF only because it spans a GC cycle or a namespace pass.
    assert rw["steady_waf_basis"] == "fast_forward" and rw["steady_waf_verdict"] == "steady"
    assert rw["steady_waf_namespace_passes"] == pytest.approx(1.0)
    span = f"{rw['steady_waf_gc_cycles']:.1f}-{rw['steady_waf_gc_cycles']:.1f} GC cycles"
    assert f"WAF: fast-forward pass at steady state, one namespace pass of 4 KiB random writes per size (1.00 passes, {span};" in demo
    assert (rw["waf_basis"], rw["waf_verdict"], rw["waf"]) == ("timed", "steady", rw["waf_window_raw"])
    assert rw["waf_gc_cycles"] >= 1 or rw["waf_namespace_passes"] >= 1
    reads = [r for r in rows if r["test"].endswith("read")]
    assert reads and all((r["waf"], r["waf_verdict"]) == (None, "no_writes") for r in reads)
    # A different seed is a different experiment: same physics, not the same bits.
    other = run_cli("demo", "--scale", "1/454", "--sizes", "3.52", "--seed", "2", "-q").stdout
    other_iops = next(line for line in other.splitlines() if line.strip().startswith("3.52TB")).split()[-1]
    assert other_iops != iops
    assert float(other_iops.replace(",", "")) == pytest.approx(rw["simulated"], rel=0.01)


def test_a_window_under_a_gc_cycle_is_labelled_a_window_ratio() -> None:
    """`run_job` (every reproduce row's measurement) on a written 10 GB drive: 64 MiB of
    random writes reclaim part of a GC cycle, so the row keys keep the ratio as
    ``waf_window_raw`` with verdict ``insufficient``, and the text says it is no WAF of the
    drive's; a CM6 row (no published window to compare with) prints no figure."""
    from ssdtwin import waf as wafm
    from ssdtwin.drive import Drive

    d = Drive.in_memory("kioxia-cm6-r-3.84t", scale=454, seed=1)
    d.precondition(1, "seq", 131072, loops=1, seed=1)
    d.precondition(1, "rand", 4096, loops=1, seed=2)
    job = "[w]\nioengine=libaio\ndirect=1\nrw=randwrite\nbs=4k\niodepth=32\nio_size=64m\n"
    m = experiments.run_job(d, job, "short.fio")
    keys = experiments.window_keys(m)
    assert keys["waf_verdict"] == "insufficient" and keys["waf_basis"] == "timed" and keys["waf_host_bytes"] == 64 << 20
    assert keys["waf_gc_cycles"] < 1 and keys["waf_namespace_passes"] < 0.01
    assert m.waf is not None and keys["waf_window_raw"] == pytest.approx(m.waf) and m.waf > 1
    assert m.waf_measurement is not None and m.waf_measurement["waf"] is None
    label = wafm.window_label(m.waf_measurement)
    want = (
        r"timed window: 64\.0 MiB written, 0\.0\d namespace passes, 0\.\d GC cycles; "
        r"under 1 GC cycle or 1 namespace pass: a window ratio, not the drive's WAF"
    )
    assert re.fullmatch(want, label), label
    assert wafm.text(m.waf_measurement).startswith("WAF: not measured (window wrote 64.0 MiB")
    d.close()


def test_a_pass_that_fills_the_empty_write_buffer_is_no_waf_of_the_drives() -> None:
    """One sequential pass of a 64 MiB namespace through the PBlaze5's 12 MiB write buffer
    leaves 12 MiB unprogrammed: a namespace pass, but its ratio (0.81) is the buffer's, so
    it is not reported as the drive's WAF, and the text says why; the next pass, with the
    buffer full at both ends, is."""
    from ssdtwin import waf as wafm
    from ssdtwin.drive import Drive

    d = Drive.in_memory("memblaze-pblaze5-910-3.84t", scale=256, seed=1)
    d.nvme.detach_ns(1)
    d.nvme.delete_ns(1)
    nsid = d.nvme.create_ns(131072, block_size=512)
    d.nvme.attach_ns(nsid)
    logs = [d.vendor_log()]
    for seed in (1, 2):
        d.precondition(nsid, "seq", 131072, loops=1, seed=seed)
        logs.append(d.vendor_log())
    first = wafm.measure(logs[0], logs[1], "fast_forward", 64 << 20)
    assert (first["verdict"], first["namespace_passes"], first["buffered_change_bytes"]) == ("insufficient", 1.0, 12 << 20)
    assert first["waf"] is None and first["waf_window_raw"] == pytest.approx(52 / 64)
    want = "WAF: not measured (window wrote 64.0 MiB, but the write buffer filled by 12.0 MiB, 19% of the bytes written (need <= 1%))"
    assert wafm.text(first) == want
    assert wafm.window_label(first).endswith("19% of the bytes written (need <= 1%): a window ratio, not the drive's WAF")
    second = wafm.measure(logs[1], logs[2], "fast_forward", 64 << 20)
    assert (second["verdict"], second["waf"], second["buffered_change_bytes"]) == ("steady", 1.0, 0)
    d.close()


def test_the_marketed_size_is_the_whole_drive() -> None:
    assert experiments.namespace_fraction("kioxia-cm6-r-3.84t", 3.84) == 1.0
    assert experiments.namespace_fraction("kioxia-cm6-v-3.2t", 3.20) == 1.0
    assert experiments.namespace_fraction("kioxia-cm6-r-3.84t", 3.20) == pytest.approx(3.2e12 / 3_840_755_982_336)
    for bad in (0.0, -1.0, 3.85, float("nan")):
        with pytest.raises(ValueError, match="at most the drive's 3.84 TB"):
            experiments.namespace_fraction("kioxia-cm6-r-3.84t", bad)


def fake_fit(errors: dict[str, float], flat: tuple[str, ...] = ()) -> Any:
    """A stand-in for calibrate.calibrate that reports the given relative errors (and the
    parameters in `flat` as ones their figure did not respond to), through the same rows
    the real fit builds (`final_row`)."""
    from ssdtwin.studies import calibrate as cal

    def run(spec_toml: str, corners: dict[str, Any], scale: int, tol: float, log: Any, seed: int = 1) -> dict[str, Any]:
        fitted: dict[str, dict[str, Any]] = {}
        rows = []
        for c in corners.values():
            value = 1.0 if c.sets == "gc_page_reads_per_iu" else 1000
            fitted[c.sets] = {"value": value, "responds": c.sets not in flat, "sensitivity": -0.5, "at_bound": False}
            rows.append(cal.final_row(c, c.value * (1 + errors.get(c.sets, 0.0)), fitted, tol, log))
        return {
            "scale": scale,
            "seed": seed,
            "tol": tol,
            "figures": rows,
            "fitted": fitted,
            "outside_tolerance": [r["sets"] for r in rows if not r["within_tol"]],
            "timing": {},
            "corners": {},
        }

    return run


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    old = signal.getsignal(signal.SIGINT)
    try:
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
    finally:
        signal.signal(signal.SIGINT, old)
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out, err


def test_calibrate_outside_tolerance_names_the_figure_and_exits_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import ssdtwin.studies.calibrate as cal

    monkeypatch.setattr(cal, "calibrate", fake_fit({"gc_page_reads_per_iu": -0.0093, "t_read_ns": 0.001}))
    written: list[Any] = []
    monkeypatch.setattr(cal, "write_presets", lambda res: written.append(res) or [])
    rc, out, err = run_main(["calibrate", "--scale", "1/454", "--write"], capsys)
    assert rc == 1
    assert err.splitlines()[-1] == (
        "ssdtwin calibrate: error: outside --tol 0.30%: rand write 4 KiB QD32 171,457.5 IOPS vs 173,067 (-0.93%); presets not written"
    )
    assert "gc_page_reads_per_iu" in out and " -0.93% " in out  # the table is still printed
    assert written == [], "a fit outside its tolerance must not be written to the presets"


def test_calibrate_within_tolerance_exits_0(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import ssdtwin.studies.calibrate as cal

    monkeypatch.setattr(cal, "calibrate", fake_fit({"gc_page_reads_per_iu": -0.0009}))
    rc, out, err = run_main(["calibrate", "--scale", "1/454", "-o", "json"], capsys)
    assert rc == 0, err
    assert "error" not in err
    assert json.loads(out)["outside_tolerance"] == []
    # A tolerance below the default shows as many decimals as it needs.
    monkeypatch.setattr(cal, "calibrate", fake_fit({"t_read_ns": 0.0000123}))
    rc, _, err = run_main(["calibrate", "--scale", "1/454", "--tol", "0.000001"], capsys)
    assert rc == 1
    assert err.splitlines()[-1] == (
        "ssdtwin calibrate: error: outside --tol 0.00010%: rand read 4 KiB QD32 1,549,221.1 IOPS vs 1,549,202 (+0.00123%)"
    )


def test_a_figure_that_stops_responding_keeps_the_start() -> None:
    """A flat figure (sequential writes bound by GC on a drive of 8 superblocks) must not
    send the secant search to an extreme parameter (it once fitted a program time of 0 ns);
    a responding one still converges."""
    from ssdtwin.studies.calibrate import solve

    calls: list[float] = []

    def flat(x: float) -> float:
        calls.append(x)
        return 2596.3 + (x % 7) * 1e-3  # noise far under the figures' 0.05 %

    fit = solve(flat, 4246.0, 1_467_988.0, 1e-6, lambda _: None)
    assert (fit.x, fit.responds) == (1_467_988.0, False)
    assert fit.y == pytest.approx(2596.3, abs=0.01)
    assert len(calls) <= 5 and min(calls) > 1_467_988.0 / 10, calls
    # MB/s of a program-bound drive: inversely proportional to tPROG.
    fit = solve(lambda x: 4246.0 * 1_400_000.0 / x, 4246.0, 1_467_988.0, 1e-6, lambda _: None)
    assert fit.responds and fit.x == pytest.approx(1_400_000.0, rel=1e-5)


def test_calibrate_names_a_figure_that_stops_responding(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import ssdtwin.studies.calibrate as cal

    monkeypatch.setattr(cal, "calibrate", fake_fit({"t_prog_ns": -0.3885}, flat=("t_prog_ns",)))
    rc, _, err = run_main(["calibrate", "--scale", "1/407"], capsys)
    assert rc == 1
    assert err.splitlines()[-1] == (
        "ssdtwin calibrate: error: outside --tol 0.30%: seq write 128 KiB QD16 2,596.4 MB/s vs 4,246 (-38.85%), "
        "and it stops responding to t_prog_ns short of the target: something the fit does not vary bounds the figure (docs/calibration.md)"
    )


def test_calibrate_trials_do_not_depend_on_what_ran_before(tmp_path: Any) -> None:
    """A trial is a function of the parameters alone: the same figure from a fresh read-only
    open of the same preconditioned image, whatever ran on it before."""
    from ssdtwin.drive import Drive

    experiments.cm6_drive("kioxia-cm6-r-3.84t", 454, "rand", 1.0, 1, path=f"{tmp_path}/rand").drive.close()
    figures = []
    for _ in range(2):
        d = Drive.open(f"{tmp_path}/rand", writable=False)
        figures.append(experiments.measure_cm6(d, "seq-write").mb_s)  # writes, in memory only
        d.close()
    assert figures[0] == figures[1]


def test_calibrate_write_with_the_presets_own_values_changes_no_byte(tmp_path: Any) -> None:
    """`calibrate --write` rewrites the calibrated lines (value and source, docs/sources.md):
    fed the values and scale the presets already carry, it must reproduce every file exactly."""
    import re
    import shutil
    from pathlib import Path

    import tomlkit

    import ssdtwin.studies.calibrate as cal

    presets = Path(__file__).resolve().parents[1] / "crates" / "ssdtwin-core" / "presets"
    work = tmp_path / "presets"
    shutil.copytree(presets, work)
    timing = tomlkit.parse((presets / "kioxia-cm6-r-3.84t.toml").read_text()).unwrap()["timing"]
    (scale,) = {int(m) for k in cal.FIGURES for m in re.findall(r"--scale 1/(\d+)", timing[k]["source"])}
    fitted = {k: {"value": timing[k]["value"]} for k in cal.FIGURES}
    changed = cal.write_presets({"fitted": fitted, "scale": scale}, work)
    assert sorted(Path(p).stem for p in changed) == sorted(cal.FAMILY)
    for path in sorted(presets.glob("*.toml")):
        assert (work / path.name).read_text() == path.read_text(), f"calibrate --write would change {path.name}"
