"""The tests of a PTS run one after the other on one target: pts.json (the manifest) kept
current after every round, each test's settings and plan, and a stopped run's record."""

from __future__ import annotations

import json
import os
import platform
import socket
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from .. import _core
from . import tests as T
from .flows import FLOWS, _count
from .folder import FORMAT, VERSION, write_atomic
from .progress import Events
from .records import Manifest, ManifestTest, TestSettings
from .settings import Settings
from .tables import write_tables
from .target import PtsError, PtsTarget
from .testrun import TestRun


class Runner:
    def __init__(self, target: PtsTarget, folder: Path, settings: Settings, events: Optional[Events] = None) -> None:
        self.target = target
        self.folder = folder
        self.settings = settings
        self.events = events or Events()
        self.tests: dict[str, TestRun] = {}
        self._manifest: Optional[Manifest] = None
        self.wall0 = time.perf_counter()
        scale = target.info.scale if target.info.simulated else ""
        self.scale = int(scale[2:]) if scale.startswith("1/") and scale[2:].isdigit() else 1

    # -- manifest -------------------------------------------------------------------------
    @property
    def manifest(self) -> Manifest:
        """pts.json as it stands (start_manifest writes it first)."""
        if self._manifest is None:
            raise RuntimeError("the manifest is written by start_manifest, not called yet")
        return self._manifest

    def start_manifest(self, tests: Sequence[str]) -> None:
        info = self.target.info
        st = self.settings
        fio = info.extra.get("fio") if not info.simulated else "ssdtwin fio (simulated time)"
        self._manifest = {
            "format": FORMAT,
            "version": VERSION,
            "complete": False,
            "interrupted": False,
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "finished": None,
            "wall_s": 0.0,
            "device": info.to_json(),
            "platform": {
                "host": socket.gethostname(),
                "os": f"{platform.system()} {platform.release()}",
                "cpu": platform.processor() or platform.machine(),
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "software": f"ssdtwin {_core.__version__}",
                "fio": fio or "fio",
            },
            "settings": {
                "round_s": st.round_s,
                "min_rounds": st.min_rounds,
                "max_rounds": st.max_rounds,
                "purge": st.purge,
                "active_range_pct": 100,
                "write_cache": "disabled (PLP)" if info.simulated else "as the device reports (Enterprise: WCD)",
                "data_pattern": "random (refill_buffers)",
                "wipc": "SEQ 128KiB 2x capacity (SEQ 1024KiB for the 1024KiB Throughput pass)",
                "power_state": info.extra.get("power_state_desc", ""),
                "tc_qd": st.to_json()["tc_qd"],
                "seed": st.seed,
                "all": st.to_json(),
            },
            "tests": {t: _pending(t) for t in tests},
        }
        self.save_manifest()

    def save_manifest(self) -> None:
        self.manifest["wall_s"] = round(time.perf_counter() - self.wall0, 3)
        for t, tr in self.tests.items():
            self.update_entry(self.manifest["tests"][t], tr)
        write_atomic(self.folder / "pts.json", json.dumps(self.manifest, indent=1) + "\n")

    @staticmethod
    def update_entry(m: ManifestTest, tr: TestRun) -> None:
        """A test's pts.json entry as it runs: status, wall and stimulus seconds, the rounds
        run (result.json's rounds_run) and HIR's bursts (``--jobs``: in the test's process)."""
        m.update({"status": tr.status, "wall_s": round(time.perf_counter() - tr.wall0, 3) if tr.status == "running" else m["wall_s"]})
        m["sim_s"] = round(tr.clock_s, 6)
        m["rounds_run"] = tr.rounds_run
        if "bursts" in tr.extra:
            m["bursts"] = tr.extra["bursts"]

    def test_settings(self, test: str) -> TestSettings:
        st = self.settings
        tc, qd = st.tc_qd[test]
        base: TestSettings = {
            "tc": tc,
            "qd": qd,
            "round_s": st.round_s,
            "min_rounds": st.min_rounds,
            "max_rounds": st.max_rounds,
            "purge": st.purge,
        }
        if test == "iops":
            base.update({"bs_bytes": list(st.iops_bs), "mixes": [T.mix_label(m) for m in st.iops_mixes], "wipc": "SEQ 128KiB 2x"})
        elif test == "tp":
            base.update({"bs_bytes": list(st.tp_bs), "wipc": "SEQ at the pass's block size, 2x"})
        elif test == "lat":
            base.update({"bs_bytes": list(st.lat_bs), "mixes": [T.mix_label(m) for m in st.lat_mixes], "wipc": "SEQ 128KiB 2x"})
        elif test == "wsat":
            base.update(
                {
                    "segment_s": st.segment_s(self.scale),
                    "stop_fills": st.wsat_fills,
                    "stop_time_s": st.wsat_max_time_s,
                    "stop_steady": st.wsat_stop_steady,
                    "steady_min_fills": st.wsat_min_fills,
                    "wipc": "none (starts FOB)",
                }
            )
        elif test == "hir":
            base.update(
                {
                    "reps": st.hir_reps,
                    "waits_s": list(st.hir_waits_s),
                    "burst_s": st.hir_burst_s,
                    "pre_fills": st.hir_pre_fills,
                    "wipc": f"none (RND 4KiB W: {st.hir_pre_fills:g} drive fills, then to steady state)",
                }
            )
        elif test == "curve":
            base.update({"jobs": list(st.curve_jobs), "qd_list": list(st.curve_qd), "read_pct": T.CURVE_READ_PCT, "wipc": "SEQ 128KiB 2x"})
        elif test == "xsr":
            hours = [round(s / 3600.0, 9) for s in st.xsr_group_seconds(self.scale)]
            base.update(
                {
                    "access_groups": ["SEQ 1024KiB W", "RND 8KiB W", "SEQ 1024KiB W"],
                    "hours_full_drive": list(st.xsr_hours),
                    "hours_run": hours,
                    "segment_s": st.xsr_segment(self.scale),
                    "wipc": "none (starts FOB)",
                }
            )
        elif test in ("cbw", "dirth"):
            wl = self.di_workload(test)
            base.update(
                {
                    "pattern": wl.bssplit or T.bs_title(wl.bs_bytes),
                    "distribution": wl.distribution or "uniform",
                    "mix": T.mix_label(wl.read_pct),
                    "tc_list": list(st.di_tc),
                    "qd_list": list(st.di_qd),
                    "pc_intervals": st.di_pc_intervals,
                    "pc_interval_s": st.scaled_s(st.round_s, self.scale),
                    "prewrite_s": st.scaled_s(st.di_prewrite_s, self.scale),
                    "rth_prewrite_s": st.scaled_s(st.di_rth_prewrite_s, self.scale),
                    "rth_s": st.di_rth_s,
                    "art_limit_us": st.di_art_limit_us,
                    "wipc": f"none (100% W of the pattern at TC{tc}/QD{qd} in rounds of {st.di_pc_intervals} intervals until steady)",
                }
            )
        return base

    def di_workload(self, test: str) -> T.DiWorkload:
        st = self.settings
        return T.cbw_workload() if test == "cbw" else T.dirth_workload(st.dirth_bs, st.dirth_mix)

    def purge(self) -> str:
        """Purge the target; the header shows the method used (``--purge auto`` resolved)."""
        method = self.target.purge()
        self.manifest["settings"]["purge"] = method
        return method

    # -- the suite --------------------------------------------------------------------------
    def run(self, tests: Sequence[str]) -> None:
        self.start_manifest(tests)
        try:
            for test in tests:
                tr = TestRun(self, test)
                self.tests[test] = tr
                self.events.test_started(test, T.TITLES[test], self.plan(test))
                try:
                    FLOWS[test](self, tr)
                except (PtsError, _core.SsdtwinError) as e:  # this test failed; the next one still runs
                    tr.status, tr.message = "failed", str(e)
                self.finish_test(tr)
        except KeyboardInterrupt:
            running = [tr for tr in self.tests.values() if tr.status == "running"]
            for tr in running:
                tr.status, tr.message = "interrupted", "stopped by Ctrl-C; the rounds done so far are kept"
                tr.window = tr.window or (tr.steady_doc["window"] if tr.steady_doc else None)
                self.finish_test(tr)
            for t in tests:
                if t not in self.tests:
                    self.manifest["tests"][t]["status"] = "not run"
            self.manifest["interrupted"] = True
            self.close_manifest()
            raise
        self.manifest["complete"] = True
        self.close_manifest()

    def close_manifest(self) -> None:
        self.manifest["finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.save_manifest()

    def finish_test(self, tr: TestRun) -> None:
        if tr.rows:
            tr.save_rows(final=True)
            try:
                write_tables(tr)
            except (KeyError, ValueError, ZeroDivisionError) as e:  # a partial run may lack cells
                tr.extra["table_error"] = str(e)
        m = self.manifest["tests"][tr.test]
        m["wall_s"] = round(time.perf_counter() - tr.wall0, 3)
        tr.save_result()
        m["status"] = tr.status
        m["message"] = tr.message
        self.save_manifest()
        self.events.test_done(tr.test, tr.status, tr.message)

    def plan(self, test: str) -> str:
        st = self.settings
        span = f"{st.min_rounds}-{st.max_rounds}" if st.min_rounds < st.max_rounds else f"{st.max_rounds}"
        rounds = f"{span} rounds of {st.round_s:g} s"
        return {
            "iops": f"purge, WIPC, {_count(len(st.iops_bs) * len(st.iops_mixes), 'element')} x {rounds}",
            "tp": f"per block size ({len(st.tp_bs)}): purge, WIPC, 2 elements x {rounds}",
            "lat": f"purge, WIPC, {_count(len(st.lat_bs) * len(st.lat_mixes), 'element')} x {rounds}",
            "wsat": f"purge, RND 4KiB W in {st.segment_s(self.scale):g} s segments to {st.wsat_fills:g} fills or {st.wsat_max_time_s:g} s",
            "hir": f"purge, RND 4KiB W to {st.hir_pre_fills:g} fills then {rounds}, "
            f"then {_count(len(st.hir_waits_s), 'wait state')} x {st.hir_reps} x (A+B, C)",
            "curve": f"purge, WIPC, 4KiB 70/30 {rounds}, then {_count(len(st.curve_jobs) * len(st.curve_qd), 'point')}",
            "xsr": f"purge, SEQ 1024KiB W / RND 8KiB W / SEQ 1024KiB W for {'/'.join(f'{h:g}' for h in st.xsr_hours)} h"
            + (f" / {self.scale}" if self.scale > 1 else "")
            + f" in {st.xsr_segment(self.scale):g} s segments",
            "cbw": self._di_plan("cbw"),
            "dirth": self._di_plan("dirth"),
        }[test]

    def _di_plan(self, test: str) -> str:
        st = self.settings
        wl = self.di_workload(test)
        n = len(st.di_tc) * len(st.di_qd)
        return (
            f"purge, {wl.title} 100% W to steady state ({st.di_pc_intervals} intervals a round), "
            f"then {st.min_rounds}-{st.max_rounds} rounds of pre-write + {n} TC x QD points at {T.mix_label(wl.read_pct)}, "
            "then histograms at the max, mid and min IOPS points"
        )


def _pending(test: str) -> ManifestTest:
    """A test's entry in pts.json before it starts."""
    return {"status": "pending", "dir": test, "title": T.TITLES[test], "wall_s": 0.0, "sim_s": 0.0}
