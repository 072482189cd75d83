"""Every option fio 3.33 knows, each described once: how ssdtwin treats it, how its value
is read (with its range), and for simulated options the job-state field it sets and that
field's default (fio's, from options.c). Everything else about options is derived from
this table (options/__init__.py): the parser's lookups, the ignored and refused reasons,
fio's option names for "did you mean", and the default job state.

The job state is our counterpart of fio's ``struct thread_options``; engine.py and
parser.py read its fields to build the engine input (docs/fio.md §3).
"""

from __future__ import annotations

from ..limits import FIO_NUMBER_MAX, FIO_UINT_MAX, MAX_BS, MAX_IODEPTH, MAX_RUN_US, MAX_THREADS
from . import simulated as S
from .spec import Option, ignored, off_only, refused
from .spec import simulated as sim
from .values import (
    WHY_BS,
    WHY_NUMBER,
    WHY_RUN,
    WHY_THINK,
    WHY_UINT,
    any_size,
    boolean,
    byte_range,
    choice,
    cmdprio_bssplit,
    duration,
    file_service_type,
    flag,
    is_zero,
    mem_type,
    per_direction,
    signed,
    size,
    size_or_percent,
    text_value,
    uint,
)

PER_DIRECTION = ",:-"  # bs=4k,8k / 4k:8k / 4k-8k: reads, then writes and trims

# --- simulated: the engine input (docs/fio.md §3) ---------------------------------------

_TARGET_AND_WORKLOAD = [
    sim("name", text_value, default=None, help="job name"),
    sim("description", text_value, default=None),
    sim(
        "filename",
        handler=S.set_filename,
        defaults={"filename": None, "namespace": None},
        prio=-1,
        help="target: nsN, ns=N, /dev/nvmeXnN or a path (default target)",
    ),
    sim("rw", handler=S.set_rw, defaults={"rw": "read", "rw_nr": 1, "rw_seq_add": 0}, aliases=("readwrite",)),
    sim("rwmixread", handler=S.set_rwmixread),  # both set "rwmix" (in the base state)
    sim("rwmixwrite", handler=S.set_rwmixwrite),
    sim("bs", uint(lo=1, hi=MAX_BS, why=WHY_BS), directions=PER_DIRECTION, default=[4096, 4096, 4096], aliases=("blocksize",)),
    sim("ba", uint(lo=1, hi=FIO_NUMBER_MAX, why=WHY_NUMBER), directions=PER_DIRECTION, default=[0, 0, 0], aliases=("blockalign",)),
    sim("bsrange", S.block_size_range, directions=",", default=[None, None, None], aliases=("blocksize_range",)),
    sim("bssplit", handler=S.set_bssplit, defaults={"bssplit": [None, None, None]}),
    sim("bs_unaligned", flag, default=False, flag=True, aliases=("blocksize_unaligned",)),
    sim("offset", size_or_percent, default=0, aliases=("fileoffset",)),
    sim("offset_align", uint(), default=None),  # 0 is fio's default: the smallest block size
    sim("offset_increment", S.offset_increment, default=0),
    sim("size", size_or_percent, default=None),
    sim("io_size", size_or_percent, default=None, aliases=("io_limit",)),
    # filesize is simulated: the size fio gives the target file (filesetup.c setup_files).
    sim("filesize", byte_range),
    sim("fill_device", boolean, default=False, aliases=("fill_fs",)),
    sim("loops", S.loops, default=1),
    sim("number_ios", uint(hi=FIO_NUMBER_MAX, why=WHY_NUMBER), default=0),
    sim("iodepth", uint(lo=1, hi=MAX_IODEPTH, why="an NVMe queue holds at most 65536 commands"), default=1),
    sim("numjobs", uint(lo=1, hi=MAX_THREADS, why="fio's REAL_MAX_JOBS threads in a run"), default=1),
    sim("ioengine", S.ioengine, default="psync"),
    sim("kb_base", choice("1024", "1000", mapping={"1024": 1024, "1000": 1000}), default=1024, prio=1),
]

