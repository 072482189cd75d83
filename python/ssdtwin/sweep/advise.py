"""`ssdtwin advise`: which drive, namespace size and OP meet a workload's targets at the
lowest cost and wear (docs/sweep.md, "advise").

The method, in rounds of sweeps (each round one sweep over the candidates still open):

1. Candidates: every drive x every extra OP (namespace = capacity / (1 + extra OP)).
   Round 1 runs the job unthrottled on each, preconditioned to steady state: the most IOPS
   one drive gives (``iops_max``), the job's mix (written bytes per I/O) and its WAF (4.).
2. Drives needed: N = the most of ceil(target IOPS / iops_max), ceil(capacity / namespace)
   (with --capacity), and the N whose NAND writes over the lifetime fit the endurance.
3. Load rounds: the job again on each candidate, capped at target / N IOPS (fio rate_iops,
   split over the job's clones and its read/write mix): the p99 completion latency and the
   WAF at the load each drive will really see. A candidate that misses the p99 target, does
   not keep up with the cap gets more drives (N x 1.25, at least N + 1); one that wears out
   too soon, the N its NAND writes need at the WAF measured at load (at least N + 1); then
   another round, up to ``rounds`` load rounds.
4. Lifetime: years = raw NAND bytes x rated P/E cycles / (host write rate per drive x WAF x
   365.25 days), with perfect wear levelling; DWPD = host bytes written per day / namespace.
   The WAF is the largest of the measurements that are the drive's (waf.py): the image's
   fast-forward pass at steady state when the job writes like it (uniform random writes of
   its block size), and each timed window (round 1, the load round) that spans a whole GC
   cycle. A window of a few seconds of a drive with few large superblocks spans a fraction
   of one: its ratio is noise and is never used; with no measurement the lifetime is not
   judged and the candidate does not meet a lifetime target.
   Raw NAND bytes and P/E cycles are the preset's (`ssdtwin models NAME` gives their
   sources); the host write rate is the target IOPS / N times the written bytes per I/O.
5. Cost: N x the drive's marketed TB x its price per TB (``cost_per_tb``, the user's
   figures); without prices every TB costs the same, so the cost is the TB bought. Ranked by
   cost, then by the fraction of the drives' endurance the lifetime uses, then by N.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from .. import _core
from .. import waf as wafm
from ..waf import WafSpan
from .config import Sweep, from_dict, min_rate_iops_of
from .runner import Executor, Shared, run_sweep

YEAR_S = 365.25 * 86400
KEEP_UP = 0.97  # a capped run must reach 97 % of its cap to count as keeping up


@dataclass
class Targets:
    iops: float
    p99_us: Optional[float] = None
    lifetime_years: Optional[float] = None
    capacity_bytes: Optional[int] = None


@dataclass
class Drive:
    """What advise knows of a preset: sizes and endurance, each with the preset's source."""

    name: str
    capacity_bytes: int
    raw_bytes: int
    pe_cycles: float
    pe_source: str
    rated_dwpd: float
    dwpd_source: str

    @classmethod
    def of(cls, name: str) -> Drive:
        s = _core.preset(name)
        n = s["nand"]
        dies = n["channels"]["value"] * n["dies_per_channel"]["value"]
        raw = (
            dies * n["planes_per_die"]["value"] * n["blocks_per_plane"]["value"] * n["pages_per_block"]["value"] * n["page_bytes"]["value"]
        )
        return cls(
            name=name,
            capacity_bytes=int(s["capacity"]["tnvmcap_bytes"]["value"]),
            raw_bytes=int(raw),
            pe_cycles=float(n["pe_cycles"]["value"]),
            pe_source=str(n["pe_cycles"]["source"]),
            rated_dwpd=float(s["drive"]["dwpd"]["value"]),
            dwpd_source=str(s["drive"]["dwpd"]["source"]),
        )


