"""The published experiments the twin must reproduce (KIOXIA CM6 namespace brief and Intel D5-P5316 IU white paper), at 1/128
scale (they pass the same tolerances at 1/64, in twice the time).

KIOXIA CM6 brief (§1): the four corners at 3.84 TB are the calibration points (they must
come back within 5 %); the 3.20 TB namespace, the intermediate sizes and the 3 DWPD SKU are
predictions. Intel D5-P5316 whitepaper (§3): nothing is calibrated; the IU granularity must
give a 4 KiB random WAF about 16x the 64 KiB one, and sequential writes a WAF near 1.

Each experiment runs once per session (about 30 s each); `ssdtwin calibrate` is only
checked for its command line (a calibration takes minutes and, with --write, rewrites the
presets: never from a test).
"""

from __future__ import annotations

from typing import Any

import pytest

from ssdtwin.studies import experiments
from twin import run_cli

CM6_3_20_RANDWRITE_IOPS = 337_920  # KIOXIA CM6 namespace brief: 3.20 TB namespace, 4 KiB random write


@pytest.fixture(scope="module")
def cm6() -> dict[tuple[str, str], dict[str, Any]]:
    lines: list[str] = []
    rows = experiments.cm6_brief(scale=128, log=lines.append)
    assert len(lines) == len(rows)
    return {(r["namespace"], r["test"]): r for r in rows}


@pytest.fixture(scope="module")
def p5316_lines() -> dict[str, Any]:
    lines: list[str] = []
    rows = experiments.p5316_whitepaper(scale=128, log=lines.append)
    return {"rows": {r["job"]: r for r in rows}, "lines": {line.split()[0]: line for line in lines}}


