"""The flow of each PTS test (docs/pts.md): purge, preconditioning, rounds to steady
state or segments, and what the test concludes. ``FLOWS`` maps a test id to its flow."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Callable

from . import steady as ss
from . import tests as T
from .folder import write_hist
from .records import RoundRow, RthPoint, SteadyState
from .tables import di_points, di_table, xsr_recovery_s, xsr_recovery_text, xsr_summary
from .testrun import Suite, TestRun


def _purged_pass(runner: Suite, tr: TestRun, p: T.Pass, prev: Sequence[SteadyState] = ()) -> SteadyState:
    tr.purge()
    if p.wipc is not None:
        tr.wipc(p.wipc)
    return tr.rounds(p, prev)


def _conclude(tr: TestRun) -> None:
    doc = tr.steady_doc
    tr.window = doc["window"] if doc else None
    # Passes are judged apart (Throughput: one per block size); the top-level window spans
    # theirs, so where they differ the message names each (not "rounds 1-8" for 1-5 and 4-8).
    windows = [(p["pass"], p["window"]) for p in (doc.get("passes") or [] if doc else []) if p["window"]]
    apart = len({tuple(w) for _, w in windows}) > 1
    if apart:
        where = ", ".join(f"{name} in rounds {w[0]}-{w[1]}" for name, w in windows)
    else:
        where = f"in rounds {tr.window[0]}-{tr.window[1]}" if tr.window else ""
    if doc and doc["steady"]:
        tr.status, tr.message = "steady", f"steady state {where}" if where else "steady"
    else:
        bad = [v["name"] for v in (doc["variables"] if doc else []) if not v["steady"]]
        tr.status = "not steady"
        measured = f"windows {where}" if apart else f"window {tr.window}"
        tr.message = f"not in steady state after {tr.rounds_run} rounds ({', '.join(bad)}); {measured} reported as measured"


def iops(runner: Suite, tr: TestRun) -> None:
    st = runner.settings
    tc, qd = st.tc_qd["iops"]
    p = T.iops_pass(st.iops_bs, st.iops_mixes, tc, qd, st.round_s)
    _purged_pass(runner, tr, p)
    _conclude(tr)


def tp(runner: Suite, tr: TestRun) -> None:
    st = runner.settings
    tc, qd = st.tc_qd["tp"]
    states: list[SteadyState] = []
    for p in T.tp_passes(st.tp_bs, tc, qd, st.round_s):
        tr.rounds_run = 0
        states.append(_purged_pass(runner, tr, p, states))
    tr.rounds_run = max(len(s["variables"][0]["rounds"]) for s in states)
    _conclude(tr)


def lat(runner: Suite, tr: TestRun) -> None:
    st = runner.settings
    tc, qd = st.tc_qd["lat"]
    p = T.lat_pass(st.lat_bs, st.lat_mixes, tc, qd, st.round_s)
    _purged_pass(runner, tr, p)
    _conclude(tr)


def wsat(runner: Suite, tr: TestRun) -> None:
    st = runner.settings
    tc, qd = st.tc_qd["wsat"]
    el = T.wsat_element(tc, qd, st.segment_s(runner.scale))
    cap = runner.target.info.capacity_bytes
    tr.purge()
    seg = 0
    first_judged = 0  # the first segment --wsat-stop-steady may judge (0: none yet)
    reason = ""
    while not reason:
        seg += 1
        fills = tr.written / cap if cap else 0.0
        tr.run(
            el,
            segment=seg,
            what=f"segment {seg}: {fills:.2f}/{st.wsat_fills:g} fills, {tr.clock_s:.0f}/{st.wsat_max_time_s:g} s",
            frac=min(1.0, max(fills / st.wsat_fills, tr.clock_s / st.wsat_max_time_s)),
        )
        tr.rounds_run = seg
        tr.save_rows()
        runner.save_manifest()
        if cap and tr.written >= st.wsat_fills * cap:
            reason = f"{st.wsat_fills:g}x capacity written"
        elif tr.clock_s >= st.wsat_max_time_s:
            reason = f"time limit {st.wsat_max_time_s:g} s reached"
        elif st.wsat_stop_steady and tr.written >= st.wsat_min_fills * cap:
            # A window is judged only from the segment that took the writes past
            # --wsat-min-fills on: before it the drive may still write at its flat FOB rate,
            # which the rule calls steady (docs/pts.md, WSAT).
            first_judged = first_judged or seg
            check = ss.last_window([(_segment(r), r["iops"]) for r in tr.rows if _segment(r) >= first_judged])
            if check is not None and check.steady:
                reason = f"steady state in segments {check.rounds[0]}-{check.rounds[-1]}"
                tr.extra["steady"] = check.to_dict()
    tr.window = [max(1, seg - ss.WINDOW_ROUNDS + 1), seg]
    tr.status, tr.message = "complete", f"stopped after {_count(seg, 'segment')}: {reason}"
    tr.extra["stop"] = reason


def _count(n: int, word: str) -> str:
    """``1 segment``, ``2 segments``: the status message's counts (a WSAT that one segment
    fills said "stopped after 1 segments")."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def hir(runner: Suite, tr: TestRun) -> None:
    st = runner.settings
    tc, qd = st.tc_qd["hir"]
    pre = T.rnd(4 * T.KIB, 0, tc, qd, st.round_s)
    p = T.Pass("hir-pre", None, (pre,), (T.Tracking("RND 4KiB 100% W IOPS (pre-HIR)", pre.name, "iops", "IOPS"),))
    tr.purge()
    state = tr.rounds(p, min_fills=st.hir_pre_fills)
    tr.extra["pre_steady"] = state["steady"]
    tr.extra["pre_window"] = state["window"]
    tr.extra["pre_fills"] = tr.written / runner.target.info.capacity_bytes if runner.target.info.capacity_bytes else None
    var = state["variables"][0] if state["variables"] else None
    tr.extra["baseline_iops"] = var.get("avg") if var else None  # the pre-HIR window's average: what A and C are set against
    if not tr.extra["pre_steady"]:
        note = "the pre-HIR write phase did not reach steady state; its last 5 rounds are the baseline"
        tr.extra.setdefault("notes", []).append(note)
    burst = T.rnd(4 * T.KIB, 0, tc, qd, st.hir_burst_s, suffix=f"-{T.fio_seconds(st.hir_burst_s)}s")
    seg = 0
    n = st.hir_reps
    total = 2 * n * len(st.hir_waits_s)
    tr.ss_status = "pre-HIR steady" if tr.extra["pre_steady"] else "pre-HIR NOT steady"
    for wait in st.hir_waits_s:
        for phase in ("A", "C"):
            for i in range(1, n + 1):
                seg += 1
                what = f"wait state {wait:g} s, {phase} {i}/{n}"
                tr.run(burst, segment=seg, phase=phase, wait_s=wait, what=what, frac=(seg - 1) / total)
                tr.extra["bursts"] = seg  # rounds_run counts the preconditioning rounds; these are the bursts
                if phase == "A":
                    tr.idle(wait)
                if i % 10 == 0 or i == n:
                    tr.save_rows()
                    runner.save_manifest()
    tr.status = "complete"
    tr.message = f"{_count(len(st.hir_waits_s), 'wait state')} x {_count(n, 'repetition')}" + (
        "" if tr.extra["pre_steady"] else "; the pre-HIR write phase did not reach steady state"
    )