@dataclass
class Candidate:
    drive: Drive
    extra_op: float
    namespace_bytes: int = 0  # full scale
    iops_max: Optional[float] = None
    write_bytes_per_io: float = 0.0
    waf_max: Optional[float] = None  # round 1's timed window, when it spans a GC cycle
    waf_first: Optional[WafSpan] = None  # round 1's timed window (waf.py's keys)
    waf_ff: Optional[WafSpan] = None  # the image's fast-forward pass, when the job writes like it
    waf_used: Optional[WafSpan] = None  # the measurement the lifetime uses
    drives: Optional[int] = None
    why_drives: str = ""
    load_iops: Optional[float] = None  # achieved per drive at the cap
    cap_iops: Optional[int] = None
    p99_us: Optional[float] = None
    waf: Optional[float] = None
    years: Optional[float] = None
    dwpd: Optional[float] = None
    endurance_dwpd: Optional[float] = None
    cost: Optional[float] = None
    meets: bool = False
    reason: str = ""
    history: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.drive.name} @ {self.namespace_bytes / 1e12:.2f} TB (+{self.extra_op:.0%} OP)"


@dataclass
class Advice:
    targets: Targets
    candidates: list[Candidate]
    priced: bool
    rounds: int
    job: str
    scale: int

    @property
    def ranked(self) -> list[Candidate]:
        ok = [c for c in self.candidates if c.meets]
        return sorted(ok, key=lambda c: (c.cost or 0.0, _wear(c, self.targets), c.drives or 0, c.drive.name, c.extra_op))


def _wear(c: Candidate, t: Targets) -> float:
    """The fraction of the drives' endurance the target lifetime uses (0: no writes)."""
    if not c.years or math.isinf(c.years):
        return 0.0
    return (t.lifetime_years or 1.0) / c.years


def years(d: Drive, host_bytes_per_s: float, waf: Optional[float]) -> float:
    """Years until the rated P/E cycles are used: raw x P/E / (host rate x WAF)."""
    if host_bytes_per_s <= 0 or not waf:
        return math.inf
    return d.raw_bytes * d.pe_cycles / (host_bytes_per_s * waf * YEAR_S)


def drives_for_life(d: Drive, total_host_bytes_per_s: float, waf: Optional[float], life: Optional[float]) -> int:
    if not life or total_host_bytes_per_s <= 0 or not waf:
        return 1
    return max(1, math.ceil(total_host_bytes_per_s * waf * life * YEAR_S / (d.raw_bytes * d.pe_cycles)))