_TIME_AND_RATE = [
    sim("time_based", flag, default=0, flag=True),
    sim("runtime", duration("s", MAX_RUN_US, WHY_RUN), key="runtime_us", default=0, aliases=("timeout",)),
    sim("ramp_time", duration("s", MAX_RUN_US, WHY_RUN), key="ramp_time_us", default=0),
    sim("startdelay", S.startdelay, key="startdelay_us", default=(0, 0)),
    sim("rate", uint(hi=FIO_NUMBER_MAX, why=WHY_NUMBER), directions=PER_DIRECTION, default=[0, 0, 0]),
    sim("rate_iops", uint(hi=FIO_UINT_MAX, why=WHY_UINT), directions=PER_DIRECTION, default=[0, 0, 0]),
    sim("rate_process", choice("linear", "poisson"), default="linear"),
    # Minimum rates: the job ends with EIO when a rate_cycle window falls below one
    # (backend.c check_min_rate; engine/fio/min_rate.rs).
    sim("rate_min", uint(hi=FIO_NUMBER_MAX, why=WHY_NUMBER), directions=PER_DIRECTION, default=[0, 0, 0], aliases=("ratemin",)),
    sim("rate_iops_min", uint(hi=FIO_UINT_MAX, why=WHY_UINT), directions=PER_DIRECTION, default=[0, 0, 0]),
    sim("rate_cycle", uint(hi=FIO_UINT_MAX, why=WHY_UINT), default=1000, aliases=("ratecycle",)),
    # Hold back an I/O that overlaps one in flight (backend.c io_u_submit).
    sim("serialize_overlap", boolean, default=0),
    sim("thinktime", duration("us", FIO_UINT_MAX, WHY_THINK), key="thinktime_us", default=0),
    sim("thinktime_spin", duration("us", FIO_UINT_MAX, WHY_THINK), key="thinktime_spin_us", default=0),
    sim("thinktime_blocks", S.thinktime_blocks, default=1),
    sim("thinktime_blocks_type", choice("complete", "issue"), default="complete"),
]

# fio's generators bit for bit (docs/fio.md §3): seeds, the random map, distributions and
# zonemode=strided.
_OFFSETS_AND_GENERATORS = [
    sim("norandommap", flag, default=0, flag=True),
    sim("randrepeat", boolean, default=True),
    sim("randseed", S.randseed, default=0x89),
    sim("allrandrepeat", boolean, default=False),
    sim("random_generator", choice("tausworthe", "lfsr", "tausworthe64"), default="tausworthe"),
    sim(
        "random_distribution",
        S.random_distribution,
        default={"kind": "random", "param": None, "center": None, "zones": [None, None, None]},
    ),
    sim("percentage_random", uint(hi=100), directions=PER_DIRECTION, default=[100, 100, 100]),
    sim("zonemode", S.zonemode, default="none"),
    sim("zonesize", S.zone_bytes, key="zone_size", default=0),
    sim("zonerange", S.zone_bytes, key="zone_range", default=0),
    sim("zoneskip", S.zone_skip, key="zone_skip", default=0),
]

# Groups and scheduling between jobs (docs/fio.md §2.6): exitall is one flag for the whole
# run in fio (options.c str_exitall_cb sets exitall_on_terminate), exit_what says what a
# finishing job terminates, wait_for names a job that must finish before this one starts
# (checked like init.c wait_for_ok after the whole run is read). flow.c: weight (0 = off, at
# most FLOW_MAX_WEIGHT), group id, and microseconds to sleep after being held back (fio
# reads flow_sleep as a plain integer of microseconds).
_GROUPS_AND_SCHEDULING = [
    sim("stonewall", flag, default=0, flag=True, aliases=("wait_for_previous",)),
    sim("new_group", flag, default=0, flag=True),
    sim("group_reporting", flag, default=0, flag=True),
    sim("exitall", flag, flag=True),
    sim("exit_what", choice("group", "stonewall", "all")),
    sim("wait_for", text_value),
    sim("flow", uint(hi=1000, why="fio's FLOW_MAX_WEIGHT")),
    sim("flow_id", uint(hi=FIO_UINT_MAX, why=WHY_UINT)),
    sim("flow_sleep", uint(hi=FIO_UINT_MAX, why=WHY_UINT)),
]