def curve(runner: Suite, tr: TestRun) -> None:
    st = runner.settings
    tc, qd = st.tc_qd["curve"]
    pre = T.rnd(4 * T.KIB, T.CURVE_READ_PCT, tc, qd, st.round_s, suffix=f"-j{tc}-qd{qd}-pre")
    p = T.Pass("curve-pre", T.wipc(), (pre,), (T.Tracking("RND 4KiB 70/30 IOPS (preconditioning)", pre.name, "iops", "IOPS"),))
    state = _purged_pass(runner, tr, p)
    tr.extra["pre_steady"] = state["steady"]
    pts = T.curve_elements(st.curve_jobs, st.curve_qd, st.round_s)
    for i, el in enumerate(pts, 1):
        what = f"point {i}/{len(pts)}: {el.numjobs} jobs x QD{el.iodepth}"
        tr.run(el, segment=i, phase="curve", what=what, frac=(i - 1) / len(pts))
        tr.save_rows()
        runner.save_manifest()
    tr.status = "complete"
    tr.message = _count(len(pts), "point") + ("" if tr.extra["pre_steady"] else "; preconditioning did not reach steady state")


def xsr(runner: Suite, tr: TestRun) -> None:
    """Cross Stimulus Recovery: from FOB, SEQ 1024 KiB W, then RND 8 KiB W, then SEQ
    1024 KiB W again, each for its duration (divided by N on a 1/N twin), in segments."""
    st = runner.settings
    tc, qd = st.tc_qd["xsr"]
    plan = st.xsr_group_segments(runner.scale)  # each group in equal segments, its duration exact
    groups = [T.xsr_groups(tc, qd, seg_s)[ag] for ag, (_, seg_s) in enumerate(plan)]
    counts = [n for n, _ in plan]
    tr.purge()
    seg = 0
    total = sum(counts)
    for ag, (el, n) in enumerate(zip(groups, counts), 1):
        for i in range(1, n + 1):
            seg += 1
            tr.run(el, segment=seg, phase=f"AG{ag}", what=f"AG{ag} {el.label}: segment {i}/{n}", frac=(seg - 1) / total)
            tr.rounds_run = seg
            if i % 10 == 0 or i == n:
                tr.save_rows()
                runner.save_manifest()
    summary = xsr_summary(tr.rows)
    tr.extra["access_groups"] = summary
    tr.extra["recovery_s"] = xsr_recovery_s(tr.rows)
    tr.window = [max(1, seg - ss.WINDOW_ROUNDS + 1), seg]
    tr.status = "complete"
    tr.message = f"{_count(seg, 'segment')} in 3 access groups; {xsr_recovery_text(tr.rows)}"


