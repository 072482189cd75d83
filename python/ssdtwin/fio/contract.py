"""The types that cross the binding on a fio run (docs/fio.md §3 and §4), one TypedDict per
Rust structure, named as in Rust:

* engine input, one ``JobSpec`` per clone (crates/ssdtwin-core/src/workload/mod.rs);
* engine output, one ``CloneOut`` per clone (engine/fio.rs, engine/steadystate.rs,
  stats/mod.rs);
* ``FioFacts``: fio's numbers the core owns and Python reads (engine/fio_facts.rs).
* a replayed trace's ``TracePlan`` (how it is read and placed) and ``TraceSummary`` (what
  it holds): workload/trace/source.rs, for ``read_iolog=`` and ``ssdtwin replay``.

pythonize converts them (structs and maps become dicts, sequences lists, fixed-length
arrays tuples, bytes bytes). tests/test_binding_types.py fails when a Rust structure gains or
loses a field its TypedDict lacks: for inputs it compares the field names serde's derive
expects, for outputs the dicts a real run returns.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Optional, TypedDict

Ddir = Literal["read", "write", "trim"]

# --- fio's numbers (engine/fio_facts.rs) -----------------------------------------------------


class Histogram(TypedDict):
    plat_bits: int
    plat_group_nr: int
    bucket_low_ns: list[int]
    bucket_high_ns: list[int]
    bucket_value_ns: list[int]


class LatencyTables(TypedDict):
    edges: tuple[int, ...]
    ms_edges: tuple[int, ...]


class FioFacts(TypedDict):
    ddirs: tuple[Ddir, Ddir, Ddir]
    histogram: Histogram
    latency_tables: LatencyTables
    iodepth_bin_low: tuple[int, ...]
    iolog_record: tuple[str, ...]
    replay_record: tuple[str, ...]
    replay_absolute: int
    replay_tail: int
    max_run_ns: int


# --- engine input (workload/mod.rs) ----------------------------------------------------------


class BsSpec(TypedDict):
    min: int
    max: int
    split: Optional[list[list[int]]]


class BsPerDir(TypedDict):
    read: BsSpec
    write: BsSpec
    trim: BsSpec


class IntPerDir(TypedDict):
    read: int
    write: int
    trim: int


class SplitPerDir(TypedDict):
    read: list[list[int]]
    write: list[list[int]]
    trim: list[list[int]]


class Zone(TypedDict):
    access_pct: int
    range_pct: NotRequired[int]
    range_bytes: NotRequired[int]


class RandomDistribution(TypedDict):
    kind: str
    param: Optional[float]
    center: Optional[float]
    zones: Optional[dict[str, Optional[list[Zone]]]]


class LogSpec(TypedDict):
    bw: bool
    iops: bool
    lat: bool
    hist: bool
    avg_ms: int
    hist_ms: int
    max_value: bool
    offset: bool


class ReplayTrace(TypedDict):
    records: bytes


class SteadyStateSpec(TypedDict):
    metric: Literal["iops", "bw"]
    slope: bool
    percent: bool
    limit: float
    duration_s: int
    ramp_ns: int
    group_reporting: bool


class JobSpec(TypedDict):
    """One job clone (docs/fio.md §3, version 1). The NotRequired fields have serde
    defaults in Rust; ``Run.to_engine`` sends them all but ``replay``."""

    version: int
    name: str
    job_index: int
    thread_number: int
    subjob: int
    group_id: int
    batch: int
    stonewall: bool
    filename: Optional[str]
    namespace: Optional[int]
    target_size_bytes: int
    lba_bytes: int
    rw: str
    directions: list[Ddir]
    random: bool
    rw_nr: int
    rw_seq_add_bytes: int
    rwmixread: int
    rwmixwrite: int
    bs: BsPerDir
    bs_unaligned: bool
    blockalign: IntPerDir
    offset_bytes: int
    size_bytes: int
    io_size_bytes: int
    loops: int
    fill_device: bool
    number_ios: int
    ioengine: str
    engine_async: bool
    iodepth: int
    iodepth_configured: int
    time_based: bool
    runtime_ns: int
    ramp_time_ns: int
    startdelay_ns: int
    norandommap: bool
    random_generator: str
    seed: int
    seeds: dict[str, int]
    seed_source: str
    random_distribution: RandomDistribution
    percentage_random: IntPerDir
    rate_bytes_per_s: IntPerDir
    rate_iops: IntPerDir
    rate_process: Literal["linear", "poisson"]
    rate_min_bytes_per_s: NotRequired[IntPerDir]
    rate_iops_min: NotRequired[IntPerDir]
    rate_cycle_ms: NotRequired[int]
    serialize_overlap: NotRequired[bool]
    thinktime_ns: int
    thinktime_spin_ns: int
    thinktime_blocks: int
    thinktime_blocks_type: NotRequired[Literal["complete", "issue"]]
    bw_avg_ms: int
    iops_avg_ms: int
    logs: LogSpec
    iolog: NotRequired[bool]
    replay: NotRequired[Optional[ReplayTrace]]
    exit_what: NotRequired[Literal["none", "group", "stonewall", "all"]]
    wait_for: NotRequired[Optional[str]]
    flow: NotRequired[int]
    flow_id: NotRequired[int]
    flow_sleep_ns: NotRequired[int]
    bssplit_fio: NotRequired[Optional[SplitPerDir]]
    randrepeat: NotRequired[Optional[bool]]
    io_size_set: NotRequired[Optional[bool]]
    rw_seq_add_signed: NotRequired[Optional[int]]
    pi_act: NotRequired[bool]
    pi_chk: NotRequired[int]
    zone_size_bytes: NotRequired[int]
    zone_range_bytes: NotRequired[int]
    zone_skip_bytes: NotRequired[int]
    latency_target_ns: NotRequired[int]
    latency_window_ns: NotRequired[int]
    latency_percentile: NotRequired[float]
    latency_run: NotRequired[bool]
    steadystate: NotRequired[Optional[SteadyStateSpec]]


# --- engine output (engine/fio.rs, engine/steadystate.rs, stats/mod.rs) ----------------------


class StatOut(TypedDict):
    """fio's running statistics of one latency kind; ``hist`` sparse [index, count] pairs."""

    n: int
    min_ns: int
    max_ns: int
    sum_ns: int
    m2: float
    hist: list[tuple[int, int]]