def advise(
    job: Path,
    targets: Targets,
    drives: Sequence[str],
    extra_ops: Sequence[float],
    executor: Executor,
    out: Path,
    *,
    cost_per_tb: Optional[Mapping[str, float]] = None,
    scale: int = 64,
    runtime: str = "10s",
    ramp_time: str = "1s",
    precondition: str = "rand",
    seed: int = 1,
    rounds: int = 3,
    cache: Optional[Path] = None,
    log: Callable[[str], None] = lambda s: None,
    note: Optional[Callable[[str], None]] = None,
    on_start: Optional[Callable[[int, int, str], None]] = None,
    on_point: Optional[Callable[..., None]] = None,
) -> Advice:
    """Run the rounds (module docstring) with ``executor`` (kept open between rounds); the
    sweeps' folders go under ``out`` (round-1, load-2 ...), the images to ``cache`` (default
    OUT/cache; another advise of the same drives and seed reuses them, unless another ssdtwin
    build or preset definition made them: ``note`` says so and they are built again)."""
    infos = {n: Drive.of(n) for n in drives}
    # The namespace each candidate asks for (round 1 gives the one the drive made, on the
    # 64 KiB grid): a candidate whose run failed is still labelled with its size.
    cands = [Candidate(infos[n], x, namespace_bytes=round(infos[n].capacity_bytes / (1 + x))) for n in drives for x in extra_ops]
    shared = Shared(executor)
    base = {
        "seed": seed,
        "point": {"scale": f"1/{scale}", "precondition": precondition, "job": job.name, "runtime": runtime, "ramp_time": ramp_time},
    }

    def sweep(name: str, cases: list[dict[str, Any]]) -> dict[tuple[str, float], dict[str, Any]]:
        sw: Sweep = from_dict({**base, "title": name, "cases": cases}, name=str(job), base=job.parent)
        res = run_sweep(sw, out / name, lambda: shared, cache=cache or out / "cache", on_start=on_start, on_point=on_point, on_note=note)
        return {(p.params["preset"], p.params["extra_op"]): r for p, r in zip(sw.points, res.rows)}

    least = min_rate_iops_of(job.read_text(), {}, job.name, job.parent)
    log(f"round 1: {len(cands)} candidates, the job unthrottled (the most IOPS one drive gives)")
    first = sweep("round-1", [{"preset": c.drive.name, "extra_op": c.extra_op} for c in cands])
    for c in cands:
        r = first[(c.drive.name, c.extra_op)]
        if r["status"] != "ok":
            c.reason = f"the run failed: {r['error']}"
            continue
        c.namespace_bytes = round(r["namespace_tb_full"] * 1e12)
        c.iops_max = r["iops"]
        ios = r["read_ios"] + r["write_ios"]
        c.write_bytes_per_io = r["write_bytes"] / ios if ios else 0.0
        c.waf_first = row_measurement(r)
        c.waf_max = c.waf_first["waf"]
        c.waf_ff = row_steady_measurement(r)
        c.waf_used = _largest([c.waf_ff, c.waf_first])
        if not c.iops_max:
            c.reason = "the job did no I/O"
            continue
        c.drives, c.why_drives = _needed(c, targets, None if c.waf_used is None else c.waf_used["waf"])
    open_ = [c for c in cands if c.drives]
    done_rounds = 1
    for k in range(2, 2 + rounds):
        if not open_:
            break
        log(f"round {k}: {len(open_)} candidate{'s' * (len(open_) != 1)} at the load each drive would carry (target / drives)")
        for c in open_:
            # fio cannot cap a clone's direction below 1 I/O per second (0 is no cap): a
            # drive's share of a small target is then that floor, a load above its share.
            c.cap_iops = max(math.ceil(targets.iops / (c.drives or 1)), least or 1)
        res = sweep(f"load-{k}", [{"preset": c.drive.name, "extra_op": c.extra_op, "rate_iops": c.cap_iops} for c in open_])
        done_rounds = k
        still = []
        for c in open_:
            r = res[(c.drive.name, c.extra_op)]
            if r["status"] != "ok":
                c.reason = f"the run at {c.cap_iops:,} IOPS failed: {r['error']}"
                c.drives = None
                continue
            more = _judge(c, r, targets, cost_per_tb)
            if more is not None and k < 1 + rounds:
                c.drives, c.why_drives = more, "load"
                still.append(c)
        open_ = still
    return Advice(targets, cands, cost_per_tb is not None, done_rounds, job.name, scale)


def row_measurement(r: Mapping[str, Any]) -> WafSpan:
    """A sweep row's timed window as a WAF measurement (the keys waf.text reads)."""
    ns = r["namespace_bytes"] or 0
    host = r["host_write_bytes"] or 0
    return {
        "basis": "timed",
        "verdict": r["waf_verdict"],
        "waf": r["waf"],
        "waf_window_raw": r["waf_window_raw"],
        "host_bytes": host,
        "gc_cycles": r["waf_gc_cycles"],
        "namespace_passes": host / ns if ns else 0.0,
    }


def row_steady_measurement(r: Mapping[str, Any]) -> Optional[WafSpan]:
    """The image's fast-forward steady-state pass as a WAF measurement, when the job writes
    like it (sweep/point.py, writes_like_steady_pass) and the pass is steady; else None."""
    if not r.get("steady_waf_is_jobs") or r.get("steady_waf_verdict") != "steady":
        return None
    ns = r["namespace_bytes"] or 0
    host = r["steady_waf_host_bytes"] or 0
    return {
        "basis": "fast_forward",
        "verdict": "steady",
        "waf": r["steady_waf"],
        "waf_window_raw": r["steady_waf"],
        "host_bytes": host,
        "gc_cycles": r["steady_waf_gc_cycles"],
        "namespace_passes": host / ns if ns else 0.0,
    }


