"""Reproductions of the published results (docs/sources.md) that ssdtwin must explain, and the
one procedure that measures a CM6 figure: `ssdtwin demo`, `ssdtwin reproduce cm6` and
`ssdtwin calibrate` all call `cm6_drive` and `measure_cm6`, so the same experiment gives the
same figure whichever command runs it.

`cm6_brief` re-runs the KIOXIA CM6 brief (§1): the four corners on a preconditioned drive
at several namespace sizes made with the nvme-cli sequence, and the 3 DWPD SKU. The 3.84 TB
corners are the calibration points; everything else is a prediction.

`p5316_whitepaper` re-runs the Intel D5-P5316 jobs (§3) with the whitepaper's
preconditioning, measuring WAF the endurance-profiler way (NAND/host bytes between two
telemetry reads), bandwidth and mean completion latency. Nothing on P5316 is calibrated.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from importlib import resources
from typing import Any, Callable, Optional

from .. import _core
from .. import waf as wafm
from ..core_types import TimingTable, WafMeasurement
from ..drive import Drive
from ..fio import parse_string
from ..fio.contract import CloneOut, Ddir
from .corners import Corner
from .corners import job_text as corner_job_text

JOBS = resources.files("ssdtwin") / "jobs"

CM6_TESTS = ("seq-read", "seq-write", "rand-read", "rand-write")

# Measurement windows (ramp, runtime) in simulated ms per CM6 figure: long enough that the
# figure depends neither on the window nor on the seed by more than 0.1 % (docs/calibration.md,
# "Measurement windows"). Reads settle within a second; sequential writes need 6 s (3 s
# reads 0.08 % low); random writes swing by up to 2 % with the GC's cycle over windows of a
# few seconds, and 20 s lands within 0.15 % of a 60 s window at 3.84 and 3.20 TB.
CM6_WINDOWS_MS = {"seq-read": (1000, 3000), "seq-write": (1000, 6000), "rand-read": (1000, 3000), "rand-write": (1000, 20000)}


@dataclass
class Measured:
    iops: float
    mb_s: float
    mib_s: float
    lat_mean_us: float
    waf: Optional[float]  # the window's NAND / host ratio (compared with published windows)
    wall_s: float
    # The same window as a WAF measurement: basis, amount, verdict (waf.py); its "waf" is
    # set only when the window spans a GC cycle or a namespace pass.
    waf_measurement: Optional[WafMeasurement] = None


def job_text(job: str, runtime_ms: int, ramp_ms: int) -> str:
    """A job file of `python/ssdtwin/jobs/` with its runtime and ramp filled in."""
    return (JOBS / job).read_text().replace("${RUNTIME}", f"{runtime_ms}ms").replace("${RAMP}", f"{ramp_ms}ms")


def timing_toml(timing: TimingTable) -> str:
    """The `[timing]` table (without header) as TOML, values and sources."""
    lines = []
    for k, v in timing.items():
        src = v["source"].replace("\\", "\\\\").replace('"', '\\"')
        val = v["value"]
        # bool before int: True is an int in Python, and TOML spells it `true`.
        text = ("true" if val else "false") if isinstance(val, bool) else val if isinstance(val, float) else int(val)
        lines.append(f'{k} = {{ value = {text}, source = "{src}" }}')
    return "\n".join(lines) + "\n"


def run_on_ns1(drive: Drive, run: Any, timing: Optional[TimingTable] = None) -> list[CloneOut]:
    """Simulate a parsed fio run on namespace 1, without idle-time GC between batches;
    `timing` replaces the drive's `[timing]` table for this run (what-if, calibration)."""
    ns = drive.namespaces()[0]
    return drive.run_fio(
        run.to_engine(ns.bytes, ns.lba_bytes), 1, idle_gc=False, timing_toml=None if timing is None else timing_toml(timing)
    )


def direction_totals(out: list[CloneOut], d: Ddir) -> tuple[int, int, float]:
    """I/Os and bytes of direction `d` over all clones, and the longest clone runtime (s)."""
    ios = sum(r[d]["total_ios"] for r in out)
    byts = sum(r[d]["io_bytes"] for r in out)
    secs = max(r[d]["runtime_ns"] for r in out) / 1e9
    return ios, byts, secs


