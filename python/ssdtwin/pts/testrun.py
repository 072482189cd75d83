"""One PTS test while it runs: its folder, its rows, its clock and the bytes written; one
element run, preconditioning, and rounds until steady state."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Optional, Protocol

from . import steady as ss
from . import tests as T
from .folder import COLUMNS, csv_text, write_atomic
from .measurements import fio_row, fio_runtime_s, fio_written
from .progress import Events
from .records import PassVerdict, RoundRow, SteadyState, TestExtra, TestResult, TestSettings, TestStatus, cell
from .settings import Settings
from .target import PtsError, PtsTarget


class Suite(Protocol):
    """What a running test needs from the suite that runs it (suite.Runner)."""

    target: PtsTarget
    folder: Path
    settings: Settings
    events: Events
    scale: int  # N of a 1/N twin, 1 for a full-size twin or a real target

    def test_settings(self, test: str) -> TestSettings: ...

    def di_workload(self, test: str) -> T.DiWorkload: ...

    def purge(self) -> str: ...

    def save_manifest(self) -> None: ...


class TestRun:
    """The state of one test while it runs: its folder, rows, clock and bytes written."""

    def __init__(self, runner: Suite, test: str) -> None:
        self.runner = runner
        self.test = test
        self.dir = runner.folder / test
        for sub in ("jobs", "fio"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        self.rows: list[RoundRow] = []
        self.hists: dict[tuple[int, str], dict[str, dict[int, int]]] = {}
        self.clock_s = 0.0  # since the test's start: simulated on a twin, fio's runtimes on a real target
        self.written = 0
        self.wall0 = time.perf_counter()
        self.status: TestStatus = "running"
        self.message = ""
        self.window: Optional[list[int]] = None
        self.steady_doc: Optional[SteadyState] = None
        self.extra: TestExtra = {}
        self.rounds_run = 0
        self.purge_method = ""
        self.ss_status = ""
        self.last_hists: dict[str, dict[int, int]] = {}  # the read/write clat histograms of the last run
        self.sub_iu: dict[str, None] = {}  # the write sizes run that are not whole IUs (ordered set)
        self._rows_saved_at = 0.0  # perf_counter() after rounds.csv was last written, and what that took
        self._rows_save_s = 0.0

    # -- writing -----------------------------------------------------------------------
    def write_job(self, el: T.Element) -> Path:
        path = self.dir / "jobs" / f"{el.name}.fio"
        text = el.job_text(self.runner.target.target_lines(), T.TITLES[self.test])
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
        return path

    def save_rows(self, final: bool = False) -> None:
        """Write rounds.csv. While the test runs (once per round or segment), only once the
        time since the last write is 20 times what that write took: rewriting every row after
        every segment cost time quadratic in the rows (a P5316's 1,543 WSAT segments on a 1 GiB
        namespace: 30 s of CPU, ~11 s of them the CSV), so the file now costs at most ~5 % of
        the run and is at most seconds behind it. ``final``: the test's end (also after Ctrl-C
        or a failure: Suite.finish_test) writes every row."""
        now = time.perf_counter()
        if not final and now - self._rows_saved_at < 20 * self._rows_save_s:
            return
        write_atomic(self.dir / "rounds.csv", csv_text(self.rows, COLUMNS))
        self._rows_saved_at = time.perf_counter()
        self._rows_save_s = self._rows_saved_at - now

    def save_steady(self, doc: SteadyState) -> None:
        self.steady_doc = doc
        write_atomic(self.dir / "steady.json", json.dumps(doc, indent=1) + "\n")

    def result_doc(self) -> TestResult:
        settings = self.runner.test_settings(self.test)
        if self.purge_method:
            settings["purge"] = self.purge_method
        return {
            "test": self.test,
            "title": T.TITLES[self.test],
            "status": self.status,
            "message": self.message,
            "rounds_run": self.rounds_run,
            "window": self.window,
            "purge": self.purge_method,
            "settings": settings,
            "wall_s": round(time.perf_counter() - self.wall0, 3),
            "sim_s": round(self.clock_s, 6),
            "bytes_written_total": self.written,
            "extra": self._extra_with_iu_note(),
        }

    def _extra_with_iu_note(self) -> TestExtra:
        """``extra``, with a note when writes of this test were not whole IUs of the target: the
        drive read-modify-writes every IU such a write touches, so those write figures are the
        drive's sub-IU ones (a P5316's 4 KiB random writes program 64 KiB each), which a
        reader of the report must be told (docs/pts.md, "Writes smaller than the IU")."""
        iu = int(self.runner.target.info.extra.get("iu_bytes") or 0)
        if not self.sub_iu or not iu:
            return self.extra
        sizes = list(self.sub_iu)
        what = sizes[0] if len(sizes) == 1 else ", ".join(sizes[:-1]) + " and " + sizes[-1]
        note = (
            f"This drive maps {T.bs_title(iu)} indirection units (IU): the {what} random writes of this test are not "
            "whole IUs, so the drive read-modify-writes every IU each of them touches and programs it whole "
            '(docs/models.md §2, "Indirection units"). Their write IOPS, bandwidth and latencies are the drive\'s '
            f"sub-IU figures; writes of whole {T.bs_title(iu)} IUs do not pay it."
        )
        return {**self.extra, "notes": [*self.extra.get("notes", []), note]}

    def save_result(self) -> None:
        write_atomic(self.dir / "result.json", json.dumps(self.result_doc(), indent=1) + "\n")

    # -- running -----------------------------------------------------------------------
    def purge(self) -> None:
        self.runner.events.step(self.test, "purge", None, "")
        self.purge_method = self.runner.purge()
        self.written = 0

    def run(
        self,
        el: T.Element,
        *,
        round_no: Optional[int] = None,
        segment: Optional[int] = None,
        phase: str = "",
        wait_s: Optional[float] = None,
        json_name: Optional[str] = None,
        record: bool = True,
        what: str = "",
        frac: Optional[float] = None,
    ) -> RoundRow:
        """Run one element: its job file, its fio JSON, and (``record``) its rounds.csv row."""
        job = self.write_job(el)
        iu = int(self.runner.target.info.extra.get("iu_bytes") or 0)
        if iu and (off := T.sub_iu_writes(el, iu)):
            self.sub_iu[off] = None
        if json_name is None:
            json_name = f"r{round_no:02d}-{el.name}" if round_no is not None else f"s{segment:04d}-{el.name}"
        self.runner.events.step(self.test, what or el.label, frac, self.ss_status)
        j = self.runner.target.run_fio(job, self.dir / "fio" / f"{json_name}.json")
        dur = fio_runtime_s(j)
        t0 = self.clock_s
        self.clock_s += dur
        self.written += fio_written(j)
        vals, hists = fio_row(j)
        self.last_hists = hists
        cap = self.runner.target.info.capacity_bytes or 1
        row: RoundRow = {
            "round": round_no,
            "segment": segment,
            "element": el.name,
            "rw": el.rw,
            "read_pct": el.read_pct,
            "bs_bytes": el.bs_bytes,
            "numjobs": el.numjobs,
            "iodepth": el.iodepth,
            "runtime_s": dur,
            "t_start_s": round(t0, 6),
            "t_end_s": round(self.clock_s, 6),
            **vals,
            "bytes_written_total": self.written,
            "drive_fills": self.written / cap,
            "wait_s": wait_s,
            "phase": phase,
        }
        if record:
            self.rows.append(row)
            if self.test == "lat" and round_no is not None:
                self.hists[(round_no, el.name)] = hists
        return row

    def idle(self, seconds: float) -> None:
        self.runner.target.idle(seconds)
        self.clock_s += seconds

    def wipc(self, el: T.Element) -> None:
        """Workload-independent preconditioning (not a round: its summary goes to result.json)."""
        row = self.run(el, json_name=el.name, record=False, what=el.label)
        self.extra.setdefault("wipc", []).append(
            {
                "element": el.name,
                "bytes": row["bytes_written_total"],
                "runtime_s": row["runtime_s"],
                "write_bw_bytes_s": row["write_bw_bytes_s"],
            }
        )

    def rounds(
        self, p: T.Pass, eval_prefix: Sequence[SteadyState] = (), min_fills: float = 0.0, phase_of: Optional[dict[str, str]] = None
    ) -> SteadyState:
        """WDPC: rounds of ``p.elements`` until every tracking variable is steady (or max rounds).
        With ``min_fills``, rounds first run until that many capacities are written since the
        purge (saturation rounds: recorded, but neither judged nor counted against
        --max-rounds). Returns this pass's steady-state evaluation."""
        st = self.runner.settings
        state: Optional[SteadyState] = None
        n = len(p.elements)
        cap = self.runner.target.info.capacity_bytes
        first: Optional[int] = None  # the first round judged
        self.ss_status = f"steady state: needs {st.min_rounds} rounds"
        r = 0
        while first is None or r - first + 1 < st.max_rounds:
            r += 1
            saturating = first is None and min_fills > 0
            for i, el in enumerate(p.elements, 1):
                fills = self.written / cap if cap else 0.0
                what = f"{p.name} round {r}" + (f", {fills:.2f}/{min_fills:g} fills" if saturating else f"/{st.max_rounds}")
                done = 0.0 if first is None else (r - first) / st.max_rounds
                self.run(
                    el,
                    round_no=r,
                    phase=(phase_of or {}).get(el.name, "pre" if self.test in ("hir", "curve") else ""),
                    what=f"{what}, {i}/{n} {el.label}",
                    frac=min(1.0, done + (i - 1) / (st.max_rounds * n)) if first is not None else None,
                )
            self.rounds_run = max(self.rounds_run, r)
            self.save_rows()
            if first is None:
                if cap and self.written < min_fills * cap:
                    if not any(x["round"] == r and x["write_iops"] for x in self.rows):
                        raise PtsError(f"{p.name}: round {r} wrote nothing; cannot reach {min_fills:g} drive fills")
                    self.ss_status = f"saturating: {self.written / cap:.2f}/{min_fills:g} drive fills"
                    self.runner.save_manifest()
                    continue
                first = r
            series = []
            for v in p.tracking:
                rows = [x for x in self.rows if x["element"] == v.element and x["round"] and x["round"] >= first]
                series.append([(x["round"], cell(x, v.column) or 0.0) for x in rows if x["round"]])
            variables = [ss.Variable(v.name, v.element, v.column, v.unit) for v in p.tracking]
            state = ss.evaluate(variables, series, st.min_rounds, st.max_rounds)
            state["pass"] = p.name
            state["first_round"] = first
            self.save_steady(self._combine([*eval_prefix, state]))
            self.ss_status = _ss_text(state, r - first + 1, st.min_rounds)
            self.runner.save_manifest()
            if r - first + 1 >= st.min_rounds and state["steady"]:
                break
        assert state is not None  # the loop judges at least one round: max_rounds >= 5
        return state

    def _combine(self, passes: Sequence[SteadyState]) -> SteadyState:
        """steady.json of a test with one or more passes (Throughput: one per block size)."""
        if len(passes) == 1:
            return passes[0].copy()
        wins = [w for p in passes if (w := p["window"])]
        verdicts: list[PassVerdict] = [
            {"pass": p["pass"], "steady": p["steady"], "steady_round": p["steady_round"], "window": p["window"]} for p in passes
        ]
        return {
            "rule": ss.RULE,
            "min_rounds": passes[0]["min_rounds"],
            "max_rounds": passes[0]["max_rounds"],
            "steady": all(p["steady"] for p in passes),
            "steady_round": max((p["steady_round"] or 0) for p in passes) if all(p["steady"] for p in passes) else None,
            "window": [min(w[0] for w in wins), max(w[1] for w in wins)] if wins else None,
            "variables": [v for p in passes for v in p["variables"]],
            "passes": verdicts,
        }


def _ss_text(state: SteadyState, r: int, min_rounds: int) -> str:
    """The progress display's steady-state column after round ``r``."""
    window = state["window"]
    if state["steady"] and r >= min_rounds and window:  # steady: every variable has a window
        return f"steady (rounds {window[0]}-{window[1]})"
    if r < ss.WINDOW_ROUNDS:
        return f"steady state: {r}/{ss.WINDOW_ROUNDS} rounds for a window"
    worst = []
    for v in state["variables"]:
        if v["window"] and not v["steady"]:
            d = v["data_excursion"] / v["avg"] if v["avg"] else float("inf")
            sl = v["slope_excursion"] / v["avg"] if v["avg"] else float("inf")
            worst.append(f"data {d:.0%}/20%, slope {sl:.0%}/10%")
    return "not steady: " + "; ".join(worst) if worst else "steady (needs min rounds)"
