"""Everything that shapes a PTS run: the settings in pts.json and their checks (docs/pts.md)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Optional, cast

from ..fio.limits import MAX_BS
from . import steady as ss
from . import tests as T
from .records import SettingsDoc, TcQd
from .target import PtsError


@dataclass
class Settings:
    """Everything that shapes a PTS run (pts.json "settings"; CLI options in docs/pts.md)."""

    round_s: float = 60.0
    min_rounds: int = 5
    max_rounds: int = 25
    iops_bs: tuple[int, ...] = T.IOPS_BS
    iops_mixes: tuple[int, ...] = T.MIXES
    tp_bs: tuple[int, ...] = T.TP_BS
    lat_bs: tuple[int, ...] = T.LAT_BS
    lat_mixes: tuple[int, ...] = T.LAT_MIXES
    tc_qd: dict[str, tuple[int, int]] = field(default_factory=lambda: dict(T.TC_QD))
    wsat_fills: float = 4.0
    wsat_max_time_s: float = 24 * 3600.0
    wsat_segment_s: Optional[float] = None  # default: round_s, divided by N on a 1/N twin (at least 1 s)
    wsat_stop_steady: bool = False
    # --wsat-stop-steady judges a window only once this many capacities are written since the
    # purge: the 2x of the PTS's WIPC, which WSAT (starting FOB) does not run (docs/pts.md)
    wsat_min_fills: float = 2.0
    hir_reps: int = T.HIR_REPS
    hir_waits_s: tuple[float, ...] = T.HIR_WAITS_S
    hir_burst_s: float = T.HIR_BURST_S
    hir_pre_fills: float = 2.0  # HIR's steady state is judged only after this many capacities written
    curve_jobs: tuple[int, ...] = T.CURVE_JOBS
    curve_qd: tuple[int, ...] = T.CURVE_QD
    xsr_hours: tuple[float, ...] = T.XSR_HOURS  # full-drive durations of the three access groups
    xsr_segment_s: Optional[float] = None  # default: round_s, divided by N on a 1/N twin (at least 1 s)
    di_tc: tuple[int, ...] = T.DI_TC
    di_qd: tuple[int, ...] = T.DI_QD
    di_pc_intervals: int = T.DI_PC_INTERVALS
    di_prewrite_s: float = T.DI_PREWRITE_S
    di_rth_prewrite_s: float = T.DI_RTH_PREWRITE_S
    di_rth_s: float = T.DI_RTH_S
    di_art_limit_us: float = T.DI_ART_LIMIT_US
    dirth_bs: int = T.DIRTH_BS
    dirth_mix: int = T.DIRTH_READ_PCT
    purge: str = "auto"
    seed: int = 0
    converge: bool = True  # twin: time each round until its figures converge, the rest in fast-forward

    def validate(self) -> None:
        self._validate_types()
        if not (1.0 <= self.round_s <= 86400):
            raise PtsError(f"--round {self.round_s:g}s: a round from 1 s to 1 day (PTS rounds are 1 minute)")
        if not (ss.WINDOW_ROUNDS <= self.min_rounds <= self.max_rounds <= 1000):
            raise PtsError(
                f"--min-rounds {self.min_rounds} / --max-rounds {self.max_rounds}: need 5 <= min <= max <= 1000 (the window is 5 rounds)"
            )
        if not (0 < self.wsat_fills <= 1000):
            raise PtsError(f"--wsat-fills {self.wsat_fills:g}: a number of drive fills above 0, at most 1000")
        if not (1 <= self.wsat_max_time_s <= 200 * 86400):
            raise PtsError(f"--wsat-max-time {self.wsat_max_time_s:g}s: from 1 s to 200 days")
        if self.wsat_segment_s is not None and not (1.0 <= self.wsat_segment_s <= 86400):
            raise PtsError(f"--wsat-segment {self.wsat_segment_s:g}s: from 1 s to 1 day")
        if not (0 <= self.wsat_min_fills <= 100):
            raise PtsError(f"--wsat-min-fills {self.wsat_min_fills:g}: drive fills from 0 to 100")
        if not (0 <= self.hir_pre_fills <= 100):
            raise PtsError(f"--hir-pre-fills {self.hir_pre_fills:g}: drive fills from 0 to 100")
        if not (1 <= self.hir_reps <= 100000):
            raise PtsError(f"--hir-reps {self.hir_reps}: from 1 to 100000 (the spec's is 360)")
        if not self.hir_waits_s or any(not 0 < w <= 86400 for w in self.hir_waits_s):
            raise PtsError("--hir-waits: wait states above 0 s, at most 1 day (e.g. 5s,10s,15s,25s,50s)")
        if not 1.0 <= self.hir_burst_s <= 3600:
            raise PtsError(f"HIR burst {self.hir_burst_s:g} s: from 1 s to 1 hour (the spec's is 5 s)")
        if not 0 <= self.seed <= U64:
            raise PtsError(f"--seed {self.seed}: {FIELDS['seed'][2]}")
        self._validate_xsr_di()
        self._validate_duplicates()
        for label, vals in (("--curve-jobs", self.curve_jobs), ("--curve-qd", self.curve_qd)):
            if not vals or any(not 1 <= v <= 1024 for v in vals):
                raise PtsError(f"{label}: values from 1 to 1024")
        for name, (tc, qd) in self.tc_qd.items():
            if name not in T.TEST_IDS:
                raise PtsError(f"--tc-qd {name}: unknown test (choose from {', '.join(T.TEST_IDS)})")
            if not (1 <= tc <= 256 and 1 <= qd <= 65536):
                raise PtsError(f"--tc-qd {name}={tc}x{qd}: threads 1..256, queue depth 1..65536")
        for label, vals in (("--iops-bs", self.iops_bs), ("--tp-bs", self.tp_bs), ("--lat-bs", self.lat_bs)):
            if not vals or any(v < 512 or v % 512 or v > MAX_BS for v in vals):
                raise PtsError(f"{label}: block sizes are multiples of 512 bytes, at most {MAX_BS} (fio's limit; e.g. 4k,128k)")
        for label, vals in (("--iops-mixes", self.iops_mixes), ("--lat-mixes", self.lat_mixes)):
            if not vals or any(not 0 <= v <= 100 for v in vals):
                raise PtsError(f"{label}: read percentages from 0 to 100 (e.g. 100,65,0)")

    def _validate_types(self) -> None:
        """Every field of the type it must have, a number finite, before the ranges are
        checked: a string was a TypeError traceback, 1.5 repetitions or a bool thread count
        ran (range(1.5) failed later), a seed of 1e300 or nan ran."""
        for name, (label, kind, allowed) in FIELDS.items():
            value = getattr(self, name)
            if kind in ("int", "float", "bool", "str", "seconds"):
                if not _is_kind(value, kind):
                    raise PtsError(f"{label} {_shown(value)}: {allowed}")
            elif kind == "tc_qd":
                if not isinstance(value, dict) or not all(
                    isinstance(v, (tuple, list)) and len(v) == 2 and all(_is_kind(x, "int") for x in v) for v in value.values()
                ):
                    raise PtsError(f"{label} {_shown(value)}: {allowed}")
            elif not isinstance(value, (tuple, list)) or not all(_is_kind(v, kind.split()[-1]) for v in value):
                raise PtsError(f"{label} {_shown(value)}: {allowed}")

    def _validate_duplicates(self) -> None:
        """A value given twice in a list runs its element twice under one name (the second
        run's files replace the first's, the table has the row twice, the rounds double)."""
        lists: tuple[tuple[str, tuple[float, ...]], ...] = (
            ("--iops-bs", self.iops_bs),
            ("--tp-bs", self.tp_bs),
            ("--lat-bs", self.lat_bs),
            ("--iops-mixes", self.iops_mixes),
            ("--lat-mixes", self.lat_mixes),
            ("--curve-jobs", self.curve_jobs),
            ("--curve-qd", self.curve_qd),
            ("--di-tc", self.di_tc),
            ("--di-qd", self.di_qd),
            ("--hir-waits", self.hir_waits_s),
        )
        for label, vals in lists:
            twice = sorted({v for v in vals if vals.count(v) > 1})
            if twice:
                shown = ", ".join(T.bs_label(int(v)) if label.endswith("-bs") else f"{v:g}" for v in twice)
                raise PtsError(f"{label}: {shown} given more than once (each value is one element of the test)")

    def _validate_xsr_di(self) -> None:
        if len(self.xsr_hours) != 3 or any(not 0 < h <= 24 * 30 for h in self.xsr_hours):
            raise PtsError("--xsr-hours: three access-group durations in hours, above 0, at most 720 (the spec's are 8,6,8)")
        if self.xsr_segment_s is not None and not (1.0 <= self.xsr_segment_s <= 86400):
            raise PtsError(f"--xsr-segment {self.xsr_segment_s:g}s: from 1 s to 1 day")
        for label, vals in (("--di-tc", self.di_tc), ("--di-qd", self.di_qd)):
            if not vals or any(not 1 <= v <= 1024 for v in vals):
                raise PtsError(f"{label}: values from 1 to 1024 (the spec's are 32,16,8,6,4,2,1)")
        if not 1 <= self.di_pc_intervals <= 1000:
            raise PtsError(f"--di-pc-intervals {self.di_pc_intervals}: from 1 to 1000 (the spec's is 30)")
        for label, v in (
            ("--di-prewrite", self.di_prewrite_s),
            ("--di-rth-prewrite", self.di_rth_prewrite_s),
            ("--di-rth", self.di_rth_s),
        ):
            if not 1.0 <= v <= 86400:
                raise PtsError(f"{label} {v:g}s: from 1 s to 1 day")
        if not 1.0 <= self.di_art_limit_us <= 1e8:
            raise PtsError(f"--di-art-limit {self.di_art_limit_us:g}us: from 1 µs to 100 s (the spec's is 5 ms)")
        if self.dirth_bs < 512 or self.dirth_bs % 512 or self.dirth_bs > MAX_BS:
            raise PtsError(f"--dirth-bs {self.dirth_bs}: a block size, a multiple of 512 bytes, at most {MAX_BS} (fio's limit; e.g. 4k)")
        if not 0 <= self.dirth_mix <= 100:
            raise PtsError(f"--dirth-mix {self.dirth_mix}: a read percentage from 0 to 100")

    def check_block_sizes(self, tests: Sequence[str], lba_bytes: int, capacity_bytes: int, target: str) -> None:
        """The block sizes of ``tests`` are whole LBAs of the target and fit in it (checked once
        it is open, before anything is written): a 512-byte size on a 4096-byte-LBA namespace
        failed its test only after the purge and WIPC had written the drive, and a target
        smaller than a block was purged before fio refused it."""
        chosen = (
            ("iops", "--iops-bs", self.iops_bs),
            ("tp", "--tp-bs", self.tp_bs),
            ("lat", "--lat-bs", self.lat_bs),
            ("dirth", "--dirth-bs", (self.dirth_bs,)),
        )
        for test, label, vals in chosen:
            bad = [v for v in vals if v % lba_bytes] if test in tests and lba_bytes > 0 else []
            if bad:
                ok = ",".join(T.bs_label(v) for v in vals if not v % lba_bytes) or T.bs_label(lba_bytes)
                raise PtsError(
                    f"{label}: {','.join(T.bs_label(v) for v in bad)} is not a multiple of {target}'s {lba_bytes}-byte LBA "
                    f"(nothing was written); give whole LBAs, e.g. {label} {ok}"
                )
        sizes = [item.split("/")[0] for item in T.CBW_BSSPLIT.split(":")]
        cbw = [int(v[:-1]) * T.KIB if v.endswith("k") else int(v) for v in sizes]
        if "cbw" in tests and lba_bytes > 0 and any(v % lba_bytes for v in cbw):
            raise PtsError(
                f"cbw: the PTS's composite block sizes ({T.CBW_BSSPLIT.split('/')[0]} bytes and up) are not whole "
                f"{lba_bytes}-byte LBAs of {target} (nothing was written); CBW needs 512-byte LBAs"
            )
        # The largest block each test writes or reads, at least WIPC's 128 KiB (the
        # Throughput test's at its block size); XSR's sequential segments are 1 MiB.
        largest = {"iops": max(self.iops_bs), "tp": max(self.tp_bs), "lat": max(self.lat_bs), "dirth": self.dirth_bs, "xsr": 1024 * T.KIB}
        need = max((max(largest.get(t, 0), 128 * T.KIB) for t in tests), default=0)
        if capacity_bytes and need > capacity_bytes:
            raise PtsError(
                f"{target}: {capacity_bytes} bytes hold no {T.bs_label(need)} block of the tests asked for (nothing was written); "
                f"the PTS needs a target of at least {T.bs_label(need)}"
            )

    def scaled_s(self, seconds: float, scale: int = 1) -> float:
        """A capacity-relative duration on a 1/N twin: ``seconds`` / N, at least 1 s (a full
        drive and real targets: ``seconds``). Preconditioning and pre-writes bring a drive to
        a state measured in drive fills, which a scaled drive reaches N times sooner."""
        return seconds if scale <= 1 else max(1.0, round(seconds / scale, 3))

    def xsr_segment(self, scale: int = 1) -> float:
        """XSR's segment: --xsr-segment, else the round divided by N on a 1/N twin (as WSAT)."""
        if self.xsr_segment_s is not None:
            return self.xsr_segment_s
        return self.scaled_s(self.round_s, scale)

    def xsr_group_seconds(self, scale: int = 1) -> list[float]:
        """XSR's access-group durations as run: --xsr-hours, divided by N on a 1/N twin (at
        least 1 s, as every scaled duration)."""
        return [self.scaled_s(h * 3600.0, scale) for h in self.xsr_hours]

    def xsr_group_segments(self, scale: int = 1) -> list[tuple[int, float]]:
        """Each access group as (segments, segment length in s): the fewest equal segments of
        at most :meth:`xsr_segment` that make up the group's duration exactly. A segment
        longer than its group is cut to the group (it ran whole: a 60 s segment made a
        1 s group 60 s long), and a group of 2.5 segments runs 3 of 5/6 of the length
        instead of 2 (round() gave 2: 20 % of the stimulus missing)."""
        seg = self.xsr_segment(scale)
        out = []
        for group_s in self.xsr_group_seconds(scale):
            n = max(1, math.ceil(round(group_s / seg, 9)))
            out.append((n, round(group_s / n, 3)))
        return out

    def segment_s(self, scale: int = 1) -> float:
        """WSAT's segment: --wsat-segment, else the round divided by the twin's scale N (at
        least 1 s), so a scaled drive gets as many segments per drive fill as a full one; at
        most --wsat-max-time (a longer segment ran whole past the time limit: a 1-day
        segment with a 2 s limit ran a day of stimulus)."""
        seg = self.wsat_segment_s if self.wsat_segment_s is not None else max(1.0, round(self.round_s / max(1, scale), 3))
        return min(seg, self.wsat_max_time_s)

    def to_json(self) -> SettingsDoc:
        """Every setting (pts.json ``settings.all``): the fields as they are, TC/QD per test
        with its outstanding I/Os. SettingsDoc names the fields (tests/pts/test_records.py
        checks it against this dataclass's)."""
        tc_qd: dict[str, TcQd] = {k: {"tc": v[0], "qd": v[1], "oio": v[0] * v[1]} for k, v in self.tc_qd.items()}
        return cast(SettingsDoc, {**asdict(self), "tc_qd": tc_qd})