# The report and the log files (docs/fio.md §4). The four write_*_log options set one field,
# "logs" (in the base state).
_REPORT_AND_LOGS = [
    sim(
        "percentile_list",
        handler=S.set_percentile_list,
        defaults={
            "percentile_list": [1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99],
            "percentile_precision": 2,
        },
    ),
    sim("clat_percentiles", boolean, default=True),
    sim("lat_percentiles", boolean, default=False),
    sim("slat_percentiles", boolean, default=False),
    sim("significant_figures", uint(lo=1, hi=10), default=4),
    sim(
        "unified_rw_reporting",
        choice("none", "mixed", "both", "0", "1", "2", mapping={"0": "none", "1": "mixed", "2": "both"}),
        default="none",
    ),
    sim("write_bw_log", handler=S.set_log("bw"), flag=True),
    sim("write_iops_log", handler=S.set_log("iops"), flag=True),
    sim("write_lat_log", handler=S.set_log("lat"), flag=True),
    sim("write_hist_log", handler=S.set_log("hist"), flag=True),
    sim("log_avg_msec", uint(), default=0),
    sim("log_hist_msec", uint(), default=0),
    sim("log_hist_coarseness", uint(hi=6), default=0),
    sim("per_job_logs", boolean, default=True),
    sim("log_offset", boolean, default=False),
    sim("log_max_value", boolean, default=False),
    sim("bwavgtime", uint(), default=500),
    sim("iopsavgtime", uint(), default=500),
]

# write_iolog, read_iolog and fio's replay options (docs/fio.md §2.10).
_IOLOG = [
    sim("write_iolog", text_value, help="append the issued I/Os to this file (fio's iolog version 3)"),
    sim("read_iolog", text_value, help="replay a fio iolog (version 2 or 3); a:b gives one per clone"),
    sim("read_iolog_chunked", boolean),
    sim("replay_no_stall", boolean),
    sim("replay_time_scale", uint(lo=1)),
    sim("replay_redirect", text_value),
    sim("replay_align", S.replay_align),
    sim("replay_scale", uint()),
    sim("replay_skip", handler=S.add_replay_skip),
    sim("merge_blktrace_file", text_value, help="merge the read_iolog blktrace traces by time into this file, then replay it"),
    sim("merge_blktrace_scalars", S.float_list),
    sim("merge_blktrace_iters", S.float_list),
]

# fio's queue-depth search (io_u.c lat_target_*; docs/fio.md §2.6): latency_target and
# latency_window are times in microseconds by default (options.c FIO_OPT_STR_VAL_TIME,
# is_time), latency_percentile a float in [0, 100] (default 100), latency_run a bool.
# Steady-state detection: options.c str_steadystate_cb, steadystate.c; whole seconds (fio
# truncates ss_dur to seconds), 0 turns the detection off.
_LATENCY_TARGET_AND_STEADY_STATE = [
    sim("latency_target", duration("us", MAX_RUN_US, WHY_RUN)),
    sim("latency_window", duration("us", MAX_RUN_US, WHY_RUN)),
    sim("latency_percentile", S.latency_percentile),
    sim("latency_run", boolean),
    sim("steadystate", S.steadystate, aliases=("ss",)),
    sim(
        "steadystate_duration",
        duration("s", 86_400 * 10**6, "the window keeps one sample per second, at most a day of them"),
        key="ss_dur_us",
        aliases=("ss_dur",),
    ),
    sim("steadystate_ramp_time", duration("s", MAX_RUN_US, WHY_RUN), key="ss_ramp_us", aliases=("ss_ramp",)),
]

# --- ignored: accepted, no effect on a simulated drive -----------------------------------

_NO_PAGE_CACHE = "the simulated drive has no page cache"
_NO_DATA = "buffer contents: the twin stores no data"
_FILES = "lays out regular files; the target is a namespace"
_CPU = "host CPU placement"
_BUFFERS = "host buffer memory"
_CGROUPS = "host cgroups"
_NO_ERRORS = "the simulated drive reports no I/O errors"
_NO_PRIO = "I/O priorities are not simulated: the twin's queues serve commands in order"
_NO_MEASURING_COST = "measuring costs nothing in simulated time"
_NO_VERIFY = "acts only with verify=, which ssdtwin refuses"
_TIOBENCH = "an option of fio's tiobench profile; acts only with --profile=tiobench"
_ACT = "an option of fio's act profile; acts only with --profile=act"
_ANY_UINT = uint(hi=None)  # no upper limit of its own

