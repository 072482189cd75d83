"""fio's outputs from engine results: ``--output-format=json``, ``json+`` and normal.

The text follows fio 3.33's stat.c and json.c closely enough to be compared byte for
byte with real fio output (tests/fio/test_output_real.py does that with a real fio
run). The per-thread statistics and their group aggregation live in stats.py.
"""

from __future__ import annotations

import functools
import json
import math
import struct
import time as _time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Optional, Union

from .contract import CloneOut, SsOut
from .errors import EngineResultError
from .facts import DDIR_NAMES, IODEPTH_LABELS
from .hist import LAT_LABELS, LAT_LABELS_MS, index_to_value, percentiles
from .parser import Run
from .stats import GroupStat, IoStat, ThreadStat, aggregate, from_engine, group_stats
from .units import N2S_BYTE, N2S_BYTEPERSEC, N2S_NONE, num2str

__all__ = [
    "FIO_VERSION",
    "thread_stats",
    "Report",
    "build_report",
    "json_text",
    "json_dict",
    "normal_text",
]

FIO_VERSION = "fio-3.33"


@functools.cache
def _default_version() -> str:
    # Tools key on the "fio-3.NN" prefix (fio-plot prints the whole string on graphs). Cached:
    # the package's metadata look-up scans sys.path (about 5 ms), and a PTS run renders
    # thousands of fio JSONs.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{FIO_VERSION} (ssdtwin {version('ssdtwin')})"
    except PackageNotFoundError:
        return f"{FIO_VERSION} (ssdtwin)"


# --- building the report ------------------------------------------------------------------


def thread_stats(run: Run, results: Sequence[CloneOut]) -> list[ThreadStat]:
    """Per-thread stats in thread order; ``results`` are the engine's, in any order."""
    by_thread: dict[int, CloneOut] = {}
    for r in results:
        tn = r["thread_number"]
        if tn in by_thread:
            raise EngineResultError(f"two engine results for thread {tn}")
        by_thread[tn] = r
    missing = [c.thread_number for c in run.clones if c.thread_number not in by_thread]
    if missing:
        raise EngineResultError(f"no engine result for thread(s) {missing}")
    extra = sorted(set(by_thread) - {c.thread_number for c in run.clones})
    if extra:
        raise EngineResultError(f"engine results for unknown thread(s) {extra}")
    return [from_engine(by_thread[c.thread_number], c) for c in run.clones]


@dataclass
class Report:
    """Report entries (one per thread, or per group with group_reporting) and groups."""

    entries: list[ThreadStat]
    groups: dict[int, GroupStat]
    global_options: list[tuple[str, Optional[str]]]
    elapsed_s: int
    n_groups: int
    eta_s: int = 0


def build_report(run: Run, results: Sequence[CloneOut]) -> Report:
    threads = thread_stats(run, results)
    return report_from_threads(run, threads, results)