U64 = 0xFFFF_FFFF_FFFF_FFFF
# Each field: the name a user gives it (the CLI's flag; the API's keyword is the field), its
# kind ("int" a whole number, not a bool; "float"/"seconds" a finite number; "list of K"
# a tuple or list of K; "tc_qd" {test: (tc, qd)}) and what it allows, as the range checks
# of validate() say it (tests/pts/test_xsr_di.py feeds each hostile values).
FIELDS: dict[str, tuple[str, str, str]] = {
    "round_s": ("--round", "seconds", "a round from 1 s to 1 day (PTS rounds are 1 minute)"),
    "min_rounds": ("--min-rounds", "int", "a whole number from 5 to --max-rounds (the window is 5 rounds)"),
    "max_rounds": ("--max-rounds", "int", "a whole number from --min-rounds to 1000"),
    "iops_bs": ("--iops-bs", "list of int", f"block sizes in bytes, multiples of 512 up to {MAX_BS} (e.g. 4k,128k)"),
    "iops_mixes": ("--iops-mixes", "list of int", "read percentages, whole numbers from 0 to 100"),
    "tp_bs": ("--tp-bs", "list of int", f"block sizes in bytes, multiples of 512 up to {MAX_BS} (e.g. 128k,1m)"),
    "lat_bs": ("--lat-bs", "list of int", f"block sizes in bytes, multiples of 512 up to {MAX_BS} (e.g. 8k,4k,512)"),
    "lat_mixes": ("--lat-mixes", "list of int", "read percentages, whole numbers from 0 to 100"),
    "tc_qd": ("--tc-qd", "tc_qd", "{test: (threads, queue depth)}, whole numbers, threads 1..256, queue depth 1..65536"),
    "wsat_fills": ("--wsat-fills", "float", "drive fills above 0, at most 1000"),
    "wsat_max_time_s": ("--wsat-max-time", "seconds", "from 1 s to 200 days"),
    "wsat_segment_s": ("--wsat-segment", "seconds", "from 1 s to 1 day, or None (the default)"),
    "wsat_stop_steady": ("--wsat-stop-steady", "bool", "True or False"),
    "wsat_min_fills": ("--wsat-min-fills", "float", "drive fills from 0 to 100"),
    "hir_reps": ("--hir-reps", "int", "a whole number from 1 to 100000 (the spec's is 360)"),
    "hir_waits_s": ("--hir-waits", "list of seconds", "wait states above 0 s, at most 1 day (e.g. 5s,10s,15s,25s,50s)"),
    "hir_burst_s": ("HIR burst", "seconds", "from 1 s to 1 hour (the spec's is 5 s)"),
    "hir_pre_fills": ("--hir-pre-fills", "float", "drive fills from 0 to 100"),
    "curve_jobs": ("--curve-jobs", "list of int", "thread counts, whole numbers from 1 to 1024"),
    "curve_qd": ("--curve-qd", "list of int", "queue depths, whole numbers from 1 to 1024"),
    "xsr_hours": ("--xsr-hours", "list of float", "three durations in hours, above 0, at most 720 (the spec's are 8,6,8)"),
    "xsr_segment_s": ("--xsr-segment", "seconds", "from 1 s to 1 day, or None (the default)"),
    "di_tc": ("--di-tc", "list of int", "thread counts, whole numbers from 1 to 1024 (the spec's are 32,16,8,6,4,2,1)"),
    "di_qd": ("--di-qd", "list of int", "queue depths, whole numbers from 1 to 1024 (the spec's are 32,16,8,6,4,2,1)"),
    "di_pc_intervals": ("--di-pc-intervals", "int", "a whole number from 1 to 1000 (the spec's is 30)"),
    "di_prewrite_s": ("--di-prewrite", "seconds", "from 1 s to 1 day"),
    "di_rth_prewrite_s": ("--di-rth-prewrite", "seconds", "from 1 s to 1 day"),
    "di_rth_s": ("--di-rth", "seconds", "from 1 s to 1 day"),
    "di_art_limit_us": ("--di-art-limit", "float", "microseconds from 1 to 1e8 (the spec's is 5 ms)"),
    "dirth_bs": ("--dirth-bs", "int", f"a block size in bytes, a multiple of 512 up to {MAX_BS} (e.g. 4k)"),
    "dirth_mix": ("--dirth-mix", "int", "a read percentage, a whole number from 0 to 100"),
    "purge": ("--purge", "str", "one of auto, nvme-format, trim, none"),
    "seed": ("--seed", "int", f"a whole number from 0 to {U64}"),
    "converge": ("--converge", "bool", "True or False"),
}


def _is_kind(value: object, kind: str) -> bool:
    """``value`` is of ``kind`` (FIELDS): a bool is no number, a float no whole number."""
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if isinstance(value, bool):
        return False
    if kind == "int":
        return isinstance(value, int)
    if kind == "seconds" and value is None:
        return True  # the optional segments: None is the default
    return isinstance(value, (int, float)) and math.isfinite(value)


def _shown(value: object) -> str:
    """A value as a message shows it, at most 40 characters (1e300, 'abc', nan, [...])."""
    text = f"{value:g}" if isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