_HOST_SIDE = [
    ignored("direct", boolean, f"{_NO_PAGE_CACHE}: I/O always reaches it"),
    ignored("buffered", boolean, f"{_NO_PAGE_CACHE}: I/O always reaches it"),
    ignored("invalidate", boolean, _NO_PAGE_CACHE),
    ignored("fadvise_hint", choice("0", "1", "random", "sequential"), _NO_PAGE_CACHE),
    ignored("thread", flag, "threads or processes only change the host; the header says threads", flag=True),
    ignored("cpus_allowed", text_value, _CPU),
    ignored("cpus_allowed_policy", choice("shared", "split"), _CPU),
    ignored("cpumask", _ANY_UINT, _CPU),
    ignored("numa_cpu_nodes", text_value, _CPU),
    ignored("numa_mem_policy", text_value, "host memory placement"),
    ignored("gtod_cpu", _ANY_UINT, _CPU),
    ignored("nice", signed(-20, 19), "host CPU priority"),
    ignored("prio", uint(0, 7), _NO_PRIO),
    ignored("prioclass", uint(0, 3), _NO_PRIO),
    ignored("log_prio", boolean, "I/O priorities are not simulated; the prio column of log files stays 0"),
    ignored("mem", mem_type, _BUFFERS, aliases=("iomem",)),
    ignored("iomem_align", _ANY_UINT, _BUFFERS, aliases=("mem_align",)),
    ignored("hugepage-size", any_size, _BUFFERS),
    ignored("lockmem", any_size, "host memory"),
    ignored("gpu_dev_id", uint(), "only for buffers in GPU memory (mem=cudamalloc)"),
    ignored("clocksource", choice("gettimeofday", "clock_gettime", "cpu"), "the twin runs in virtual time"),
    ignored("gtod_reduce", boolean, "reading the clock costs nothing in simulated time; latencies are still reported"),
    ignored("disable_lat", boolean, f"{_NO_MEASURING_COST}; lat is still reported"),
    ignored("disable_clat", boolean, f"{_NO_MEASURING_COST}; clat is still reported"),
    ignored("disable_slat", boolean, f"{_NO_MEASURING_COST}; slat is still reported"),
    ignored("disable_bw_measurement", boolean, f"{_NO_MEASURING_COST}; bw is still reported", aliases=("disable_bw",)),
    ignored("disk_util", boolean, "no kernel disk statistics for a simulated drive"),
    ignored("iodepth_batch", _ANY_UINT, "host submission batching; the twin's queue depth is iodepth", aliases=("iodepth_batch_submit",)),
    ignored(
        "iodepth_batch_complete_min",
        _ANY_UINT,
        "host completion batching; the twin's queue depth is iodepth",
        aliases=("iodepth_batch_complete",),
    ),
    ignored("iodepth_batch_complete_max", _ANY_UINT, "host completion batching; the twin's queue depth is iodepth"),
    ignored("iodepth_low", _ANY_UINT, "host refill threshold; the twin keeps iodepth I/Os in flight"),
    ignored(
        "io_submit_mode", choice("inline", "offload"), "who submits I/O on the host (a thread pool or the job) only changes host CPU use"
    ),
    ignored("uid", _ANY_UINT, "host process identity"),
    ignored("gid", _ANY_UINT, "host process identity"),
    ignored("cgroup", text_value, _CGROUPS),
    ignored("cgroup_weight", uint(100, 1000), _CGROUPS),
    ignored("cgroup_nodelete", boolean, _CGROUPS),
    ignored("ioscheduler", text_value, "the simulated drive has no kernel I/O scheduler"),
    ignored("lockfile", choice("none", "exclusive", "readwrite"), "host-side file locking; one run owns the image"),
]

_BUFFER_CONTENTS = [
    ignored("refill_buffers", flag, _NO_DATA, flag=True),
    ignored("zero_buffers", flag, _NO_DATA, flag=True),
    ignored("scramble_buffers", boolean, _NO_DATA),
    ignored("buffer_pattern", text_value, _NO_DATA),
    ignored("buffer_compress_percentage", uint(0, 100), _NO_DATA),
    ignored("buffer_compress_chunk", _ANY_UINT, _NO_DATA),
    ignored("dedupe_percentage", uint(0, 100), _NO_DATA),
    ignored("dedupe_mode", choice("repeat", "working_set"), _NO_DATA),
    ignored("dedupe_working_set_percentage", uint(0, 100), _NO_DATA),
    ignored("dedupe_global", boolean, _NO_DATA),
]