def run_job(drive: Drive, text: str, name: str, run_seed: int = 0, timing: Optional[TimingTable] = None) -> Measured:
    """Run one job file text on `drive`; figures of its only direction (read or write)."""
    run = parse_string(text, name=name, run_seed=run_seed)
    v0 = drive.vendor_log()
    t = time.perf_counter()
    out = run_on_ns1(drive, run, timing)
    wall = time.perf_counter() - t
    v1 = drive.vendor_log()
    d: Ddir = "write" if any(r["write"]["total_ios"] for r in out) else "read"
    ios, byts, secs = direction_totals(out, d)
    lat = sum(r[d]["lat"]["sum_ns"] for r in out) / max(1, sum(r[d]["lat"]["n"] for r in out)) / 1e3
    dh = v1["host_write_bytes"] - v0["host_write_bytes"]
    dn = v1["nand_write_bytes"] - v0["nand_write_bytes"]
    m = wafm.measure(v0, v1, "timed", drive.namespaces()[0].bytes)
    return Measured(ios / secs, byts / secs / 1e6, byts / secs / 2**20, lat, (dn / dh) if dh else None, wall, m)


def window_keys(m: Measured) -> dict[str, Any]:
    """A row's keys for what its WAF window spans (``waf.keys``: basis, verdict, host bytes,
    GC cycles, namespace passes) and the window's ratio whatever it spans (docs/models.md,
    "Measuring WAF")."""
    w = m.waf_measurement
    return {"waf_window_raw": None if w is None else w["waf_window_raw"], **wafm.keys(w)}


def replace_namespace(d: Drive, blocks: int) -> int:
    """Carve the drive anew: namespace 1 detached and deleted, one of `blocks` 512 B LBAs
    created and attached (the KIOXIA resize sequence); returns its NSID."""
    d.nvme.detach_ns(1)
    d.nvme.delete_ns(1)
    nsid = d.nvme.create_ns(blocks, blocks, block_size=512)
    d.nvme.attach_ns(nsid)
    return nsid


def namespace_fraction(model: str, tb: float) -> float:
    """The fraction of the drive's capacity a namespace of `tb` TB (at full scale) takes.
    The drive's own marketed size (3.84 for a 3.84 TB drive) is its whole capacity, the
    factory namespace the brief measured; anything larger is an error."""
    full = int(_core.preset(model)["capacity"]["tnvmcap_bytes"]["value"])
    if not 0 < tb <= round(full / 1e10) / 100:  # also refuses NaN
        raise ValueError(f"namespace {tb} TB: must be above 0 and at most the drive's {full / 1e12:.2f} TB")
    return 1.0 if round(full / 1e10) == round(tb * 100) else tb * 1e12 / full


@dataclass
class Prepared:
    """A drive in the state a CM6 figure is measured in (see `cm6_drive`)."""

    drive: Drive
    blocks: int  # namespace 1, in 512 B blocks
    steady_waf: Optional[float]  # WAF of the last random pass ("rand" state only)
    # The same pass as a WAF measurement (basis fast_forward, its amount and verdict).
    steady_measurement: Optional[WafMeasurement] = None