def cbw(runner: Suite, tr: TestRun) -> None:
    _demand_intensity(runner, tr, runner.di_workload("cbw"))


def dirth(runner: Suite, tr: TestRun) -> None:
    _demand_intensity(runner, tr, runner.di_workload("dirth"))


def _demand_intensity(runner: Suite, tr: TestRun, wl: T.DiWorkload) -> None:
    """CBW and DIRTH: purge; preconditioning rounds (100 % W of the pattern) to steady
    state; demand-intensity rounds (pre-write, then the TC x QD matrix) to steady state;
    then the response-time histogram at the max, mid and min IOPS points."""
    st = runner.settings
    tc, qd = st.tc_qd[tr.test]
    tr.purge()
    pc = T.di_pc_pass(wl, tc, qd, st.scaled_s(st.round_s, runner.scale), st.di_pc_intervals)
    pc_state = tr.rounds(pc, phase_of={e.name: "pc" for e in pc.elements})
    di = T.di_pass(wl, tc, qd, st.scaled_s(st.di_prewrite_s, runner.scale), st.di_tc, st.di_qd, st.round_s)
    phases = {e.name: "di" for e in di.elements}
    phases[di.elements[0].name] = "prewrite"
    di_state = tr.rounds(di, [pc_state], phase_of=phases)
    tr.window = di_state["window"]
    table = di_table(tr.rows, di.elements[1:], tr.window)
    points = di_points(table, st.di_art_limit_us)
    tr.extra["pc_steady"] = pc_state["steady"]
    tr.extra["di_steady"] = di_state["steady"]
    tr.extra["points"] = points
    rth: list[RthPoint] = []
    seg = 0
    for k, (kind, (ptc, pqd)) in enumerate(points.items()):
        pre = wl.element(0, ptc, pqd, st.scaled_s(st.di_rth_prewrite_s, runner.scale), f"-{kind}-prewrite")
        meas = wl.element(wl.read_pct, ptc, pqd, st.di_rth_s, f"-{kind}")
        for el, phase in ((pre, f"rth-prewrite-{kind}"), (meas, f"rth-{kind}")):
            seg += 1
            row = tr.run(el, segment=seg, phase=phase, what=f"{kind} IOPS point TC{ptc}/QD{pqd}: {el.label}", frac=(2 * k + 1) / 6)
        write_hist(tr.dir / f"hist-{meas.name}.csv", tr.last_hists)
        rth.append(_rth_point(kind, ptc, pqd, meas.name, row))
        tr.save_rows()
        runner.save_manifest()
    tr.extra["rth"] = rth
    if pc_state["steady"] and di_state["steady"]:
        tr.status = "steady"
        where = f"rounds {tr.window[0]}-{tr.window[1]}" if tr.window else "steady"
        tr.message = f"preconditioning and demand intensity steady ({where}); histograms at {', '.join(points)}"
    else:
        bad = [n for n, stt in (("preconditioning", pc_state), ("demand intensity", di_state)) if not stt["steady"]]
        tr.status = "not steady"
        tr.message = f"{' and '.join(bad)} not in steady state after {st.max_rounds} rounds; window {tr.window} reported as measured"


def _segment(row: RoundRow) -> int:
    """The segment of a row run in segments (WSAT, HIR, XSR ...)."""
    seg = row["segment"]
    if seg is None:
        raise ValueError(f"{row['element']}: a row without a segment where segments are compared")
    return seg


def _rth_point(kind: str, tc: int, qd: int, element: str, row: RoundRow) -> RthPoint:
    """A response-time histogram point of CBW/DIRTH: which one, where, and its run's figures."""
    return {
        "point": kind,
        "tc": tc,
        "qd": qd,
        "element": element,
        "iops": row["iops"],
        "lat_mean_us": row.get("lat_mean_us"),
        "lat_max_us": row.get("lat_max_us"),
        "lat_p99_us": row.get("lat_p99_us"),
        "lat_p99_9_us": row.get("lat_p99_9_us"),
        "lat_p99_99_us": row.get("lat_p99_99_us"),
    }


FLOWS: dict[str, Callable[[Suite, TestRun], None]] = {
    "iops": iops,
    "tp": tp,
    "lat": lat,
    "wsat": wsat,
    "hir": hir,
    "curve": curve,
    "xsr": xsr,
    "cbw": cbw,
    "dirth": dirth,
}