_FILES_AND_LAYOUT = [
    ignored(
        "directory",
        text_value,
        "the target is a namespace, not a directory (only completes a relative filename: directory=/dev filename=nvme0n1)",
    ),
    ignored("overwrite", boolean, _FILES),
    ignored("create_serialize", boolean, _FILES),
    ignored("create_fsync", boolean, _FILES),
    ignored("create_on_open", boolean, _FILES),
    ignored("allow_file_create", boolean, _FILES),
    ignored("allow_mounted_write", boolean, "the target is a namespace of the simulated drive"),
    ignored("unlink", boolean, "removes regular files; the target is a namespace"),
    ignored("unlink_each_loop", boolean, "removes regular files; the target is a namespace"),
    ignored("filename_format", text_value, "names regular files; the target is a namespace"),
    ignored("unique_filename", boolean, "names regular files; the target is a namespace"),
    ignored(
        "file_append",
        boolean,
        "fio applies it to regular files only; the target is a block device (filesetup.c get_start_offset)",
    ),
    ignored(
        "fallocate",
        choice("none", "native", "posix", "keep", "truncate", "0", "1"),
        "preallocates regular files; the target is a namespace",
    ),
    ignored("file_service_type", file_service_type, "chooses among several files; a job has one target"),
    ignored("openfiles", uint(), "a job has one target"),
    ignored("atomic", boolean, "like direct=1: the simulated drive has no page cache"),
    ignored("softrandommap", boolean, "the random map always fits in the twin"),
]

_VERIFY_ERRORS_AND_LOGS = [
    ignored("do_verify", boolean, _NO_VERIFY),
    ignored("verify_interval", uint(80), _NO_VERIFY),
    ignored("verify_offset", uint(40), _NO_VERIFY),
    ignored("verify_pattern", text_value, "acts only with verify= (and fills buffers): the twin stores no data"),
    ignored("verify_fatal", boolean, _NO_VERIFY),
    ignored("verify_dump", boolean, _NO_VERIFY),
    ignored("verify_async", uint(), _NO_VERIFY),
    ignored("verify_async_cpus", text_value, _NO_VERIFY),
    ignored("verify_backlog", size, _NO_VERIFY),
    ignored("verify_backlog_batch", uint(), _NO_VERIFY),
    ignored("verify_state_load", boolean, _NO_VERIFY),
    ignored("verify_state_save", boolean, _NO_VERIFY),
    ignored("experimental_verify", boolean, _NO_VERIFY),
    ignored("trim_verify_zero", boolean, _NO_VERIFY),
    ignored("trim_backlog_batch", uint(), "acts only with trim_backlog, which ssdtwin refuses"),
    ignored("verifysort", text_value, "deprecated: fio 3.33 ignores it too"),
    ignored("verifysort_nr", text_value, "deprecated: fio 3.33 ignores it too"),
    ignored("exitall_on_error", flag, _NO_ERRORS, flag=True),
    ignored("continue_on_error", choice("none", "read", "write", "io", "verify", "all", "0", "1"), _NO_ERRORS),
    ignored("ignore_error", text_value, _NO_ERRORS),
    ignored("error_dump", boolean, _NO_ERRORS),
    ignored(
        "write_hint",
        choice("none", "short", "medium", "long", "extreme"),
        "a write lifetime hint: Linux no longer passes it to NVMe drives (streams went in 5.18), and the twin places no data by hint",
    ),
    ignored("log_entries", uint(1024, 1024 * 1024), "the initial size of fio's log buffers"),
    ignored("log_compression", uint(1024, 512 * 1024 * 1024), "compresses logs in memory; the log files written are the same"),
    ignored("log_compression_cpus", text_value, "compresses logs in memory; the log files written are the same"),
    ignored("log_alternate_epoch_clock_id", uint(), "acts only with log_unix_epoch/log_alternate_epoch, which ssdtwin refuses"),
]

