"""The engine's input (docs/fio.md §3): ``engine_input`` resolves one clone of a parsed job
against a concrete drive into a ``JobSpec`` (fio/contract.py, the core's
workload/mod.rs ``JobSpec``) with every value in explicit integer units.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional, TypedDict

from . import blktrace as fio_blktrace
from . import iolog as fio_iolog
from . import limits as L
from . import options as O
from .contract import BsPerDir, BsSpec, Ddir, IntPerDir, JobSpec, SplitPerDir, Zone
from .errors import FioJobError
from .errors import where as _where
from .facts import DDIR_NAMES, first_draw
from .units import Percent

__all__ = ["engine_input", "contract_range_error", "effective_bssplit", "DDIR_NAMES"]

ENGINE_INPUT_VERSION = 1

_DIRECTIONS: dict[str, tuple[Ddir, ...]] = {
    "read": ("read",),
    "randread": ("read",),
    "write": ("write",),
    "randwrite": ("write",),
    "trim": ("trim",),
    "randtrim": ("trim",),
    "rw": ("read", "write"),
    "randrw": ("read", "write"),
    "trimwrite": ("trim", "write"),
    "randtrimwrite": ("trim", "write"),
}


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _align_bs(bs: int, min_bs: int, max_bs: int, unaligned: bool) -> int:
    # io_u.c get_next_buflen: sizes are rounded down to a multiple of the smallest block
    # size unless bs_unaligned, then capped at the largest. So bssplit=4k/50:6k/50
    # issues only 4 KiB I/O (measured on fio 3.33).
    if not unaligned:
        if _is_pow2(min_bs):
            bs &= ~(min_bs - 1)
        else:
            bs -= bs % min_bs
    return min(bs, max_bs)


def effective_bssplit(entries: Sequence[Sequence[int]], min_bs: int, max_bs: int, unaligned: bool) -> list[list[int]]:
    """The sizes fio really issues for a bssplit and their percentages (summing to 100).

    fio sorts the entries by percentage (stable), walks them with a running total and
    picks the first whose total reaches a uniform draw in [0, 100); entries with 0% are
    skipped, a total above 100 cuts the later entries, and a total below 100 gives the
    rest to the last entry (measured: 4k/30:8k/30 issues 30% 4k and 70% 8k).
    """
    ordered = sorted((list(e) for e in entries), key=lambda e: e[1])
    live = [e for e in ordered if e[1] > 0]
    out: list[list[int]] = []
    running = 0
    for i, (bs, pct) in enumerate(live):
        lo = min(running, 100)
        running += pct
        hi = min(running, 100)
        share = hi - lo
        if i == len(live) - 1:
            share += 100 - hi
        if share <= 0:
            continue
        size = _align_bs(bs, min_bs, max_bs, unaligned)
        for existing in out:
            if existing[0] == size:
                existing[1] += share
                break
        else:
            out.append([size, share])
    return out


def _bs_range(st: dict[str, Any], d: int) -> tuple[int, int]:
    split = st["bssplit"][d]
    if split:
        sizes = [bs for bs, _ in split]
        return min(sizes), max(sizes)
    if st["bsrange"][d]:
        lo, hi = st["bsrange"][d]
        return lo, hi
    return st["bs"][d], st["bs"][d]


#: fio's helper thread wakes at least this often (helper_thread.c, DISK_UTIL_MSEC).
HELPER_TICK_MS = 250


def averaging_windows(st: Mapping[str, Any]) -> tuple[int, int]:
    """Window lengths (ms) of the bw and iops samples behind the JSON bw_*/iops_* stats.

    init.c: a bw (iops) log with log_avg_msec sets the window to log_avg_msec unless
    bwavgtime (iopsavgtime) was given, which then stays (fio 3.33, log_avg_msec=100
    bwavgtime=500: 3 samples in 2 s; only the log's averaging takes the smaller of the
    two, and with samples every bwavgtime each sample is a log row). With log_avg_msec=0 fio
    switches those statistics to one sample per I/O; we keep windows of bwavgtime there
    (docs/fio.md lists this difference).

    bwavgtime=0 (iopsavgtime=0) is accepted, as fio does: its helper thread then takes a
    sample at each wake-up, every 250 ms (DISK_UTIL_MSEC) when nothing else wakes it
    (fio-3.33, both 0, runtime=3: 12 samples each). We keep 250 ms windows; fio also
    samples at the other statistic's window ends (docs/fio.md lists this difference).
    """
    out = []
    for kind, key in (("bw", "bwavgtime"), ("iops", "iopsavgtime")):
        window = st[key]
        if st["logs"][kind] is not None and st["log_avg_msec"]:
            window = window if key in st["set"] else st["log_avg_msec"]
        out.append(window or HELPER_TICK_MS)
    return out[0], out[1]


# --- opts (filesize) ---
def _file_size(st: Mapping[str, Any], clone: Any, real_size: int, td_min_bs: int) -> Optional[int]:
    """The target size filesize= sets, or None (filesetup.c setup_files).

    fio uses filesize only when the real size is outside [low, high]: then the file is
    ``low`` bytes, or for a range a size drawn from the thread's file_size stream
    (get_rand_file_size: ``low + (high-low) * r/(max+1)`` in doubles, rounded down to the
    smallest block size); a real size inside the range is kept."""
    if "filesize" not in st:
        return None
    low, high = st["filesize"]
    if low <= real_size <= high:
        return int(real_size)
    if low == high:
        return int(low)
    use64 = st["random_generator"] == "tausworthe64"
    r, rand_max = first_draw(clone.seeds["file_size"], use64)
    size = int(float(high - low) * (float(r) / (float(rand_max) + 1.0))) + low
    return int(size - size % td_min_bs)


def engine_input(
    clone: Any,
    device_size_bytes: int,
    lba_bytes: int,
    namespace_sizes: Optional[Mapping[int, int]] = None,
    namespace_lba_bytes: Optional[Mapping[int, int]] = None,
    link_bytes_per_s: Optional[int] = None,
    io_unit: Optional[tuple[int, str]] = None,
) -> JobSpec:
    """Resolve one clone into the engine's input (docs/fio.md §3). ``link_bytes_per_s``
    (the drive's host link) bounds how many bytes a job can move in a run (§2.9);
    ``io_unit`` (bytes, what it is) is a unit larger than the LBA that every block size,
    alignment and start offset must be a multiple of (a host stack's 4 KiB block)."""
    job = clone.job
    st = job.state
    errors: list[FioJobError] = []

    def fail(reason: str, option: str) -> None:
        errors.append(FioJobError(reason, **_where(st, option, job)))

    if device_size_bytes <= 0 or lba_bytes <= 0:
        raise ValueError("device_size_bytes and lba_bytes must be positive")

    namespace = st["namespace"]
    # --- iolog --- read_iolog: the trace's file (or replay_redirect) is the target.
    trace = None
    if st.get("read_iolog"):
        where = _where(st, "read_iolog", job)
        trace, replay_file = fio_iolog.replay_target(st, clone.subjob, st.get("iolog_cwd"), where, O.namespace_of)
        try:
            namespace = O.namespace_of(replay_file) if replay_file else None
        except ValueError as e:
            raise FioJobError(f"target {replay_file}: {e}", **where) from None
    real_size = device_size_bytes
    if namespace is not None and namespace_sizes is not None:
        if namespace not in namespace_sizes:
            known = ", ".join(str(n) for n in sorted(namespace_sizes)) or "none"
            raise FioJobError(f"namespace {namespace} does not exist (namespaces: {known})", **_where(st, "filename", job))
        real_size = namespace_sizes[namespace]
    if namespace is not None and namespace_lba_bytes is not None and namespace in namespace_lba_bytes:
        lba_bytes = namespace_lba_bytes[namespace]

    is_random = st["rw"] in O.RANDOM_MODES
    ranges = [_bs_range(st, d) for d in range(3)]
    min_bs = [r[0] for r in ranges]
    max_bs = [r[1] for r in ranges]
    td_min_bs = min(min_bs)
    unaligned = bool(st["bs_unaligned"])

    # Block sizes per direction.
    bs_out: list[BsSpec] = []
    for d in range(3):
        split = st["bssplit"][d]
        if split and min_bs[d] == max_bs[d]:
            # io_u.c get_next_buflen returns the only size without looking at the split.
            bs_out.append({"min": min_bs[d], "max": max_bs[d], "split": [[min_bs[d], 100]]})
        elif split:
            pairs = effective_bssplit(split, min_bs[d], max_bs[d], unaligned)
            bs_out.append({"min": min_bs[d], "max": max_bs[d], "split": pairs})
        elif st["bsrange"][d]:
            bs_out.append({"min": min_bs[d], "max": max_bs[d], "split": None})
        else:
            bs_out.append({"min": min_bs[d], "max": max_bs[d], "split": [[min_bs[d], 100]]})

    # Block alignment: set only matters for random I/O (init.c fixup_options).
    ba = [st["ba"][d] if (st["ba"][d] and is_random) else min_bs[d] for d in range(3)]
    norandommap = bool(st["norandommap"]) or any(ba[d] != min_bs[d] for d in range(3))
    if st["random_distribution"]["kind"] != "random":
        norandommap = True

    # Offset (filesetup.c get_start_offset).
    align = False
    inc = st["offset_increment"]
    if isinstance(inc, Percent):
        increment = inc.value * real_size // 100
        align = True
    else:
        increment = inc
    off = st["offset"]
    if isinstance(off, Percent) and off.value > 0:
        offset = real_size * off.value // 100 + clone.subjob * increment
        align = True
    else:
        offset = (0 if isinstance(off, Percent) else off) + clone.subjob * increment
    if align:
        align_bs = st["offset_align"] if st["offset_align"] else td_min_bs
        offset = -(-offset // align_bs) * align_bs

    # Region and amount (filesetup.c setup_files, one file).
    size = st["size"]
    region = size if isinstance(size, int) and size else 0
    filesize = _file_size(st, clone, real_size, td_min_bs)
    if filesize is not None:
        # filesize= gives the target's size and size= becomes the default amount.
        if offset > filesize:
            fail(f"offset {offset} is beyond filesize {filesize}", "offset")
            raise FioJobError.collect(errors)
        region = filesize - offset
    if not region:  # also fill_device without size: up to the end of the target
        if offset > real_size:
            fail(f"offset {offset} is beyond the end of the target ({real_size} bytes)", "offset")
            raise FioJobError.collect(errors)
        region = real_size - offset
    if isinstance(size, Percent) and size.value != 100:
        file_size = region + offset
        region = file_size * size.value // 100
        region = min(region, file_size - offset)
        region -= region % td_min_bs
    per_loop = region
    io_size = st["io_size"]
    if isinstance(io_size, Percent) and io_size.value != 100:
        per_loop = region * io_size.value // 100
    elif isinstance(io_size, int) and io_size:
        per_loop = io_size
    elif filesize is not None and isinstance(size, int) and 0 < size < region:
        per_loop = size
    if region < td_min_bs:
        fail(f"blocksize is larger than data set range ({region} < {td_min_bs})", "size")
    _check_job_bytes(st, per_loop, max(max_bs), link_bytes_per_s, fail)
    if offset + region > real_size:
        fail(
            f"the I/O region [{offset}, {offset + region}) of clone {clone.subjob} runs past the end of the target ({real_size} bytes)",
            # filesize= sets the region when given (size= is then only the amount).
            "filesize" if filesize is not None else "size" if "size" in st["set"] else "offset",
        )

    # A real block device with direct I/O rejects I/O that is not sector aligned.
    unit, unit_name = (lba_bytes, f"{lba_bytes}-byte LBA")
    if io_unit is not None and io_unit[0] > lba_bytes:
        unit, unit_name = io_unit
    for d, name in enumerate(DDIR_NAMES):
        if name not in _DIRECTIONS[st["rw"]]:
            continue
        sizes = [min_bs[d], max_bs[d]]
        split_sizes = bs_out[d]["split"]
        if split_sizes:
            sizes += [s for s, _ in split_sizes]
        if not unaligned and any(s % unit for s in sizes):
            fail(f"{name} block sizes {sorted(set(sizes))} are not multiples of the {unit_name}", "bs")
        if unaligned and min_bs[d] % unit:
            fail(f"bs_unaligned with a minimum block size that is not a multiple of the {unit_name}", "bs_unaligned")
        if ba[d] != min_bs[d] and ba[d] % unit:
            fail(f"{name} blockalign {ba[d]} is not a multiple of the {unit_name}", "ba")
    if offset % unit:
        fail(f"offset {offset} is not a multiple of the {unit_name}", "offset")
    gen = _fio_generator_fields(st, fail)
    prinfo = _prinfo_fields(st)
    if errors:
        raise FioJobError.collect(errors)

    dist = st["random_distribution"]
    zones: Optional[dict[str, Optional[list[Zone]]]] = None
    if dist["kind"] in ("zoned", "zoned_abs"):
        zones = {name: dist["zones"][d] for d, name in enumerate(DDIR_NAMES)}

    logs = st["logs"]
    bw_avg, iops_avg = averaging_windows(st)

    runtime_ns = st["runtime_us"] * 1000
    spec: JobSpec = {
        "version": ENGINE_INPUT_VERSION,
        "name": job.name,
        "job_index": job.index,
        "thread_number": clone.thread_number,
        "subjob": clone.subjob,
        "group_id": clone.group_id,
        "batch": clone.batch,
        "stonewall": clone.subjob == 0 and job.stonewall,
        "filename": st["filename"],
        "namespace": namespace,
        "target_size_bytes": real_size,
        "lba_bytes": lba_bytes,
        "rw": st["rw"],
        "directions": list(_DIRECTIONS[st["rw"]]),
        "random": is_random,
        "rw_nr": st["rw_nr"],
        "rw_seq_add_bytes": max(st["rw_seq_add"], 0),
        "rwmixread": st["rwmix"][0],
        "rwmixwrite": st["rwmix"][1],
        "bs": _per_dir_bs(bs_out),
        "bs_unaligned": unaligned,
        "blockalign": _per_dir(ba),
        "offset_bytes": offset,
        "size_bytes": region,
        "io_size_bytes": per_loop,
        "loops": st["loops"],
        "fill_device": bool(st["fill_device"]),
        "number_ios": st["number_ios"],
        "ioengine": st["ioengine"],
        "pi_act": prinfo["pi_act"],
        "pi_chk": prinfo["pi_chk"],
        "engine_async": job.engine_async,
        "iodepth": job.effective_iodepth,
        "iodepth_configured": st["iodepth"],
        "time_based": bool(st["time_based"]),
        "runtime_ns": runtime_ns,
        "ramp_time_ns": st["ramp_time_us"] * 1000,
        "startdelay_ns": clone.startdelay_us * 1000,
        "norandommap": norandommap,
        "random_generator": st["random_generator"],
        "seed": clone.seed,
        "seeds": dict(clone.seeds),
        "seed_source": clone.seed_source,
        "random_distribution": {
            "kind": dist["kind"],
            "param": dist["param"],
            "center": dist["center"],
            "zones": zones,
        },
        "percentage_random": _per_dir(st["percentage_random"]),
        "rate_bytes_per_s": _per_dir(st["rate"]),
        "rate_iops": _per_dir(st["rate_iops"]),
        "rate_process": st["rate_process"],
        "rate_min_bytes_per_s": _per_dir(st["rate_min"]),
        "rate_iops_min": _per_dir(st["rate_iops_min"]),
        "rate_cycle_ms": st["rate_cycle"],
        "serialize_overlap": _serializes_overlap(st, trace is not None),
        "thinktime_ns": st["thinktime_us"] * 1000,
        "thinktime_spin_ns": st["thinktime_spin_us"] * 1000,
        "thinktime_blocks": st["thinktime_blocks"],
        "thinktime_blocks_type": st["thinktime_blocks_type"],
        "bw_avg_ms": bw_avg,
        "iops_avg_ms": iops_avg,
        "logs": {
            "bw": logs["bw"] is not None,
            "iops": logs["iops"] is not None,
            "lat": logs["lat"] is not None,
            "hist": logs["hist"] is not None,
            "avg_ms": st["log_avg_msec"],
            "hist_ms": st["log_hist_msec"],
            "max_value": bool(st["log_max_value"]),
            "offset": bool(st["log_offset"]),
        },
        # fio's generators bit for bit (docs/fio.md §3)
        "bssplit_fio": gen["bssplit_fio"],
        "randrepeat": gen["randrepeat"],
        "io_size_set": gen["io_size_set"],
        "rw_seq_add_signed": gen["rw_seq_add_signed"],
        "zone_size_bytes": gen["zone_size_bytes"],
        "zone_range_bytes": gen["zone_range_bytes"],
        "zone_skip_bytes": gen["zone_skip_bytes"],
    }
    # --- iolog (docs/fio.md §2.10) ---
    spec["iolog"] = bool(st.get("write_iolog"))
    if trace is not None:
        replay = fio_iolog.pack_replay(trace, st, real_size, lba_bytes)
        if not replay.ios and not replay.waits:
            # iolog.c read_iolog2: a trace of no read, write or wait fails; one of waits
            # alone runs them and ends (measured: `wait 1500` alone, 0 I/Os, exit 0).
            raise FioJobError("no I/O to replay (fio: failed initializing iolog)", **_where(st, "read_iolog", job))
        spec["replay"] = {"records": replay.records}
        # A trace of waits alone has no direction; fio makes its job read and write
        # (read_iolog2: td_ddir = TD_DDIR_RW), and the engine wants one.
        spec["directions"] = replay.directions or ["read", "write"]
        if trace.format == "blktrace" and "iodepth" not in st["set"]:
            # fio probes a blktrace's queue depth when the job sets none (blktrace.c).
            depth = fio_blktrace.probed_depth(trace.summary)
            spec["iodepth_configured"] = depth
            if st["ioengine"] not in O.SYNC_ENGINES:
                spec["iodepth"] = depth
                spec["engine_async"] = spec["engine_async"] or (st["ioengine"] == "null" and depth > 1)
    return spec


def _serializes_overlap(st: Mapping[str, Any], replays: bool) -> bool:
    """serialize_overlap as fio keeps it (init.c fixup_options): off for a job that
    neither writes nor trims, or whose depth is 1, unless it replays an iolog."""
    if not st["serialize_overlap"]:
        return False
    changes_data = st["rw"] not in ("read", "randread")
    return replays or (changes_data and st["iodepth"] > 1)


def _per_dir(values: Sequence[int]) -> IntPerDir:
    read, write, trim = values
    return {"read": read, "write": write, "trim": trim}


def _per_dir_bs(values: Sequence[BsSpec]) -> BsPerDir:
    read, write, trim = values
    return {"read": read, "write": write, "trim": trim}


# Parts of a JobSpec that helpers below fill in (its fields with serde defaults).
class _PrinfoFields(TypedDict):
    pi_act: bool
    pi_chk: int


class _GeneratorFields(TypedDict):
    bssplit_fio: SplitPerDir
    randrepeat: bool
    io_size_set: bool
    rw_seq_add_signed: int
    zone_size_bytes: int
    zone_range_bytes: int
    zone_skip_bytes: int


def _prinfo_fields(st: Mapping[str, Any]) -> _PrinfoFields:
    """PRINFO of the job's commands (docs/fio.md, Protection information): io_uring_cmd
    takes pi_act (default 1) and pi_chk; the kernel's block layer, behind every other engine,
    generates the PI itself (PRACT 0, the host moves it) and has the guard and reference tag
    checked (Linux nvme_setup_rw)."""
    if st["ioengine"] == "io_uring_cmd":
        return {"pi_act": bool(st.get("pi_act", 1)), "pi_chk": int(st.get("pi_chk", 0))}
    return {"pi_act": False, "pi_chk": 4 | 1}


def add_sched_fields(spec: JobSpec, clone: Any, run_exitall: bool) -> None:
    """Engine fields for scheduling between jobs (docs/fio.md §3): ``exit_what`` is the
    clone's own setting when any job of the run set ``exitall`` (fio's flag is global to the
    run), else "none"; ``wait_for`` names the job whose clones must all finish first."""
    st = clone.job.state
    spec["exit_what"] = st.get("exit_what", "group") if run_exitall else "none"
    spec["wait_for"] = st.get("wait_for")
    spec["flow"] = st.get("flow", 0)
    spec["flow_id"] = st.get("flow_id", 0)
    spec["flow_sleep_ns"] = st.get("flow_sleep", 0) * 1000
    # latency_target: fio's queue-depth search (docs/fio.md §3)
    spec["latency_target_ns"] = st.get("latency_target", 0) * 1000
    spec["latency_window_ns"] = st.get("latency_window", 0) * 1000
    spec["latency_percentile"] = float(st.get("latency_percentile", 100.0))
    spec["latency_run"] = bool(st.get("latency_run", 0))


def _fio_generator_fields(st: Mapping[str, Any], fail: Any) -> _GeneratorFields:
    """Engine fields that let the generator reproduce fio's I/O sequence exactly."""
    # options.c bssplit_ddir keeps the entries sorted by percentage (a stable sort).
    read, write, trim = (sorted(([bs, pct] for bs, pct in (st["bssplit"][d] or [])), key=lambda e: e[1]) for d in range(3))
    split: SplitPerDir = {"read": read, "write": write, "trim": trim}
    # init.c fixup_options: zonesize needs zonemode=strided (fio 3.33's default is none);
    # zonerange defaults to zonesize.
    zone_size = zone_range = zone_skip = 0
    mode = st["zonemode"]
    if mode == "none" and st["zone_size"]:
        fail("zonemode=none and zonesize are not compatible (set zonemode=strided)", "zonesize")
    if mode == "strided":
        if not st["zone_size"]:
            fail("zonemode=strided needs zonesize", "zonemode")
        zone_size = st["zone_size"]
        zone_range = st["zone_range"] or zone_size
        zone_skip = st["zone_skip"]
    return {
        "bssplit_fio": split,
        # init.c: an explicit randseed turns randrepeat off at run time.
        "randrepeat": bool(st["randrepeat"]) and "randseed" not in st["set"],
        "io_size_set": "io_size" in st["set"],
        "rw_seq_add_signed": st["rw_seq_add"],
        "zone_size_bytes": zone_size,
        "zone_range_bytes": zone_range,
        "zone_skip_bytes": zone_skip,
    }


# --- ss ---
# fio's default criterion when only ss_dur is given (options.c: steadystate .def).
SS_DEFAULT = {"criterion": "iops_slope", "percent": True, "limit": 0.01}


def ss_key(st: Mapping[str, Any]) -> Optional[tuple[Any, ...]]:
    """A job's steady-state settings as fio compares them within a group (steadystate.c
    td_steadystate_init); None without ss_dur."""
    if not st.get("ss_dur_us"):
        return None
    crit = st.get("steadystate") or SS_DEFAULT
    return (st["ss_dur_us"] // 1_000_000, crit["criterion"], crit["percent"], crit["limit"], st.get("ss_ramp_us", 0))


def add_ss_fields(spec: JobSpec, clone: Any) -> None:
    """Engine field ``steadystate`` (docs/fio.md §3): fio's ss/ss_dur/ss_ramp, or None when
    ss_dur is 0 or under a second (fio truncates it to whole seconds, and 0 turns it off)."""
    st = clone.job.state
    key = ss_key(st)
    if key is None or key[0] == 0:
        spec["steadystate"] = None
        return
    dur_s, criterion, percent, limit, ramp_us = key
    spec["steadystate"] = {
        "metric": "iops" if criterion.startswith("iops") else "bw",
        "slope": criterion.endswith("_slope"),
        "percent": percent,
        "limit": float(limit),
        "duration_s": dur_s,
        "ramp_ns": ramp_us * 1000,
        "group_reporting": bool(st["group_reporting"]),
    }


def _check_job_bytes(st: Mapping[str, Any], per_loop: int, max_bs: int, link_bytes_per_s: Optional[int], fail: Any) -> None:
    """A job that is not time-based ends after loops x io_size bytes (or number_ios x loops I/Os).
    Refuse one that cannot end within the run limit: more bytes than the host link carries
    in 200 days (reads and writes cross the link; trims do not, so they only get fio's
    number limit)."""
    if st["time_based"]:
        return
    total = per_loop * st["loops"]
    if st["number_ios"]:
        # backend.c exceeds_number_ios: the limit is number_ios times loops.
        total = min(total, st["number_ios"] * st["loops"] * max_bs)
    crosses_link = any(d in ("read", "write") for d in _DIRECTIONS[st["rw"]])
    if link_bytes_per_s and crosses_link:
        bound = link_bytes_per_s * L.MAX_RUN_NS // 1_000_000_000
        limit = (
            f"the drive's {link_bytes_per_s / 1e9:.3g} GB/s host link moves at most {L.short_bytes(bound)} "
            f"in the {L.MAX_RUN_DAYS} days a run may simulate"
        )
    else:
        bound = L.FIO_NUMBER_MAX
        limit = f"at most {bound} bytes (fio reads numbers as signed 64-bit)"
    if total > bound:
        option = "loops" if st["loops"] > 1 else ("io_size" if "io_size" in st["set"] else "size")
        fail(f"the job would move {L.short_bytes(total)} ({st['loops']} loops of {per_loop} bytes); {limit}", option)


# Engine input fields the engine holds in 32 bits (crates/ssdtwin-core/src/workload/mod.rs
# JobSpec); every other integer is a u64.
_U32_FIELDS = frozenset(
    (
        "job_index",
        "thread_number",
        "subjob",
        "group_id",
        "batch",
        "namespace",
        "lba_bytes",
        "rwmixread",
        "rwmixwrite",
        "iodepth",
        "iodepth_configured",
        "percentage_random",
    )
)
# Signed engine fields (i64).
_I64_FIELDS = frozenset(("rw_seq_add_signed",))


def contract_range_error(spec: Mapping[str, Any]) -> Optional[str]:
    """The first value of an engine input dict the engine cannot hold (a u32 or u64 out of
    range, a float that is not finite), as ``"path=value (range)"``; None when all fit.
    The option limits make this unreachable from job text; it is the last line of defence
    between the parser and the engine's strict deserialisation."""

    def walk(value: Any, path: str, top: str) -> Optional[str]:
        if isinstance(value, (bool, str, bytes, bytearray)) or value is None:
            return None
        if isinstance(value, int):
            if top in _I64_FIELDS:
                lo, hi = -(1 << 63), (1 << 63) - 1
            else:
                lo, hi = 0, (1 << 32) - 1 if top in _U32_FIELDS else (1 << 64) - 1
            return None if lo <= value <= hi else f"{path}={value} ({lo}..{hi})"
        if isinstance(value, float):
            return None if value == value and abs(value) != float("inf") else f"{path}={value} (a finite number)"
        if isinstance(value, Mapping):
            items: Any = value.items()
        else:
            items = enumerate(value)
        for key, item in items:
            found = walk(item, f"{path}.{key}" if path else str(key), top or str(key))
            if found:
                return found
        return None

    return walk(spec, "", "")