@pytest.fixture(scope="module")
def p5316(p5316_lines: dict[str, Any]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = p5316_lines["rows"]
    return rows


CORNERS = ("seq-read", "seq-write", "rand-read", "rand-write")


@pytest.mark.slow
def test_cm6_table_is_complete(cm6: dict) -> None:
    assert set(cm6) == {(ns, t) for ns in ("3.84", "3.20", "3dwpd") for t in CORNERS} | {("3.52", "rand-write"), ("2.56", "rand-write")}
    for (ns, _), row in cm6.items():
        assert row["role"] == ("calibration" if ns == "3.84" else "prediction")
        assert row["simulated"] > 0
        # -o json said neither: sequential figures are the brief's decimal MB/s, random its IOPS
        assert row["unit"] == ("MB/s" if row["test"].startswith("seq") else "IOPS"), row


@pytest.mark.slow
@pytest.mark.parametrize("test", CORNERS)
def test_cm6_calibrated_corners_within_5_percent(cm6: dict, test: str) -> None:
    row = cm6[("3.84", test)]
    assert row["published"] == experiments.CM6_PUBLISHED[("3.84", test)]
    assert row["simulated"] == pytest.approx(row["published"], rel=0.05)
    assert row["error"] == pytest.approx(row["simulated"] / row["published"] - 1)


@pytest.mark.slow
@pytest.mark.parametrize("test", ("seq-read", "seq-write", "rand-read"))
def test_cm6_reads_and_sequential_do_not_depend_on_namespace_size(cm6: dict, test: str) -> None:
    """The brief: shrinking the namespace to 3.20 TB leaves these figures unchanged."""
    assert cm6[("3.20", test)]["simulated"] == pytest.approx(cm6[("3.84", test)]["simulated"], rel=0.02)
    assert cm6[("3.20", test)]["simulated"] == pytest.approx(cm6[("3.20", test)]["published"], rel=0.05)


@pytest.mark.slow
def test_cm6_3_20_tb_random_write_prediction(cm6: dict) -> None:
    row = cm6[("3.20", "rand-write")]
    assert row["published"] == CM6_3_20_RANDWRITE_IOPS
    assert row["simulated"] == pytest.approx(CM6_3_20_RANDWRITE_IOPS, rel=0.10)


@pytest.mark.slow
def test_cm6_random_write_rises_as_the_namespace_shrinks(cm6: dict) -> None:
    iops = [cm6[(ns, "rand-write")]["simulated"] for ns in ("3.84", "3.52", "3.20", "2.56")]
    waf = [cm6[(ns, "rand-write")]["waf"] for ns in ("3.84", "3.52", "3.20", "2.56")]
    assert iops[0] < iops[1] < iops[2], iops
    # 2.56 TB may sit at the controller's write ceiling: no lower than 3.20 TB then.
    assert iops[3] >= iops[2] * 0.99, iops
    # ... because more spare area means less GC: WAF falls with the namespace.
    assert waf[0] > waf[1] > waf[2] > waf[3] > 1.0, waf
    # The published pair: 3.20 TB gives about twice the random-write IOPS of 3.84 TB.
    assert iops[2] / iops[0] == pytest.approx(CM6_3_20_RANDWRITE_IOPS / 173_067, rel=0.10)


@pytest.mark.slow
def test_cm6_3dwpd_sku_prediction(cm6: dict) -> None:
    for test in CORNERS:
        row = cm6[("3dwpd", test)]
        assert row["model"] == "kioxia-cm6-v-3.2t"
        assert row["simulated"] == pytest.approx(row["published"], rel=0.10), test


@pytest.mark.slow
def test_p5316_iu_granularity_sets_the_waf(p5316: dict) -> None:
    assert set(p5316) == {"4k-randwrite", "64k-randwrite", "4k-seqwrite", "64k-seqwrite"}
    w4, w64 = p5316["4k-randwrite"]["waf"], p5316["64k-randwrite"]["waf"]
    # A 4 KiB write costs a 64 KiB IU read-modify-write: 16x the 64 KiB random WAF.
    assert w4 / w64 == pytest.approx(16, rel=0.10)
    assert p5316["4k-seqwrite"]["waf"] <= 1.05 and p5316["64k-seqwrite"]["waf"] <= 1.05
    # The whitepaper's own WAFs (74.77 and 4.53): the same order, within 15 %.
    assert w4 == pytest.approx(74.77, rel=0.15) and w64 == pytest.approx(4.53, rel=0.15)
    # The amounts written were scaled but are at least three superblocks (whole GC cycles).
    assert all(r["written_bytes"] > 0 for r in p5316.values())


# --------------------------------------------------------------------------- CLI


def test_calibrate_help() -> None:
    r = run_cli("calibrate", "--help")
    assert "calibrate" in r.stdout and "--write" in r.stdout and "--scale" in r.stdout


@pytest.mark.parametrize("preset", ["memblaze-pblaze5-910-3.84t", "no-such-drive"])
def test_calibrate_refuses_presets_without_figures(preset: str) -> None:
    """Only a preset with [corners] (or the CM6-R, fitted on its brief's four figures) has
    figures to fit; any other needs --datasheet or --measured."""
    r = run_cli("calibrate", preset, check=False)
    assert r.returncode == 1 and r.stdout == ""
    want = (
        f"ssdtwin calibrate: error: calibrate: no preset '{preset}' (`ssdtwin models` lists them; a spec of your own: --spec FILE)"
        if preset == "no-such-drive"
        else f"ssdtwin calibrate: error: calibrate: {preset} has no [corners] to fit; "
        "give the figures with --datasheet or --measured (docs/calibration.md)"
    )
    assert r.stderr_lines == [want]


def test_reproduce_refuses_an_unknown_experiment() -> None:
    r = run_cli("reproduce", "cm7", check=False)
    want = "ssdtwin reproduce: error: experiment 'cm7': choose cm6, p5316, pblaze5, kumoscale, ceph-reef, spdk-tcp, spdk-rdma or shaping"
    assert r.returncode == 1 and r.stderr_lines == [want]
    assert "cm6" in run_cli("reproduce", "--help").stdout


@pytest.mark.parametrize(
    "args, want",
    [
        # shaping ran its whole study (a minute) with options it does not have
        (["shaping", "--quick"], "--quick: only the pblaze5 experiment has it"),
        (["shaping", "--sizes", "3.84"], "--sizes: only the cm6 experiment has namespace sizes"),
        (["shaping", "--part", "doublewrite"], "--part: only the pblaze5 experiment has parts"),
        (["shaping", "--no-curves"], "--no-curves: only the kumoscale experiment has curves"),
        # --run-s (default 600) was taken and ignored by every experiment but --part mariadb
        (["cm6", "--run-s", "5"], "--threads, --placements, --drive-state, --run-s and --dir: only with pblaze5 --part"),
        (
            ["pblaze5", "--part", "doublewrite", "--dir", "/tmp"],
            "--run-s and --dir: only with pblaze5 --part mariadb (doublewrite is modelled: no sysbench, no file systems)",
        ),
        # an empty list ran the default, as if the option was not given
        (["pblaze5", "--part", "doublewrite", "--placements", ""], "--placements '': each of shared, dram, nand at most once"),
        (["pblaze5", "--part", "doublewrite", "--drive-state", ""], "--drive-state '': each of trimmed, written at most once"),
        (["pblaze5", "--part", "doublewrite", "--threads", ""], "--threads '': a comma-separated list of whole numbers"),
        # a file for --dir: the work directory was announced, then "{dir}/shared: Not a directory"
        (["pblaze5", "--part", "mariadb", "--dir", "/dev/null"], "--dir /dev/null: not a folder"),
    ],
)
def test_reproduce_refuses_options_its_experiment_does_not_have(monkeypatch: pytest.MonkeyPatch, args: list[str], want: str) -> None:
    from ssdtwin.studies import doublewrite, mariadb, shaping

    ran: list[str] = []
    monkeypatch.setattr(shaping, "shaping", lambda **kw: ran.append("shaping") or [])
    monkeypatch.setattr(doublewrite, "doublewrite_study", lambda **kw: ran.append("doublewrite") or [])
    monkeypatch.setattr(mariadb, "mariadb_study", lambda *a, **kw: ran.append("mariadb") or [])
    monkeypatch.setattr(mariadb, "missing", lambda: None)  # as if MariaDB, sysbench, nbdkit... were installed
    r = run_cli("reproduce", *args, check=False)
    assert (r.returncode, r.stderr_lines) == (1, [f"ssdtwin reproduce: error: {want}"]), r.stderr
    assert ran == []


@pytest.mark.slow
def test_p5316_wafs_say_what_their_window_spans(p5316_lines: dict[str, Any]) -> None:
    """The white paper's WAFs are ratios over its jobs' amounts, and the twin's are over the
    same amounts (scaled): compared like with like, each labelled with its basis and span.
    The random jobs span GC cycles (the drive's WAF); a sequential job writes a fraction of
    a namespace pass, so its ratio is labelled a window's, not the drive's."""
    for job, r in p5316_lines["rows"].items():
        line = p5316_lines["lines"][job]
        assert r["waf_basis"] == "timed" and r["waf_host_bytes"] == r["written_bytes"], r
        assert r["waf_window_raw"] == r["waf"]
        steady = r["waf_gc_cycles"] >= 1 or r["waf_namespace_passes"] >= 1
        assert r["waf_verdict"] == ("steady" if steady else "insufficient"), r
        assert "[WAF over the white paper's amount, scaled: timed window: " in line, line
        assert line.endswith("s wall]") and ("; steady;" if steady else "not the drive's WAF;") in line, line
    assert p5316_lines["rows"]["4k-randwrite"]["waf_verdict"] == "steady"
    assert p5316_lines["rows"]["4k-seqwrite"]["waf_verdict"] == "insufficient"


@pytest.mark.parametrize(
    "args, want",
    [
        # pblaze5 ran the whole talk (minutes at 1/64) and failed at its end, on savefig
        (["pblaze5", "--quick", "--plot", "{tmp}/missing/noisy.png"], "--plot {tmp}/missing/noisy.png: a PNG file in an existing folder"),
        # an unknown suffix was matplotlib's ValueError after the study: a traceback
        (
            ["pblaze5", "--plot", "{tmp}/noisy.xyz"],
            "--plot {tmp}/noisy.xyz: '.xyz' is not an image format matplotlib writes; use .png or one of "
            "avif, eps, gif, jpeg, jpg, pdf, pgf, png, ps, raw, rgba, svg, svgz, tif, tiff, webp",
        ),
        (
            ["shaping", "--plot", "{tmp}/sizing.pngg"],
            "--plot {tmp}/sizing.pngg: '.pngg' is not an image format matplotlib writes; use .png or one of "
            "avif, eps, gif, jpeg, jpg, pdf, pgf, png, ps, raw, rgba, svg, svgz, tif, tiff, webp",
        ),
        # a folder below a file: mkdir failed after the lab's points had all run
        (["ceph-reef", "--plot", "{tmp}/a-file/out"], "--plot {tmp}/a-file/out: Not a directory"),
        (["spdk-tcp", "--plot", "{tmp}/a-file"], "--plot {tmp}/a-file: not a folder"),
        (["kumoscale", "--plot", "{tmp}/a-file/out"], "--plot {tmp}/a-file/out: Not a directory"),
        # --plot was taken and ignored: kumoscale draws only its curves
        (["kumoscale", "--no-curves", "--plot", "{tmp}/out"], "--plot: kumoscale draws its curves; not with --no-curves"),
    ],
)
def test_reproduce_checks_its_plot_path_before_the_study_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, args: list[str], want: str
) -> None:
    from ssdtwin.studies import ceph_reef, kumoscale, pblaze5, shaping, spdk_tcp

    (tmp_path / "a-file").write_text("")
    ran: list[str] = []
    monkeypatch.setattr(pblaze5, "pblaze5_talk", lambda **kw: ran.append("pblaze5") or [])
    monkeypatch.setattr(shaping, "shaping", lambda **kw: ran.append("shaping") or [])
    monkeypatch.setattr(kumoscale, "kumoscale", lambda **kw: ran.append("kumoscale") or {})
    monkeypatch.setattr(ceph_reef, "run", lambda **kw: ran.append("ceph-reef") or {})
    monkeypatch.setattr(spdk_tcp, "run", lambda **kw: ran.append("spdk-tcp") or {})
    scale = [] if args[0] == "shaping" else ["--scale", "1/256"]  # shaping picks its own
    r = run_cli("reproduce", *[a.format(tmp=tmp_path) for a in args], *scale, check=False)
    assert (r.returncode, r.stderr_lines) == (1, [f"ssdtwin reproduce: error: {want.format(tmp=tmp_path)}"]), r.stderr
    assert ran == []
    assert not (tmp_path / "missing").exists()