# Options of fio's built-in profiles (profiles/tiobench.c, act.c): fio registers them for
# every job, and they act only with --profile, which ssdtwin does not take.
_PROFILES = [
    ignored(
        "threads", uint(), "an option of fio's tiobench profile (its thread count); acts only with --profile=tiobench", profile="tiobench"
    ),
    ignored("block", uint(), _TIOBENCH, profile="tiobench"),
    ignored("numruns", uint(), _TIOBENCH, profile="tiobench"),
    ignored("dir", text_value, _TIOBENCH, profile="tiobench"),
    ignored("device-names", text_value, _ACT, profile="act"),
    ignored("load", uint(), _ACT, profile="act"),
    ignored("test-duration", duration("s"), _ACT, profile="act"),
    ignored("threads-per-queue", uint(), _ACT, profile="act"),
    ignored("read-req-num-512-blocks", uint(), _ACT, profile="act"),
    ignored("large-block-op-kbytes", uint(), _ACT, profile="act"),
    ignored("prep", flag, _ACT, flag=True, profile="act"),
]

# --- accepted only at the value that turns them off --------------------------------------

_WHY_FLUSH = "flushes and FUA writes are not part of the engine contract yet"
_WHY_VERIFY_TRIM = "verify's trim phase (trims of verified blocks) is not simulated"
_WHY_NO_WALL_CLOCK = "a simulated run has no wall-clock times for log rows"

_OFF_ONLY = [
    off_only("fsync", uint(), is_zero, _WHY_FLUSH),
    off_only("fdatasync", uint(), is_zero, _WHY_FLUSH),
    off_only("write_barrier", uint(), is_zero, _WHY_FLUSH),
    off_only("end_fsync", boolean, is_zero, _WHY_FLUSH),
    off_only("fsync_on_close", boolean, is_zero, _WHY_FLUSH),
    off_only("sync", choice("none", "0", "sync", "1", "dsync"), lambda v: v in ("none", "0"), _WHY_FLUSH),
    off_only("nrfiles", uint(1), lambda v: v == 1, "one target per job (the namespace)", aliases=("nr_files",)),
    off_only("pre_read", boolean, is_zero, "reads the region into the page cache before the job; a simulated drive has none"),
    off_only("create_only", boolean, is_zero, "the job would only lay out files and do no I/O"),
    off_only("verify_only", flag, is_zero, "a verification pass; data verification is not simulated", flag=True),
    off_only(
        "rw_sequencer",
        choice("sequential", "identical"),
        lambda v: v == "sequential",
        "repeating one offset (rw=randread:N with identical) is not simulated",
    ),
    off_only("bs_is_seq_rand", boolean, is_zero, "block sizes by sequential/random instead of by direction are not simulated"),
    off_only("thinktime_iotime", duration("s"), is_zero, "think time after each interval of I/O time is not simulated"),
    off_only("max_latency", per_direction(duration("us")), is_zero, "fio ends a job whose I/O exceeds it; not checked"),
    off_only("rate_ignore_thinktime", boolean, is_zero, "rate limits that ignore think time are not simulated"),
    off_only("trim_percentage", uint(0, 100), is_zero, _WHY_VERIFY_TRIM),
    off_only("trim_backlog", size, is_zero, _WHY_VERIFY_TRIM),
    off_only("stats", boolean, bool, "the twin always collects statistics"),
    off_only("block_error_percentiles", boolean, is_zero, "trim block error histograms are not produced"),
    off_only("log_store_compressed", boolean, is_zero, "compressed log files (.fz) are not written"),
    off_only("log_unix_epoch", boolean, is_zero, _WHY_NO_WALL_CLOCK),
    off_only("log_alternate_epoch", boolean, is_zero, _WHY_NO_WALL_CLOCK),
    off_only("unit_base", choice("0", "8", "1"), lambda v: v in ("0", "8"), "bit-based normal output is not produced"),
]

# --- refused: known to fio, not to ssdtwin -----------------------------------------------

_ZBD = "zoned block devices (zonemode=zbd): the twin's namespaces are conventional"

_REFUSED = [
    refused("verify", "data verification is not simulated"),
    refused("opendir", "a file-system workload over a directory tree; jobs target a namespace"),
    refused("profile", "fio's built-in profiles (tiobench, act) generate file-system jobs; write the jobs out instead"),
    refused("exec_prerun", "ssdtwin does not run host commands from job files"),
    refused("exec_postrun", "ssdtwin does not run host commands from job files"),
    refused("sync_file_range", _WHY_FLUSH),
    refused("percentage_sequential", "deprecated: fio 3.33 refuses it too (use percentage_random)"),
    refused("rwmixcycle", "deprecated: fio 3.33 refuses it too"),
    refused("zonecapacity", _ZBD),
    refused("read_beyond_wp", _ZBD),
    refused("max_open_zones", _ZBD),
    refused("job_max_open_zones", _ZBD),
    refused("ignore_zone_limits", _ZBD),
    refused("zone_reset_threshold", _ZBD),
    refused("zone_reset_frequency", _ZBD),
    # Deprecated in fio, ignored by fio's own flow control since 2012.
    refused("flow_watermark"),
]