def _largest(ms: Sequence[Optional[WafSpan]]) -> Optional[WafSpan]:
    """The steady measurement with the largest WAF (never a drive longer-lived than any
    well-measured window says), or None when none is steady."""
    ok = [(waf, m) for m in ms if m is not None and m["verdict"] == "steady" and (waf := m["waf"]) is not None]
    return max(ok, key=lambda wm: wm[0])[1] if ok else None


def _needed(c: Candidate, t: Targets, waf: Optional[float]) -> tuple[int, str]:
    """Drives needed and which target set the number."""
    assert c.iops_max
    need = {"IOPS": math.ceil(t.iops / c.iops_max)}
    if t.capacity_bytes:
        need["capacity"] = math.ceil(t.capacity_bytes / c.namespace_bytes)
    need["lifetime"] = drives_for_life(c.drive, t.iops * c.write_bytes_per_io, waf, t.lifetime_years)
    n = max(need.values())
    return n, "/".join(k for k, v in need.items() if v == n)


def _judge(c: Candidate, r: Mapping[str, Any], t: Targets, cost_per_tb: Optional[Mapping[str, float]]) -> Optional[int]:
    """Figures at the load: None when they meet the targets, else the drives to try next."""
    n = c.drives or 1
    c.load_iops, c.p99_us = r["iops"], r["p99_us"]
    # The lifetime's WAF: the largest of the measurements that are the drive's (module
    # docstring); a window too short for a GC cycle is never one of them.
    at_load = row_measurement(r)
    c.waf_used = _largest([c.waf_ff, c.waf_first, at_load])
    c.waf = c.waf_used["waf"] if c.waf_used else None
    host_rate = t.iops / n * c.write_bytes_per_io
    # A job that writes, on a drive whose WAF was not measured, has no lifetime (None), not
    # an endless one: the years are judged only from a WAF that is the drive's.
    c.years = None if host_rate > 0 and c.waf is None else years(c.drive, host_rate, c.waf)
    c.dwpd = host_rate * 86400 / c.namespace_bytes
    if c.waf and t.lifetime_years:
        c.endurance_dwpd = c.drive.raw_bytes * c.drive.pe_cycles / (c.waf * c.namespace_bytes * 365.25 * t.lifetime_years)
    price = 1.0 if cost_per_tb is None else cost_per_tb[c.drive.name]
    c.cost = n * c.drive.capacity_bytes / 1e12 * price
    misses = []
    if c.load_iops < KEEP_UP * (c.cap_iops or 0):
        misses.append(f"does not keep up: {c.load_iops:,.0f} of {c.cap_iops:,} IOPS per drive")
    if t.p99_us is not None and (c.p99_us is None or c.p99_us > t.p99_us):
        misses.append(f"p99 {c.p99_us:,.0f} us > {t.p99_us:,.0f} us" if c.p99_us is not None else "no latency measured")
    slow = bool(misses)  # more drives, by a margin: latency does not fall in proportion
    # A cap at fio's floor (1 I/O per second for each direction of each clone) is more than
    # the drive's share of the target, and more drives leave it as it is: they were added
    # round after round for a miss they could not change (at a few I/Os per window, the
    # measured rate of a short --runtime is coarse).
    at_floor = slow and math.ceil(t.iops / n) < (c.cap_iops or 0)
    floor_note = " (at fio's floor of 1 I/O per second per clone and direction: more drives do not lower it)" if at_floor else ""
    life_n = drives_for_life(c.drive, t.iops * c.write_bytes_per_io, c.waf, t.lifetime_years)
    if t.lifetime_years and c.write_bytes_per_io and c.waf is None:
        misses.append(f"lifetime not judged: {wafm.text(at_load)}")
    elif t.lifetime_years and c.years is not None and c.years < t.lifetime_years:
        misses.append(f"lasts {c.years:.2f} years < {t.lifetime_years:g} at WAF {c.waf:.3f}")
    c.history.append(
        f"{n} drives at {c.cap_iops:,} IOPS each: p99 {_us(c.p99_us)}, "
        f"{_timed(at_load)}, lifetime WAF {_f(c.waf)}, {_years(c.years)} years"
        + (f" -> {'; '.join(misses)}{floor_note}" if misses else " -> meets the targets")
    )
    if not misses:
        c.meets, c.reason = True, ""
        return None
    c.reason = "; ".join(misses) + floor_note
    if not slow and c.waf is None:
        return None  # more drives would not measure the WAF: the candidate stays unjudged
    if at_floor:
        return life_n if life_n > n else None  # only the lifetime can ask for more
    # A lifetime miss alone needs exactly the drives whose NAND writes fit (at this WAF).
    return max(n + 1, math.ceil(n * 1.25) if slow else 0, life_n)