def test_shaping_sizing_figure_draws_waf_from_zero_to_above_the_largest() -> None:
    # symlog's own limits ran the WAF axis down to -1 (a point at WAF 0: a tier that absorbed
    # every write) and clipped the largest WAF's markers at the top edge.
    import matplotlib.pyplot as plt

    from ssdtwin.studies import shaping

    rows = [
        {"distribution": dist, "policy": policy, "tier_fraction": f, "tier_write_hit_rate": 0.5, "end_to_end_waf": waf}
        for dist in ("random", "zipf:1.2")
        for policy in ("iu-fill", "log")
        for f, waf in ((0.001, 65.0 if policy == "iu-fill" else 5.0), (0.016, 0.0 if dist == "zipf:1.2" else 3.0))
    ]
    fig = shaping.sizing_figure(rows, shaping.QUICK)
    try:
        waf_axis = fig.axes[1]
        assert waf_axis.get_ylabel() == "end-to-end WAF (NAND bytes / host byte)"
        low, high = waf_axis.get_ylim()
        assert low == 0 and high > 65, (low, high)
    finally:
        plt.close(fig)


def _sizing_rows() -> list[dict[str, Any]]:
    return [
        {"distribution": dist, "policy": policy, "tier_fraction": f, "tier_write_hit_rate": 0.5, "end_to_end_waf": 2.0}
        for dist in ("random", "zipf:1.2")
        for policy in ("iu-fill", "log")
        for f in (0.001, 0.016)
    ]