# --- engine options: valid only with an engine that has them ------------------------------
# fio loads the engine, then parses these in a second pass and echoes them after the
# general options. Most are about host submission paths.

_URING = ("io_uring", "io_uring_cmd")
_CMDPRIO_ENGINES = ("libaio", "io_uring", "io_uring_cmd")
# Protection information, the io_uring_cmd engine's options (fio engines/io_uring.c;
# docs/fio.md, Protection information). pi_act (default 1) is PRACT: the controller inserts
# and strips 8-byte PI, so the host moves none; pi_chk holds GUARD, REFTAG and APPTAG (fio
# looks for each word in the string) and sets PRCHK. engine.py reads both with defaults.
_PI = ("io_uring_cmd",)
_APPTAG = "the twin checks tags by injected corruption (nvme inject-pi-error), not by tag values"

_ENGINE = [
    ignored("hipri", flag, "host completion polling", flag=True, engines=(*_URING, "pvsync2")),
    ignored("hipri_percentage", _ANY_UINT, "host completion polling", engines=("pvsync2",)),
    ignored("fixedbufs", flag, "host buffer registration", flag=True, engines=_URING),
    ignored("registerfiles", flag, "host file registration", flag=True, engines=_URING),
    ignored("sqthread_poll", flag, "host submission thread", flag=True, engines=_URING),
    ignored("sqthread_poll_cpu", _ANY_UINT, "host submission thread", engines=_URING),
    ignored("nonvectored", _ANY_UINT, "host submission path", engines=_URING),
    ignored("uncached", _ANY_UINT, "page cache hint; the simulated drive has no page cache", engines=(*_URING, "pvsync2")),
    ignored("nowait", flag, "host submission path", flag=True, engines=(*_URING, "libaio", "pvsync2")),
    ignored("force_async", _ANY_UINT, "host submission path", engines=_URING),
    ignored("cmd_type", text_value, "io_uring_cmd passthrough: the same NVMe commands reach the twin", engines=("io_uring_cmd",)),
    ignored("userspace_reap", flag, "host completion path", flag=True, engines=("libaio",)),
    ignored("uri", text_value, "the target is the simulated drive", engines=("nbd",)),
    # The cmdprio options of fio 3.33 (engines/libaio.c, io_uring.c).
    ignored("cmdprio_percentage", per_direction(uint(0, 100)), _NO_PRIO, engines=_CMDPRIO_ENGINES),
    ignored("cmdprio_class", per_direction(uint(1, 3)), _NO_PRIO, engines=_CMDPRIO_ENGINES),
    ignored("cmdprio", per_direction(uint(0, 7)), _NO_PRIO, engines=_CMDPRIO_ENGINES),
    ignored("cmdprio_bssplit", cmdprio_bssplit, _NO_PRIO, engines=_CMDPRIO_ENGINES),
    sim("pi_act", boolean, engines=_PI),
    sim("pi_chk", S.pi_chk, engines=_PI),
    ignored("apptag", uint(hi=0xFFFF), _APPTAG, engines=_PI),
    ignored("apptag_mask", uint(hi=0xFFFF), _APPTAG, engines=_PI),
    ignored("md_per_io_size", uint(hi=FIO_UINT_MAX), "the twin moves the metadata the namespace's format asks for", engines=_PI),
]

TABLE: list[Option] = [
    *_TARGET_AND_WORKLOAD,
    *_TIME_AND_RATE,
    *_OFFSETS_AND_GENERATORS,
    *_GROUPS_AND_SCHEDULING,
    *_REPORT_AND_LOGS,
    *_IOLOG,
    *_LATENCY_TARGET_AND_STEADY_STATE,
    *_HOST_SIDE,
    *_BUFFER_CONTENTS,
    *_FILES_AND_LAYOUT,
    *_VERIFY_ERRORS_AND_LOGS,
    *_PROFILES,
    *_OFF_ONLY,
    *_REFUSED,
    *_ENGINE,
]