BASIS_SHORT = {"fast_forward": "ff", "timed": "timed"}


def _timed(m: Optional[WafSpan]) -> str:
    return wafm.text(m).replace("WAF", "timed WAF", 1)


def _us(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:,.0f} us"


def _years(v: Optional[float]) -> str:
    return "-" if v is None else "inf" if math.isinf(v) else f"{v:.1f}"


def _f(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:.2f}"


def report(a: Advice) -> list[str]:
    """The advice as text: targets, every candidate's figures, the cheapest that meet the
    targets with the figures behind the choice, and where each number comes from."""
    t = a.targets
    lines = [
        f"advise {a.job}: {t.iops:,.0f} IOPS"
        + (f", p99 <= {t.p99_us:,.0f} us" if t.p99_us is not None else "")
        + (f", {t.lifetime_years:g} years" if t.lifetime_years else "")
        + (f", {t.capacity_bytes / 1e12:,.2f} TB" if t.capacity_bytes else "")
        + f" (simulated at 1/{a.scale} scale: 1 round unthrottled, {a.rounds - 1} at load)",
        "",
        f"{'candidate':<44} {'IOPS/drive':>10} {'WAF':>6} {'from':>5} {'drives':>6} "
        f"{'p99@load':>10} {'years':>6} {'DWPD':>5} {'cost':>9}  verdict",
    ]
    for c in a.candidates:
        cost = "-" if c.cost is None else f"{c.cost:,.1f}"
        yrs = _years(c.years)
        iops = "-" if c.iops_max is None else f"{c.iops_max:,.0f}"
        dwpd = "-" if c.dwpd is None else f"{c.dwpd:.2f}"
        verdict = "meets" if c.meets else (c.reason or "not measured")
        m = c.waf_used
        waf, basis = ("-", "-") if m is None else (_f(m["waf"]), BASIS_SHORT[m["basis"]])
        figures = f"{iops:>10} {waf:>6} {basis:>5} {c.drives or '-':>6} {_us(c.p99_us):>10} {yrs:>6} {dwpd:>5} {cost:>9}"
        lines.append(f"{c.label:<44} {figures}  {verdict}")
    lines.append("")
    best = a.ranked
    if not best:
        lines.append("no candidate meets the targets (the verdicts above say why)")
        # How each got to the drives in its row, and what each load round measured: the
        # count came from nowhere the report showed (18 drives, "p99 146 us > 50 us", and
        # not that 14 had given 163 us, so that more drives barely help).
        tried = [c for c in a.candidates if c.history]
        if tried:
            lines.append("Each candidate's load rounds:")
        for c in tried:
            lines.append(f"{c.label}:")
            lines.extend(f"   round: {h}" for h in c.history)
    else:
        unit = "drives x TB x --cost-per-tb" if a.priced else "TB bought (no --cost-per-tb: every TB priced the same)"
        lines.append(f"The cheapest that meet the targets (cost = {unit}; ties: less wear, fewer drives):")
    for i, c in enumerate(best[:3], 1):
        used = f"{c.namespace_bytes / 1e12:.2f} TB used of {c.drive.capacity_bytes / 1e12:.2f} TB per drive"
        lines.append(f"{i}. {c.label}: {c.drives} drives, {used}, cost {c.cost:,.1f}")
        lines.append(
            f"   why {c.drives} drives ({c.why_drives}): one drive gives {c.iops_max:,.0f} IOPS of this job unthrottled "
            f"({_timed(c.waf_first)}); at {c.cap_iops:,} IOPS each, p99 {_us(c.p99_us)}"
        )
        # Its fast-forward pass follows the image's preconditioning (seq 2x, rand 2x).
        lines.append(f"   lifetime {wafm.text(c.waf_used, at_steady_state=True)}")
        lines.extend(_wear_lines(a, c))
        for h in c.history:
            lines.append(f"   round: {h}")
    lines.append("")
    lines.append(
        "Sources: IOPS, p99 (fio clat) and WAF are simulated; raw NAND and P/E cycles are the presets' (ssdtwin models NAME); "
        "years = raw x P/E / (host write rate x WAF), perfect wear levelling;"
    )
    lines.append("rated DWPD is shown for comparison only (vendors rate it under JEDEC's workload, not this one).")
    lines.append(
        "WAF from: ff = a fast-forward pass of the job's writes over the whole namespace at steady state; timed = a timed window "
        "that spans >= 1 GC cycle (superblocks reclaimed >= the drive's) or namespace pass; the largest of those is used, "
        'a shorter window never (docs/models.md, "Measuring WAF").'
    )
    for d in {c.drive.name: c.drive for c in a.candidates}.values():
        lines.append(f"  {d.name}: P/E {d.pe_cycles:,.0f} ({d.pe_source}); rated {d.rated_dwpd:g} DWPD ({d.dwpd_source})")
    return lines