def test_a_figure_cut_short_leaves_no_image_under_its_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    # savefig wrote straight to --plot's path: a Ctrl-C (or a full disk) while it wrote left a
    # truncated PNG under the name of a finished one.
    from matplotlib.figure import Figure

    from ssdtwin.studies import shaping

    def cut_short(self: Any, fname: Any, **kw: Any) -> None:
        with open(fname, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n")  # the start of a PNG, and no more
        raise KeyboardInterrupt

    monkeypatch.setattr(Figure, "savefig", cut_short)
    with pytest.raises(KeyboardInterrupt):
        shaping.plot_sizing(_sizing_rows(), str(tmp_path / "sizing.png"), shaping.QUICK)
    assert list(tmp_path.iterdir()) == []


def test_a_figure_is_written_whole_in_the_format_its_suffix_names(tmp_path: Any) -> None:
    from ssdtwin.studies import shaping

    shaping.plot_sizing(_sizing_rows(), str(tmp_path / "sizing.png"), shaping.QUICK)
    shaping.plot_sizing(_sizing_rows(), str(tmp_path / "sizing.svg"), shaping.QUICK)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sizing.png", "sizing.svg"]
    assert (tmp_path / "sizing.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert (tmp_path / "sizing.png").read_bytes().endswith(b"IEND\xaeB`\x82")  # the PNG's last chunk
    assert b"<svg" in (tmp_path / "sizing.svg").read_bytes()[:500]


@pytest.mark.parametrize("tb, label", [(3.84, "3.84"), (3.2, "3.20"), (2.56, "2.56"), (3.205, "3.205"), (3.199, "3.199"), (3.5, "3.50")])
def test_cm6_columns_are_named_by_the_size_run(tb: float, label: str) -> None:
    # The published figures are looked up by the column's name: "3.20" for a 3.205 TB namespace
    # set the brief's 3.20 TB figures beside it.
    assert experiments.namespace_label(tb) == label


def _drawn(monkeypatch: pytest.MonkeyPatch, study: Any, result: dict[str, Any], tmp_path: Any) -> Any:
    """The figure `study.plot(result)` saves, laid out and drawn as it is written."""
    import matplotlib.pyplot as plt

    figures: list[Any] = []

    def keep(fig: Any, path: Any) -> Any:
        fig.tight_layout()
        fig.canvas.draw()
        figures.append(fig)
        return path

    monkeypatch.setattr(study, "save_figure", keep)
    study.plot(result, tmp_path)
    (fig,) = figures
    plt.close(fig)
    return fig


def test_spdk_tcp_figure_ticks_the_core_counts_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    # The log axis ticked 10^0 and 10^1, none of the core counts the study runs.
    from ssdtwin.studies import spdk_tcp

    rows = [{"target_cores": c, "iops": 1.1 * p, "published_iops": p} for c, p in spdk_tcp.PUBLISHED_IOPS.items()]
    fig = _drawn(monkeypatch, spdk_tcp, {"rows": rows, "scale": 256}, tmp_path)
    axis = fig.axes[0].xaxis
    shown = [(t.get_loc(), t.label1.get_text()) for t in axis.get_major_ticks() if t.label1.get_visible() and t.label1.get_text()]
    lo, hi = fig.axes[0].get_xlim()
    assert [(loc, text) for loc, text in shown if lo <= loc <= hi] == [(c, str(c)) for c in spdk_tcp.CORES]
    assert not any(t.label1.get_text() for t in axis.get_minor_ticks())


def test_ceph_reef_figure_labels_do_not_overlap(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    # "read 8 thr" and "read 20 thr" (and "write 8 thr" and "write 20 thr") were drawn on one
    # another: the points' labels were offset only alternately up and down.
    from ssdtwin.studies import ceph_reef

    # The predictions of docs/models.md §11.8: the 14- and 20-thread points nearly coincide.
    model = (692_990, 2_270_033, 2_290_064, 2_289_550, 117_776, 346_636, 346_663, 346_660, 4_138_438, 680_071, 2_480)
    rows = [
        {"experiment": p.experiment, "threads_per_osd": p.threads_per_osd, "rw": p.rw, "iops": m, "published_iops": p.iops}
        for p, m in zip(ceph_reef.PUBLISHED, model)
    ]
    fig = _drawn(monkeypatch, ceph_reef, {"rows": rows, "scale": 256}, tmp_path)
    panel = fig.axes[1]
    labels = panel.texts
    assert sorted(t.get_text().strip() for t in labels) == sorted(
        ["read 2 thr", "read 8 thr", "read 14 thr", "read 20 thr", "write 2 thr", "write 8 thr", "write 14 thr", "write 20 thr"]
        + ["read 60 OSDs", "write 60 OSDs", "QD1 write"]
    )
    from matplotlib.text import Text

    boxes = [(t.get_text(), Text.get_window_extent(t)) for t in labels]  # the text's box, not its line
    for i, (a, box_a) in enumerate(boxes):
        assert fig.bbox.contains(box_a.x0, box_a.y0) and fig.bbox.contains(box_a.x1, box_a.y1), a
        for b, box_b in boxes[i + 1 :]:
            assert not box_a.overlaps(box_b), (a, b)
    # each label is joined to its own point
    for t, r in zip(sorted(labels, key=lambda t: t.get_text().strip()), sorted(rows, key=_label)):
        assert t.xy == (r["published_iops"], r["iops"]), t.get_text()
        assert t.arrow_patch is not None


def _label(r: dict[str, Any]) -> str:
    what = {"randread": "read", "randwrite": "write", "write-qd1": "QD1 write"}[r["rw"]]
    tag = f"{r['threads_per_osd']} thr" if r["threads_per_osd"] else ("" if r["rw"] == "write-qd1" else "60 OSDs")
    return f"{what} {tag}".strip()


@pytest.mark.parametrize(
    "args, avail_gb, model, drives",
    [
        # cm6 holds a sequential and a random drive at once (16 GB of maps at --scale 1): it ran
        # on with no memory check, for the kernel's OOM killer to end without a word.
        (["cm6", "--scale", "1"], 12, "kioxia-cm6-r-3.84t", 2),
        # a column of one drive alone, but the 3 DWPD SKU's column still holds two
        (["cm6", "--sizes", "2.56", "--scale", "1"], 12, "kioxia-cm6-v-3.2t", 2),
        (["p5316", "--scale", "1"], 1, "intel-p5316-15.36t", 1),
    ],
)
def test_reproduce_refuses_a_scale_beyond_memory(
    monkeypatch: pytest.MonkeyPatch, args: list[str], avail_gb: int, model: str, drives: int
) -> None:
    from ssdtwin import Drive, nvmefmt
    from ssdtwin.studies import benchmarks

    ran: list[str] = []
    monkeypatch.setattr(benchmarks, "mem_available_bytes", lambda: avail_gb * 10**9)
    monkeypatch.setattr(experiments, "cm6_brief", lambda **kw: ran.append("cm6") or [])
    monkeypatch.setattr(experiments, "p5316_whitepaper", lambda **kw: ran.append("p5316") or [])
    r = run_cli("reproduce", *args, check=False)
    assert r.returncode == 1 and ran == [], r.stderr
    probe = Drive.in_memory(model, scale=1)
    need = nvmefmt.si_bytes(drives * benchmarks.maps_bytes(probe.ftl_info()))
    probe.close()
    what = f"{drives} {model} drives" if drives > 1 else model
    want = f"--scale 1: the FTL maps of {what} at 1/1 need {need}, this machine has {nvmefmt.si_bytes(avail_gb * 10**9)} available"
    assert r.stderr_lines == [f"ssdtwin reproduce: error: {want} (MemAvailable): use a smaller scale"]
    # a scale that fits runs
    assert run_cli("reproduce", *args[:-1], "1/64").returncode == 0 and ran == [args[0]]