class SampleStatOut(TypedDict):
    """fio's ``io_stat`` of bw (KiB/s) or iops samples."""

    n: int
    min: int
    max: int
    mean: float
    m2: float


class DirOut(TypedDict):
    io_bytes: int
    total_ios: int
    runtime_ns: int
    short_ios: int
    drop_ios: int
    clat: StatOut
    slat: StatOut
    lat: StatOut
    bw_sample_stat: SampleStatOut
    iops_sample_stat: SampleStatOut


class SsOut(TypedDict):
    """fio's steady-state record; the floats are NaN where fio divides by zero."""

    metric: Literal["iops", "bw"]
    is_slope: bool
    percent: bool
    limit: float
    duration_s: int
    holder: bool
    attained: bool
    criterion: float
    max_deviation: float
    slope: float
    iops: list[int]
    bw: list[int]


class LatencyBuckets(TypedDict):
    """Completion latencies in fio's tables (``FioFacts.latency_tables``)."""

    ns: list[int]
    us: list[int]
    ms: list[int]


class CloneLogs(TypedDict):
    """The requested logs' rows exactly as fio writes them (docs/fio.md §6.3); a log without
    rows is left out. A row is ``[time_ms, value, ddir, bs, offset]``, a histogram row
    ``[time_ms, ddir, 0, [[bucket, count], ...]]``."""

    bw: NotRequired[list[list[int]]]
    clat: NotRequired[list[list[int]]]
    clat_hist: NotRequired[list[list[Any]]]
    iops: NotRequired[list[list[int]]]
    lat: NotRequired[list[list[int]]]
    slat: NotRequired[list[list[int]]]