def cm6_drive(
    model: Optional[str],
    scale: int,
    state: str,
    ns_fraction: float = 1.0,
    seed: int = 1,
    path: Optional[str] = None,
    spec_toml: Optional[str] = None,
    rand_block_bytes: int = 4096,
) -> Prepared:
    """A drive in the state a figure was measured in: SNIA WIPC (sequential 128 KiB over 2x
    the namespace, Intel D5-P5316 IU white paper and CM6/CD6 SNIA PTS review); for random figures ("rand") then 4 KiB random over
    2x, and one more namespace of 4 KiB random writes whose WAF is the steady-state WAF
    ("none": factory state, nothing written; `ssdtwin sweep` uses all three). With
    `ns_fraction` < 1 the namespace is first re-created at that fraction of the capacity.
    With `path` the drive is an image there, committed (calibration opens copies of it).
    `spec_toml` in place of `model`: a drive of that spec; `rand_block_bytes`: the block
    size of the random writes (a random-write corner of another block size, `ssdtwin calibrate`)."""
    if path is None:
        d = Drive.in_memory(model, scale=scale, seed=seed, spec_toml=spec_toml)
    elif spec_toml is not None:
        d = Drive.create_from_spec(path, spec_toml, scale=scale, seed=seed)
    else:
        assert model is not None
        d = Drive.create(path, model, scale=scale, seed=seed)
    if ns_fraction < 1.0:
        cap = d.nvme.id_ctrl()["tnvmcap"]
        replace_namespace(d, int(ns_fraction * cap) // 4096 * 4096 // 512)
    if state != "none":
        d.precondition(1, "seq", 131072, loops=2, seed=seed)
    steady = measured = None
    if state == "rand":
        d.precondition(1, "rand", rand_block_bytes, loops=2, seed=seed + 1)
        before = d.vendor_log()
        steady = d.precondition(1, "rand", rand_block_bytes, loops=1, seed=seed + 2).waf
        measured = wafm.measure(before, d.vendor_log(), "fast_forward", d.namespaces()[0].bytes)
    if path is not None:
        d.commit()
    return Prepared(d, d.namespaces()[0].nsze, steady, measured)


def measure_cm6(drive: Drive, test: str, timing: Optional[TimingTable] = None) -> Measured:
    """One CM6 corner (`CM6_TESTS`) on a drive from `cm6_drive`, in its window."""
    ramp_ms, runtime_ms = CM6_WINDOWS_MS[test]
    job = f"cm6-{test}.fio"
    return run_job(drive, job_text(job, runtime_ms, ramp_ms), job, timing=timing)


def measure_corner(
    drive: Drive, corner: Corner, timing: Optional[TimingTable] = None, windows_ms: Optional[dict[str, tuple[int, int]]] = None
) -> float:
    """A corner's figure (MB/s or IOPS) on a drive from `cm6_drive` in the corner's state:
    the CM6 measurement (`measure_cm6`, its windows) with the corner's job shape."""
    return cm6_figure(corner.name, run_corner(drive, corner, timing, windows_ms))


def run_corner(
    drive: Drive, corner: Corner, timing: Optional[TimingTable] = None, windows_ms: Optional[dict[str, tuple[int, int]]] = None
) -> Measured:
    """The run `measure_corner` takes its figure from (its WAF too)."""
    ramp_ms, runtime_ms = (windows_ms or CM6_WINDOWS_MS)[corner.name]
    return run_job(drive, corner_job_text(corner, f"{ramp_ms}ms", f"{runtime_ms}ms"), f"{corner.name}.fio", timing=timing)


def cm6_figure(test: str, m: Measured) -> float:
    """The figure the brief publishes: MB/s for sequential tests, IOPS for random ones."""
    return m.mb_s if test.startswith("seq") else m.iops


CM6_PUBLISHED = {
    # (column, test): figure from KIOXIA CM6 namespace brief (MB/s for sequential, IOPS for random)
    ("3.84", "seq-read"): 6971,
    ("3.84", "seq-write"): 4246,
    ("3.84", "rand-read"): 1_549_202,
    ("3.84", "rand-write"): 173_067,
    ("3.20", "seq-read"): 6952,
    ("3.20", "seq-write"): 4246,
    ("3.20", "rand-read"): 1_548_940,
    ("3.20", "rand-write"): 337_920,
    ("3dwpd", "seq-read"): 6972,
    ("3dwpd", "seq-write"): 4245,
    ("3dwpd", "rand-read"): 1_549_470,
    ("3dwpd", "rand-write"): 354_666,
}


def namespace_label(tb: float) -> str:
    """A cm6 column's name: the size in TB with two decimals (the brief's published figures
    are looked up by it), or every digit given when two would round it: 3.205 TB was the
    column "3.20" and compared with the brief's 3.20 TB figures."""
    two = f"{tb:.2f}"
    return two if float(two) == tb else repr(tb)


def cm6_brief(
    scale: int = 64, seed: int = 1, sizes: tuple[float, ...] = (3.84, 3.52, 3.20, 2.56), log: Callable[[str], None] = print
) -> list[dict[str, Any]]:
    """The CM6 namespace table: four corners per namespace size, plus the 3 DWPD SKU."""
    rows = []
    columns: list[tuple[str, str, float]] = [(namespace_label(s), "kioxia-cm6-r-3.84t", s) for s in sizes]
    columns.append(("3dwpd", "kioxia-cm6-v-3.2t", 3.20))
    for col, model, tb in columns:
        frac = namespace_fraction(model, tb)
        tests = CM6_TESTS if col in ("3.84", "3.20", "3dwpd") else ("rand-write",)
        drives = {s: cm6_drive(model, scale, s, frac, seed) for s in {("seq" if t.startswith("seq") else "rand") for t in tests}}
        for test in tests:
            p = drives["seq" if test.startswith("seq") else "rand"]
            m = measure_cm6(p.drive, test)
            value = cm6_figure(test, m)
            pub = CM6_PUBLISHED.get((col, test))
            unit = "MB/s" if test.startswith("seq") else "IOPS"
            row = {
                "namespace": col,
                "model": model,
                "test": test,
                "simulated": value,
                "published": pub,
                "unit": unit,  # of simulated and published: decimal MB/s or IOPS, as the brief gives them
                "error": (value / pub - 1) if pub else None,
                "lat_mean_us": m.lat_mean_us,
                # No published WAF to compare with: the window's WAF is the drive's only
                # when it spans a GC cycle or a namespace pass (waf_window_raw: the ratio).
                "waf": None if m.waf_measurement is None else m.waf_measurement["waf"],
                **window_keys(m),
                "steady_waf": p.steady_waf if test == "rand-write" else None,
                **wafm.keys(p.steady_measurement if test == "rand-write" else None, "steady_waf"),
                "blocks": p.blocks,
                "role": "calibration" if col == "3.84" else "prediction",
            }
            rows.append(row)
            pub_s = f"{pub:>12,} ({value / pub - 1:+6.1%})" if pub else " " * 22
            waf_s = wafm.text(m.waf_measurement) if test.endswith("write") else ""
            log(f"{col:>6} {test:<11} {value:>12,.0f} {unit:<5} published {pub_s}  {row['role']:<11} {waf_s}")
        for p in drives.values():
            p.drive.close()
    return rows


P5316_PUBLISHED = [
    # (name, bs, rw, jobs, iodepth, written, WAF, MiB/s, mean clat ms) — Intel D5-P5316 IU white paper
    ("4k-randwrite", "4k", "randwrite", 4, 32, 300 * 2**30, 74.77, 23.9, 21.9),
    ("64k-randwrite", "64k", "randwrite", 4, 32, 300 * 2**30, 4.53, 424.0, 19.7),
    ("4k-seqwrite", "4k", "write", 1, 32, 5 * 2**40, 1.02, 1360.0, 0.093),
    ("64k-seqwrite", "64k", "write", 1, 32, 5 * 2**40, 1.02, 2985.0, 0.688),
]


def p5316_job(bs: str, rw: str, jobs: int, qd: int, io_bytes: int) -> str:
    # The whitepaper's fio settings (libaio, direct=1); io_size per job splits the amount.
    return (
        "[global]\nioengine=libaio\ndirect=1\ngroup_reporting\nrandrepeat=0\n"
        f"[p5316]\nrw={rw}\nbs={bs}\niodepth={qd}\nnumjobs={jobs}\nio_size={io_bytes // jobs}\n"
    )


def p5316_whitepaper(scale: int = 64, seed: int = 5, log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """The Intel P5316 IU/WAF table, amounts scaled by 1/`scale` like the drive."""
    rows = []
    for name, bs, rw, jobs, qd, written, pwaf, pmib, plat in P5316_PUBLISHED:
        d = Drive.in_memory("intel-p5316-15.36t", scale=scale, seed=seed)
        # Whitepaper preconditioning: sequential 128 KiB over the capacity; for random
        # tests then 1 MiB random writes (4 jobs x QD32 "for hours": 2x capacity here).
        d.precondition(1, "seq", 131072, loops=1, seed=seed)
        if rw == "randwrite":
            d.precondition(1, "rand", 1 << 20, loops=2, seed=seed + 1)
        # Scale the amount with the drive, but write at least three superblocks: a steady-state
        # WAF needs whole GC cycles, and a superblock (18 GiB) does not shrink with the scale.
        sb = d.ftl_info()["superblock_bytes"]
        amount = max(written // scale, 3 * sb)
        m = run_job(d, p5316_job(bs, rw, jobs, qd, amount), f"p5316-{name}.fio")
        row = {
            "job": name,
            # The white paper's WAF is the ratio over its own job (300 GiB or 5 TiB): the
            # twin's is the ratio over the same amount, scaled; waf_verdict says whether that
            # window is also the drive's WAF (docs/models.md, "Measuring WAF").
            "waf": m.waf,
            **window_keys(m),
            "waf_published": pwaf,
            "mib_s": m.mib_s,
            "mib_s_published": pmib,
            "lat_mean_ms": m.lat_mean_us / 1e3,
            "lat_published_ms": plat,
            "wall_s": m.wall_s,
            "written_bytes": amount,
        }
        rows.append(row)
        waf = m.waf if m.waf is not None else float("nan")  # every job here writes, so it has one
        log(
            f"{name:<14} WAF {waf:6.2f} (published {pwaf:6.2f}, {waf / pwaf - 1:+6.1%})  "
            f"{m.mib_s:8.1f} MiB/s ({pmib:7.1f}, {m.mib_s / pmib - 1:+6.1%})  "
            f"lat {m.lat_mean_us / 1e3:7.3f} ms ({plat:6.3f}, {m.lat_mean_us / 1e3 / plat - 1:+6.1%})  "
            f"[WAF over the white paper's amount, scaled: {wafm.window_label(m.waf_measurement)}; {m.wall_s:.1f} s wall]"
        )
    return rows