def _wear_lines(a: Advice, c: Candidate) -> list[str]:
    if not c.write_bytes_per_io:
        return ["   wear: the job writes nothing"]
    t = a.targets
    rate = t.iops / (c.drives or 1) * c.write_bytes_per_io
    written = f"   wear: {rate / 1e6:,.1f} MB/s written per drive = {c.dwpd:.2f} DWPD of the namespace"
    if c.years is None:
        return [f"{written}; lifetime not judged (no WAF measured that is the drive's)"]
    line = (
        f"{written}; x WAF {_f(c.waf)} "
        f"against {c.drive.raw_bytes / 1e12:.2f} TB raw x {c.drive.pe_cycles:,.0f} P/E = {_years(c.years)} years"
    )
    if not c.endurance_dwpd:
        return [line]
    return [
        line,
        f"   endurance at this WAF over {t.lifetime_years:g} years: {c.endurance_dwpd:.2f} DWPD (rated {c.drive.rated_dwpd:g} DWPD)",
    ]


def to_json(a: Advice) -> dict[str, Any]:
    def c_json(c: Candidate) -> dict[str, Any]:
        return {
            "drive": c.drive.name,
            "extra_op": c.extra_op,
            "namespace_bytes": c.namespace_bytes,
            "iops_max": c.iops_max,
            "waf_unthrottled": c.waf_max,
            "drives": c.drives,
            "drives_set_by": c.why_drives or None,
            "cap_iops_per_drive": c.cap_iops,
            "iops_at_load": c.load_iops,
            "p99_us_at_load": c.p99_us,
            "waf": c.waf,
            "waf_basis": c.waf_used and c.waf_used["basis"],
            "waf_host_bytes": c.waf_used and c.waf_used["host_bytes"],
            "waf_gc_cycles": c.waf_used and c.waf_used["gc_cycles"],
            "waf_fast_forward": c.waf_ff and c.waf_ff["waf"],
            "waf_unthrottled_window_raw": c.waf_first and c.waf_first["waf_window_raw"],
            "waf_unthrottled_gc_cycles": c.waf_first and c.waf_first["gc_cycles"],
            "years": None if c.years is None or math.isinf(c.years) else c.years,
            "dwpd": c.dwpd,
            "endurance_dwpd": c.endurance_dwpd,
            "rated_dwpd": c.drive.rated_dwpd,
            "raw_bytes": c.drive.raw_bytes,
            "pe_cycles": c.drive.pe_cycles,
            "cost": c.cost,
            "meets": c.meets,
            "reason": c.reason or None,
            "rounds": c.history,
        }

    t = a.targets
    return {
        "targets": {"iops": t.iops, "p99_us": t.p99_us, "lifetime_years": t.lifetime_years, "capacity_bytes": t.capacity_bytes},
        "scale": a.scale,
        "cost_unit": "price" if a.priced else "tb_bought",
        "ranked": [c_json(c) for c in a.ranked],
        "candidates": [c_json(c) for c in a.candidates],
    }