class CloneOut(TypedDict):
    """Engine output of one clone (docs/fio.md §4)."""

    version: int
    thread_number: int
    start_ns: int
    elapsed_ns: int
    runtime_ns: int
    read: DirOut
    write: DirOut
    trim: DirOut
    iodepth_level: tuple[int, int, int, int, int, int, int]
    iodepth_submit: tuple[int, int, int, int, int, int, int]
    iodepth_complete: tuple[int, int, int, int, int, int, int]
    latency_buckets: LatencyBuckets
    logs: CloneLogs
    iolog: NotRequired[bytes]
    latency_depth: int
    error: int
    error_text: NotRequired[str]
    steadystate: NotRequired[SsOut]


# --- converging rounds (engine/fio/converge.rs) ---


class ConvergeRule(TypedDict, total=False):
    """When a timed run may stop timing (docs/fio.md, "Converging rounds"); a field left out
    takes the core's default (shown)."""

    confidence: float  # 0.95
    rel_half_width: float  # 0.005
    percentiles: list[float]  # []
    min_batches: int  # 20
    latency: bool  # True: mean latency and percentiles must converge too
    writes: bool  # True: rounds that write may converge too (False: timed in full, the drive's state exact)
    first_chunk_fill: float  # 0.02
    max_chunk_fill: float  # 0.25


class FigureOut(TypedDict):
    """One tracked figure of a group and direction: ``iops`` (per s), ``bw`` (bytes/s),
    ``lat_mean`` and ``lat_pNN`` (ns), and its interval's half-width relative to it."""

    group: int
    ddir: Ddir
    figure: str
    estimate: float
    rel_half_width: float


class ChunkOut(TypedDict):
    ios: int
    write_bytes: int
    ns: int


class SampleOut(TypedDict):
    start_ns: int
    timed_ns: int
    batches: int
    batch_ns: int
    warmup_batches: int
    converged: bool
    figures: list[FigureOut]
    fast_forward: Optional[ChunkOut]


class ConvergeOut(TypedDict):
    """How a converging run went: the fio JSON's ``ssdtwin.timing``."""

    rule: ConvergeRule
    timed_in_full: Optional[str]
    timed_ns: int
    fast_forward_ns: int
    timed_share: float
    fast_forward_ios: int
    timed_to_end: Optional[str]
    samples: list[SampleOut]
    figures: list[FigureOut]


# --- a trace replayed (workload/trace/source.rs: read_iolog=, ``ssdtwin replay``) ---------------


class TraceFioReplay(TypedDict, total=False):
    """workload/trace/mod.rs ``FioReplay``: fio's replay options (every field has a default).
    ``skip``: read, write, trim, sync."""

    replay_scale: int
    replay_align: int
    time_scale: float
    no_stall: bool
    skip: tuple[bool, bool, bool, bool]


# What an I/O past the target's end becomes (source.rs ``Beyond``).
Beyond = Literal["refuse", "wrap", "fit"]


class TraceTarget(TypedDict):
    bytes: int
    lba: int
    beyond: Beyond
    widen: bool


class TraceLimits(TypedDict):
    max_ios: int
    skip_bad: bool


class TracePlan(TypedDict):
    """source.rs ``Plan``: how a trace is read and placed (``trace_scan``'s, ``trace_load``'s
    and ``replay_trace``'s input)."""

    format: str
    fio: NotRequired[TraceFioReplay]
    volume: NotRequired[Optional[str]]
    target: TraceTarget
    limits: NotRequired[TraceLimits]
    trace_end: NotRequired[int]


class TraceSummary(TypedDict):
    """source.rs ``Summary``: what a trace holds; ``ios`` and ``bytes`` by direction (read,
    write, trim)."""

    format: str
    ios: tuple[int, int, int]
    bytes: tuple[int, int, int]
    syncs: int
    end_bytes: int
    span_ns: int
    waits: int
    skipped_lines: int
    first_skipped: Optional[str]
    realigned: int
    moved: int
    volumes: list[str]
    volumes_with_io: list[str]
    depth: Optional[int]
    notes: list[str]