def report_from_threads(run: Run, threads: Sequence[ThreadStat], results: Sequence[CloneOut] = ()) -> Report:
    pairs = [(ts, c.job.group_reporting) for ts, c in zip(threads, run.clones)]
    entries = aggregate(pairs)
    end_ns = 0
    for r in results:
        end_ns = max(end_ns, r["start_ns"] + r["elapsed_ns"])
    n_groups = (max(c.group_id for c in run.clones) + 1) if run.clones else 0
    return Report(
        entries=entries,
        groups=group_stats(entries),
        global_options=list(run.global_options),
        elapsed_s=-(-end_ns // 1_000_000_000),
        n_groups=n_groups,
    )


# --- fio-style JSON -----------------------------------------------------------------------


class Obj(list[tuple[str, Any]]):
    """An ordered JSON object that may repeat keys, as fio's does for repeated options."""


class Raw(str):
    """A JSON token written as it is (``null``, ``true``, a float at full precision):
    ssdtwin's own keys, which keep null and full float precision where fio's writer would
    drop the one and round the other."""


Value = Union[str, int, float, "Obj", list[Any], None, Raw]


def plain(value: Any) -> Any:
    """ssdtwin's own data (dicts, lists, numbers, None) for ``_dump``: objects keep their keys
    (a None is ``null``, not left out), booleans are ``true``/``false``, floats keep full
    precision and a non-finite float is ``null``."""
    if isinstance(value, dict):
        return Obj([(str(k), plain(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None:
        return Raw("null")
    if isinstance(value, bool):
        return Raw("true" if value else "false")
    if isinstance(value, float):
        return Raw(json.dumps(value)) if math.isfinite(value) else Raw("null")
    return value


def _escape(text: str) -> str:
    # json.c strdup_escape only escapes '\\' and '"'; we also escape control characters
    # so the result is always valid JSON.
    out = []
    for c in text:
        if c in '\\"':
            out.append("\\" + c)
        elif ord(c) < 0x20:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(c)
    return "".join(out)


def _dump(value: Value, level: int, out: list[str]) -> None:
    if isinstance(value, Obj):
        out.append("{\n")
        first = True
        for key, v in value:
            if v is None:
                continue  # fio drops string values it cannot create (flags without value)
            if not first:
                out.append(",\n")
            first = False
            out.append("  " * (level + 1) + f'"{_escape(key)}" : ')
            _dump(v, level + 1, out)
        out.append("\n" + "  " * level + "}")
    elif isinstance(value, list):
        out.append("[\n")
        for i, v in enumerate(value):
            if i:
                out.append(",\n")
            out.append("  " * (level + 1))
            _dump(v, level + 1, out)
        out.append("\n" + "  " * level + "]")
    elif isinstance(value, Raw):
        out.append(str(value))
    elif isinstance(value, bool):
        out.append("1" if value else "0")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append("%f" % value)
    elif isinstance(value, str):
        out.append(f'"{_escape(value)}"')
    else:  # pragma: no cover - programming error
        raise TypeError(type(value))


def _lat_obj(ts: ThreadStat, stat: IoStat, hist: list[int], want_percentiles: bool, plus: bool) -> Obj:
    o = Obj()
    if stat.n:
        o += [("min", stat.min), ("max", stat.max), ("mean", float(stat.mean)), ("stddev", stat.stddev), ("N", stat.n)]
    else:
        o += [("min", 0), ("max", 0), ("mean", 0.0), ("stddev", 0.0), ("N", 0)]
    if want_percentiles and stat.n:
        pct = Obj()
        for p, v in percentiles(hist, stat.n, ts.percentile_list)[:20]:
            pct.append(("%f" % p, v))
        o.append(("percentile", pct))
        if plus:
            bins = Obj()
            for i, count in enumerate(hist):
                if count:
                    bins.append((str(index_to_value(i)), count))
            o.append(("bins", bins))
    return o


def _p_of_agg(rs: Optional[GroupStat], ddir: int, mean: float) -> float:
    # stat.c convert_agg_kbytes_percent takes the mean as an int.
    p = 100.0
    if rs is not None and rs.agg[ddir] > 1024:
        p = int(mean) * 100.0 / (rs.agg[ddir] / 1024.0)
        p = min(p, 100.0)
    return p


def _ddir_obj(ts: ThreadStat, rs: Optional[GroupStat], i: int, plus: bool) -> Obj:
    d = ts.ddir[i]
    bw_bytes = bw = 0
    iops = 0.0
    if d.runtime_ms:
        bw_bytes = 1000 * d.io_bytes // d.runtime_ms
        bw = bw_bytes // 1024
        iops = 1000.0 * d.total_ios / d.runtime_ms
    o = Obj(
        [
            ("io_bytes", d.io_bytes),
            ("io_kbytes", d.io_bytes >> 10),
            ("bw_bytes", bw_bytes),
            ("bw", bw),
            ("iops", iops),
            ("runtime", d.runtime_ms),
            ("total_ios", d.total_ios),
            ("short_ios", d.short_ios),
            ("drop_ios", d.drop_ios),
            ("slat_ns", _lat_obj(ts, d.slat, d.slat_hist, ts.slat_percentiles, plus)),
            ("clat_ns", _lat_obj(ts, d.clat, d.clat_hist, ts.clat_percentiles, plus)),
            ("lat_ns", _lat_obj(ts, d.lat, d.lat_hist, ts.lat_percentiles, plus)),
        ]
    )
    if d.bw.n:
        o += [
            ("bw_min", d.bw.min),
            ("bw_max", d.bw.max),
            ("bw_agg", _p_of_agg(rs, i, d.bw.mean)),
            ("bw_mean", float(d.bw.mean)),
            ("bw_dev", d.bw.stddev),
        ]
    else:
        o += [("bw_min", 0), ("bw_max", 0), ("bw_agg", 0.0), ("bw_mean", 0.0), ("bw_dev", 0.0)]
    o.append(("bw_samples", d.bw.n))
    if d.iops.n:
        o += [("iops_min", d.iops.min), ("iops_max", d.iops.max), ("iops_mean", float(d.iops.mean)), ("iops_stddev", d.iops.stddev)]
    else:
        o += [("iops_min", 0), ("iops_max", 0), ("iops_mean", 0.0), ("iops_stddev", 0.0)]
    o.append(("iops_samples", d.iops.n))
    return o


def _dist(counts: Sequence[int], total: int) -> list[float]:
    # stat.c stat_calc_dist: nonzero shares below 0.1% show as 0.1%.
    out = []
    for c in counts:
        if total:
            v = c / total * 100.0
            if v < 0.1 and c:
                v = 0.1
        else:
            v = 0.0
        out.append(v)
    return out


def _lat_pct(counts: Sequence[int], total: int) -> list[float]:
    # stat.c stat_calc_lat: the floor there is 0.01%.
    out = []
    for c in counts:
        if total:
            v = c / total * 100.0
            if v < 0.01 and c:
                v = 0.01
        else:
            v = 0.0
        out.append(v)
    return out


def _thread_obj(ts: ThreadStat, rs: Optional[GroupStat], report: Report, plus: bool) -> Obj:
    o = Obj([("jobname", ts.name), ("groupid", ts.groupid), ("error", ts.error), ("eta", report.eta_s), ("elapsed", report.elapsed_s)])
    if ts.options:
        o.append(("job options", Obj(ts.options)))
    for i, name in enumerate(DDIR_NAMES):
        o.append((name, _ddir_obj(ts, rs, i, plus)))
    sync_lat = Obj([("min", 0), ("max", 0), ("mean", 0.0), ("stddev", 0.0), ("N", 0)])
    o.append(("sync", Obj([("total_ios", 0), ("lat_ns", sync_lat)])))
    runt = ts.total_run_time_ms
    usr = ts.usr_time * 100 / runt if runt else 0.0
    sys_ = ts.sys_time * 100 / runt if runt else 0.0
    o += [("job_runtime", runt), ("usr_cpu", float(usr)), ("sys_cpu", float(sys_)), ("ctx", ts.ctx), ("majf", ts.majf), ("minf", ts.minf)]
    total = ts.total_ios()
    depth = _dist(ts.io_u_map, total)
    o.append(("iodepth_level", Obj(list(zip(IODEPTH_LABELS, depth)))))
    names = ("0", "4", "8", "16", "32", "64", ">=64")
    submit = _dist(ts.io_u_submit, ts.total_submit)
    o.append(("iodepth_submit", Obj(list(zip(names, submit)))))
    complete = _dist(ts.io_u_complete, ts.total_complete)
    o.append(("iodepth_complete", Obj(list(zip(names, complete)))))
    o.append(("latency_ns", Obj(list(zip(LAT_LABELS, _lat_pct(ts.lat_n, total))))))
    o.append(("latency_us", Obj(list(zip(LAT_LABELS, _lat_pct(ts.lat_u, total))))))
    o.append(("latency_ms", Obj(list(zip(LAT_LABELS_MS, _lat_pct(ts.lat_m, total))))))
    if ts.latency_depth:
        o += [
            ("latency_depth", ts.latency_depth),
            ("latency_target", ts.latency_target),
            ("latency_percentile", float(ts.latency_percentile)),
            ("latency_window", ts.latency_window),
        ]
    if ts.description:
        o.append(("desc", ts.description))
    if ts.steadystate is not None:
        o.append(("steadystate", _ss_obj(ts.steadystate)))  # steady-state detection (ss_dur)
    return o


# --- steady-state detection (steadystate, ss_dur, ss_ramp) ---
def _ss_float(value: Optional[float]) -> float:
    # The engine hands NaN (fio's 0/0, e.g. a slope over a 1-second window) back as null.
    return math.nan if value is None else float(value)


def _ss_name(ss: SsOut) -> str:
    return str(ss["metric"]) + ("_slope" if ss["is_slope"] else "")


def _ss_window(ss: SsOut, key: Literal["iops", "bw"]) -> list[int]:
    # A clone that does not keep its group's window has none: fio's would be unset.
    return list(ss[key]) or [0] * int(ss["duration_s"])


def _ss_means(ss: SsOut) -> tuple[int, int]:
    # steadystate.c steadystate_bw_mean/iops_mean: integer means over the whole window.
    n = int(ss["duration_s"])
    return sum(ss["bw"]) // n, sum(ss["iops"]) // n


def _ss_obj(ss: SsOut) -> Obj:
    """fio's JSON "steadystate" object (stat.c show_thread_status_json): limit and
    criterion are printed from C floats (single precision) with %f."""
    pct = "%" if ss["percent"] else ""
    bw_mean, iops_mean = _ss_means(ss)
    data = Obj([("bw_mean", bw_mean), ("iops_mean", iops_mean), ("iops", _ss_window(ss, "iops")), ("bw", _ss_window(ss, "bw"))])
    return Obj(
        [
            ("ss", "%s:%f%s" % (_ss_name(ss), _c_float(_ss_float(ss["limit"])), pct)),
            ("duration", int(ss["duration_s"])),
            ("attained", int(bool(ss["attained"]))),
            ("criterion", "%f%s" % (_c_float(_ss_float(ss["criterion"])), pct)),
            ("max_deviation", _ss_float(ss["max_deviation"])),
            ("slope", _ss_float(ss["slope"])),
            ("data", data),
        ]
    )


def _c_float(value: float) -> float:
    """The value rounded to a C float, as fio casts it before printing."""
    if math.isnan(value) or math.isinf(value):
        return value
    try:
        return float(struct.unpack("f", struct.pack("f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def _ss_normal(ts: ThreadStat, out: list[str]) -> None:
    """fio's normal-output steady-state line (stat.c show_ss_normal). fio formats the
    mean bandwidth in units of kb_base twice, once with the other unit prefix but the same
    number, so the second figure is not a conversion; reproduced as printed."""
    ss = ts.steadystate
    if ss is None:
        return
    bw_mean, iops_mean = _ss_means(ss)
    i2p = _pow2(ts.kb_base)
    p1 = num2str(bw_mean // ts.kb_base, ts.sig_figs, ts.kb_base, i2p, N2S_BYTEPERSEC)
    p1alt = num2str(bw_mean // ts.kb_base, ts.sig_figs, ts.kb_base, not i2p, N2S_BYTEPERSEC)
    p2 = num2str(iops_mean, ts.sig_figs, 1, False, N2S_NONE)
    out.append(
        "  steadystate  : attained=%s, bw=%s (%s), iops=%s, %s%s=%.3f%s\n"
        % (
            "yes" if ss["attained"] else "no",
            p1,
            p1alt,
            p2,
            ss["metric"],
            " slope" if ss["is_slope"] else " mean dev",
            _ss_float(ss["criterion"]),
            "%" if ss["percent"] else "",
        )
    )


def _ctime(seconds: float) -> str:
    return _time.ctime(seconds)


def json_text(
    run: Run,
    results: Optional[Sequence[CloneOut]] = None,
    *,
    report: Optional[Report] = None,
    plus: bool = False,
    timestamp_ms: Optional[int] = None,
    fio_version: Optional[str] = None,
    ssdtwin_extra: Optional[dict[str, Any]] = None,
) -> str:
    """fio's ``--output-format=json`` (``json+`` with ``plus=True``) as text.

    Give either the engine ``results`` or a prepared ``report``. ``timestamp_ms`` is the
    run's end time (default: now). The text keeps fio's layout, including repeated keys
    when an option was written twice. ``ssdtwin_extra``: more keys of the ``ssdtwin``
    object (docs/fio.md §6.1: ``timing``, ``waf``).
    """
    if report is None:
        if results is None:
            raise TypeError("json_text needs results or report")
        report = build_report(run, results)
    if timestamp_ms is None:
        timestamp_ms = int(_time.time() * 1000)
    root = Obj(
        [
            ("fio version", fio_version or _default_version()),
            ("timestamp", timestamp_ms // 1000),
            ("timestamp_ms", timestamp_ms),
            ("time", _ctime(timestamp_ms // 1000)),
        ]
    )
    if report.global_options:
        root.append(("global options", Obj(report.global_options)))
    root.append(("jobs", [_thread_obj(ts, report.groups.get(ts.groupid), report, plus) for ts in report.entries]))
    root.append(("ssdtwin", _ssdtwin_obj(run, ssdtwin_extra)))  # after fio's keys, which stay as fio writes them
    out: list[str] = []
    _dump(root, 0, out)
    return "".join(out) + "\n"


def _ssdtwin_obj(run: Run, extra: Optional[dict[str, Any]] = None) -> Obj:
    """ssdtwin's own top-level object, after fio's keys (docs/fio.md §6.1): the options
    accepted with no effect on a simulated drive, per job (an option of a [global] section
    is listed for every job under it). A flag written alone has no "value"; where each
    option was written (file:line) is in the CLI's notes on stderr. Then the drive's WAF
    over the run when it ran on a drive (docs/models.md, "Measuring WAF"): "waf" is null
    unless the run spans a GC cycle or a namespace pass ("verdict" "steady"); the ratio
    whatever the run spans is "waf_window_raw"."""
    ignored = [Obj([("job", e["job"]), ("option", e["option"]), ("value", e["value"]), ("reason", e["reason"])]) for e in run.ignored]
    obj = Obj([("ignored_options", ignored)])
    if run.waf is not None:
        obj.append(("waf", plain(run.waf)))
    obj += [(k, plain(v)) for k, v in (extra or {}).items()]
    return obj


def json_dict(run: Run, results: Optional[Sequence[CloneOut]] = None, **kw: Any) -> dict[str, Any]:
    """The JSON report as Python objects (a repeated key keeps its last value)."""
    out: dict[str, Any] = json.loads(json_text(run, results, **kw))
    return out


# --- normal output ------------------------------------------------------------------------


def _scale_lat(lo: int, hi: int, mean: float, dev: float) -> tuple[str, int, int, float, float]:
    # stat.h nsec_to_msec / nsec_to_usec
    if lo > 2_000_000 and hi > 99_999_999 and dev > 1_000_000.0:
        return "(msec)", lo // 1_000_000, hi // 1_000_000, mean / 1_000_000.0, dev / 1_000_000.0
    if lo > 2000 and hi > 99_999 and dev > 1000.0:
        return "(usec)", lo // 1000, hi // 1000, mean / 1000.0, dev / 1000.0
    return "(nsec)", lo, hi, mean, dev


def _display_lat(name: str, st: IoStat, out: list[str]) -> None:
    base, lo, hi, mean, dev = _scale_lat(st.min, st.max, st.mean, st.stddev)
    out.append(
        "    %s %s: min=%s, max=%s, avg=%5.02f, stdev=%5.02f\n"
        % (name, base, num2str(lo, 6, 1, False, N2S_NONE), num2str(hi, 6, 1, False, N2S_NONE), mean, dev)
    )


def _percentile_block(ts: ThreadStat, hist: list[int], n: int, pre: str, out: list[str]) -> None:
    values = percentiles(hist, n, ts.percentile_list)
    if not values:
        return
    vals = [v for _, v in values]
    minv, maxv = min(vals), max(vals)
    if minv > 2_000_000 and maxv > 99_999_999:
        scale, divisor, unit = 2, 1_000_000, "msec"
    elif minv > 2000 and maxv > 99_999:
        scale, divisor, unit = 1, 1000, "usec"
    else:
        scale, divisor, unit = 0, 1, "nsec"
    out.append(f"    {pre} percentiles ({unit}):\n     |")
    q = maxv // divisor
    width = max(5, int(math.log10(q) + 1)) if q > 0 else 5
    prec = ts.percentile_precision
    per_line = (80 - 7) // (prec + 10 + width)
    for j, (p, v) in enumerate(values):
        if j != 0 and j % per_line == 0:
            out.append("     |")
        last = j == len(values) - 1
        for _ in range(scale):
            v = (v + 999) // 1000
        out.append(" %*.*fth=[%*d]%s" % (prec + 3, prec, p, width, v, "\n" if last else ","))
        if last:
            break
        if j % per_line == per_line - 1:
            out.append("\n")


def _ddir_normal(ts: ThreadStat, rs: Optional[GroupStat], i: int, out: list[str]) -> None:
    d = ts.ddir[i]
    if not d.runtime_ms:
        return
    i2p = _pow2(ts.kb_base)
    sig = ts.sig_figs
    runt = d.runtime_ms
    bw = 1000 * d.io_bytes // runt
    iops = 1000 * d.total_ios // runt
    post = "; 0 zone resets" if i == 1 else ""
    out.append(
        "  %s: IOPS=%s, BW=%s (%s)(%s/%dmsec)%s\n"
        % (
            DDIR_NAMES[i],
            num2str(iops, sig, 1, False, N2S_NONE),
            num2str(bw, sig, 1, i2p, N2S_BYTEPERSEC),
            num2str(bw, sig, 1, not i2p, N2S_BYTEPERSEC),
            num2str(d.io_bytes, sig, 1, i2p, N2S_BYTE),
            runt,
            post,
        )
    )
    if d.slat.n:
        _display_lat("slat", d.slat, out)
    if d.clat.n:
        _display_lat("clat", d.clat, out)
    if d.lat.n:
        _display_lat(" lat", d.lat, out)
    if ts.slat_percentiles and d.slat.n:
        _percentile_block(ts, d.slat_hist, d.slat.n, "slat", out)
    if ts.clat_percentiles and d.clat.n:
        _percentile_block(ts, d.clat_hist, d.clat.n, "clat", out)
    if ts.lat_percentiles and d.lat.n:
        _percentile_block(ts, d.lat_hist, d.lat.n, "lat", out)
    if d.bw.n:
        kb = float(ts.kb_base if rs is None else rs.kb_base)
        unit = "KiB" if i2p else "kB"
        p_of_agg = _p_of_agg(rs, i, d.bw.mean)
        lo, hi, mean, dev = d.bw.min, d.bw.max, d.bw.mean, d.bw.stddev
        if mean > kb * kb:
            lo, hi, mean, dev = int(lo / kb), int(hi / kb), mean / kb, dev / kb
            unit = "MiB"
        out.append(
            "   bw (%5s/s): min=%5d, max=%5d, per=%3.2f%%, avg=%5.02f, stdev=%5.02f, samples=%d\n"
            % (unit, lo, hi, p_of_agg, mean, dev, d.bw.n)
        )
    if d.iops.n:
        out.append(
            "   iops        : min=%5d, max=%5d, avg=%5.02f, stdev=%5.02f, samples=%d\n"
            % (d.iops.min, d.iops.max, d.iops.mean, d.iops.stddev, d.iops.n)
        )


def _show_lat(values: Sequence[float], labels: Sequence[str], unit: str, out: list[str]) -> None:
    line = 0
    new_line = True
    shown = False
    for label, v in zip(labels, values):
        if v <= 0.0:
            continue
        shown = True
        if new_line:
            if line:
                out.append("\n")
            out.append(f"  lat ({unit})   : ")
            new_line = False
            line = 0
        if line:
            out.append(", ")
        out.append("%s=%3.2f%%" % (label, v))
        line += 1
        if line == 5:
            new_line = True
    if shown:
        out.append("\n")


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _thread_normal(ts: ThreadStat, rs: Optional[GroupStat], when: str, out: list[str]) -> None:
    if not ts.io_bytes() and not ts.total_ios():
        return
    # latency_target: stat.c prints td->verror in parentheses after a job error.
    err = "%2d (%s)" % (ts.error, ts.verror) if ts.error and ts.verror else "%2d" % ts.error
    out.append("%s: (groupid=%d, jobs=%d): err=%s: pid=%d: %s\n" % (ts.name, ts.groupid, ts.members, err, ts.pid, when))
    if ts.description:
        out.append(f"  Description  : [{ts.description}]\n")
    for i in range(3):
        if ts.ddir[i].io_bytes:
            _ddir_normal(ts, rs, i, out)
    total = ts.total_ios()
    labels_m = ("2", "4", "10", "20", "50", "100", "250", "500", "750", "1000", "2000", ">=2000")
    _show_lat(_lat_pct(ts.lat_n, total), labels_m[:10], "nsec", out)
    _show_lat(_lat_pct(ts.lat_u, total), labels_m[:10], "usec", out)
    _show_lat(_lat_pct(ts.lat_m, total), labels_m, "msec", out)
    runt = ts.total_run_time_ms
    usr = ts.usr_time * 100 / runt if runt else 0.0
    sys_ = ts.sys_time * 100 / runt if runt else 0.0
    out.append("  cpu          : usr=%3.2f%%, sys=%3.2f%%, ctx=%d, majf=%d, minf=%d\n" % (usr, sys_, ts.ctx, ts.majf, ts.minf))
    dist = _dist(ts.io_u_map, total)
    out.append("  IO depths    : 1=%3.1f%%, 2=%3.1f%%, 4=%3.1f%%, 8=%3.1f%%, 16=%3.1f%%, 32=%3.1f%%, >=64=%3.1f%%\n" % tuple(dist))
    dist = _dist(ts.io_u_submit, ts.total_submit)
    out.append("     submit    : 0=%3.1f%%, 4=%3.1f%%, 8=%3.1f%%, 16=%3.1f%%, 32=%3.1f%%, 64=%3.1f%%, >=64=%3.1f%%\n" % tuple(dist))
    dist = _dist(ts.io_u_complete, ts.total_complete)
    out.append("     complete  : 0=%3.1f%%, 4=%3.1f%%, 8=%3.1f%%, 16=%3.1f%%, 32=%3.1f%%, 64=%3.1f%%, >=64=%3.1f%%\n" % tuple(dist))
    r, w, t = (d.total_ios for d in ts.ddir)
    sr, sw, st = (d.short_ios for d in ts.ddir)
    dr, dw, dt = (d.drop_ios for d in ts.ddir)
    out.append(f"     issued rwts: total={r},{w},{t},0 short={sr},{sw},{st},0 dropped={dr},{dw},{dt},0\n")
    if ts.latency_depth:
        out.append(
            "     latency   : target=%d, window=%d, percentile=%.2f%%, depth=%d\n"
            % (ts.latency_target, ts.latency_window, ts.latency_percentile, ts.latency_depth)
        )
    _ss_normal(ts, out)  # steady-state detection


def _group_normal(rs: GroupStat, out: list[str]) -> None:
    out.append(f"\nRun status group {rs.groupid} (all jobs):\n")
    labels = ("   READ", "  WRITE", "   TRIM")
    i2p = _pow2(rs.kb_base)
    sig = rs.sig_figs
    for i in range(3):
        if not rs.max_run[i]:
            continue
        out.append(
            "%s: bw=%s (%s), %s-%s (%s-%s), io=%s (%s), run=%d-%dmsec\n"
            % (
                labels[i],
                num2str(rs.agg[i], sig, 1, i2p, N2S_BYTEPERSEC),
                num2str(rs.agg[i], sig, 1, not i2p, N2S_BYTEPERSEC),
                num2str(rs.min_bw[i], sig, 1, i2p, N2S_BYTEPERSEC),
                num2str(rs.max_bw[i], sig, 1, i2p, N2S_BYTEPERSEC),
                num2str(rs.min_bw[i], sig, 1, not i2p, N2S_BYTEPERSEC),
                num2str(rs.max_bw[i], sig, 1, not i2p, N2S_BYTEPERSEC),
                num2str(rs.io_bytes[i], sig, 1, i2p, N2S_BYTE),
                num2str(rs.io_bytes[i], sig, 1, not i2p, N2S_BYTE),
                rs.min_run[i],
                rs.max_run[i],
            )
        )


def normal_text(
    run: Run,
    results: Optional[Sequence[CloneOut]] = None,
    *,
    report: Optional[Report] = None,
    timestamp_ms: Optional[int] = None,
    header: bool = True,
    fio_version: Optional[str] = None,
) -> str:
    """fio's normal (human) output. ``header`` adds the lines fio prints before running."""
    if report is None:
        if results is None:
            raise TypeError("normal_text needs results or report")
        report = build_report(run, results)
    if timestamp_ms is None:
        timestamp_ms = int(_time.time() * 1000)
    when = _ctime(timestamp_ms // 1000)
    out: list[str] = []
    if header:
        out.append(run.header_text(fio_version or _default_version()))
    out.append("\n")
    for ts in report.entries:
        _thread_normal(ts, report.groups.get(ts.groupid), when, out)
    for gid in range(report.n_groups):
        _group_normal(report.groups.get(gid, GroupStat(gid)), out)
    return "".join(out)
