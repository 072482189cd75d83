"""The records of a SNIA PTS run, one TypedDict per shape the harness builds, passes around
and writes (docs/pts.md, "Report folder"): a round's row, the steady-state verdict, a
test's result and settings, pts.json, the tables' rows, ``-o json``.

TypedDicts are plain dicts at run time, so the files are what they were; mypy checks the
code that builds and reads them, and tests/pts/test_records.py checks them key for key
against what a real run produces, so they cannot drift from it.

Units are in the names: ``_s`` seconds, ``_us`` microseconds, ``_bytes`` bytes,
``_bytes_s`` bytes per second, ``_mb_s`` 10^6 bytes per second, ``_mib_s`` 2^20 bytes per
second, ``iops`` I/Os per second, ``_pct`` percent; a ``window`` is [first, last] round
(segment for WSAT, HIR and XSR), both included.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NotRequired, Optional, TypedDict, Union

# --- open mappings: schemas that are not ours --------------------------------------------

FioJson = dict[str, Any]
"""fio's ``json+`` output as parsed (the real fio's, or ``ssdtwin fio``'s in a twin): fio's
own schema, which changes between fio versions; measurements.py reads the few fields it
needs with defaults."""

FolderJson = dict[str, Any]
"""A JSON object read back from a report folder by the report (pts/report/): the harness
wrote it as the records below, but a file may be damaged, hand-edited or from another
version, so the report reads every field defensively (``.get``, ``isinstance``)."""

TableRecord = dict[str, Any]
"""One row of a test's table.csv as pandas reads it back (``-o json``'s ``table``): its
columns depend on the test and its settings (the IOPS table has a column per R/W mix)."""

# --- one element run ------------------------------------------------------------------------

TestStatus = Literal["pending", "running", "steady", "not steady", "complete", "failed", "interrupted", "not run"]
"""A test's status in pts.json and result.json: pending (not started), running, and how it
ended: steady / not steady (tests judged by the steady-state rule), complete (tests that run
a fixed plan), failed, interrupted (Ctrl-C), not run (the run stopped before it)."""


class TimingColumns(TypedDict, total=False):
    """How much of an element a twin timed (docs/pts.md, "Converging rounds"): the timed
    stimulus in seconds and as a share (0..1) of the element; the widest relative
    confidence half-width (0..1, inf when unknown) of its IOPS and mean latency. Empty for
    a run with every I/O timed (a real target, ``--no-converge``)."""

    timed_s: float
    timed_share: float
    iops_ci_rel: Optional[float]
    lat_mean_ci_rel: Optional[float]


class ElementMeasurements(TypedDict):
    """One element's measurements from fio's json+ (measurements.fio_row): IOPS and
    bandwidth (bytes/s) per direction and in total; completion latency in µs (mean, max
    and percentiles from fio's clat histogram) per direction that did I/O and over both;
    a percentile is None when the histogram holds no I/O. The timing columns are a twin's."""

    read_iops: float
    read_bw_bytes_s: float
    read_lat_mean_us: NotRequired[float]
    read_lat_max_us: NotRequired[float]
    read_lat_p99_us: NotRequired[Optional[float]]
    read_lat_p99_9_us: NotRequired[Optional[float]]
    read_lat_p99_99_us: NotRequired[Optional[float]]
    write_iops: float
    write_bw_bytes_s: float
    write_lat_mean_us: NotRequired[float]
    write_lat_max_us: NotRequired[float]
    write_lat_p99_us: NotRequired[Optional[float]]
    write_lat_p99_9_us: NotRequired[Optional[float]]
    write_lat_p99_99_us: NotRequired[Optional[float]]
    iops: float
    timed_s: NotRequired[float]
    timed_share: NotRequired[float]
    iops_ci_rel: NotRequired[Optional[float]]
    lat_mean_ci_rel: NotRequired[Optional[float]]
    lat_mean_us: NotRequired[float]
    lat_max_us: NotRequired[float]
    lat_p99_us: NotRequired[Optional[float]]
    lat_p99_9_us: NotRequired[Optional[float]]
    lat_p99_99_us: NotRequired[Optional[float]]


class RoundRow(ElementMeasurements):
    """One element run: a row of rounds.csv (folder.COLUMNS; testrun.TestRun.run). ``round``
    is set for rounds judged for steady state, ``segment`` for runs in segments (WSAT, HIR,
    XSR, the curve's points, CBW/DIRTH's histogram runs); the element's fio parameters
    (``rw``, ``read_pct`` in %, ``bs_bytes``: 0 for a bssplit, ``numjobs``, ``iodepth``);
    ``runtime_s`` and the test clock at its start and end (``t_*_s``: simulated on a twin);
    bytes written since the purge and as drive fills (capacities); the idle time before it
    (``wait_s``: HIR's access A); ``phase`` (pre, A, C, curve, AG1..3, pc, prewrite, di,
    rth-*; "" for a test's plain rounds)."""

    round: Optional[int]
    segment: Optional[int]
    element: str
    rw: str
    read_pct: int
    bs_bytes: int
    numjobs: int
    iodepth: int
    runtime_s: float
    t_start_s: float
    t_end_s: float
    bytes_written_total: int
    drive_fills: float
    wait_s: Optional[float]
    phase: str


def cell(row: Mapping[str, object], column: str) -> Optional[float]:
    """A row's number by a column name chosen at run time (a tracking variable's, a table's
    column): None where the row holds None, KeyError where it lacks the column."""
    value = row[column]
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"column {column}: {value!r} is not a number")


def cell_or_none(row: Mapping[str, object], column: str) -> Optional[float]:
    """:func:`cell`, or None where the row lacks the column (a direction without I/O)."""
    return cell(row, column) if column in row else None


class WipcRun(TypedDict):
    """Workload-independent preconditioning (result.json ``extra.wipc``): the element, bytes
    written since the purge, its runtime (s) and write bandwidth (bytes/s)."""

    element: str
    bytes: int
    runtime_s: float
    write_bw_bytes_s: float


# --- steady state (steady.py) ------------------------------------------------------------------


class WindowCheckDoc(TypedDict):
    """The SNIA rule on one window of one tracking variable (steady.WindowCheck as JSON;
    WSAT's result.json ``extra.steady``): the rounds and values, the verdict, the window's
    average, minimum and maximum, the data excursion (max − min) and its limit (0.20 ×
    average), the least-squares slope (per round) and intercept, the slope excursion (the
    fitted line's rise across the window) and its limit (0.10 × average). Values are in the
    tracking variable's unit."""

    rounds: list[int]
    values: list[float]
    steady: bool
    avg: float
    min: float
    max: float
    data_excursion: float
    data_limit: float
    slope: float
    intercept: float
    slope_excursion: float
    slope_limit: float


class SteadyVariable(TypedDict):
    """One tracking variable in steady.json: its name, the element and rounds.csv column it
    tracks and their unit (IOPS, B/s, us); every judged round and its value; the verdict on
    its last 5 rounds with the window check's numbers (absent while fewer than 5 rounds are
    done, when ``window`` is None)."""

    name: str
    element: str
    column: str
    unit: str
    rounds: list[int]
    values: list[float]
    steady: bool
    avg: NotRequired[float]
    min: NotRequired[float]
    max: NotRequired[float]
    data_excursion: NotRequired[float]
    data_limit: NotRequired[float]
    slope: NotRequired[float]
    intercept: NotRequired[float]
    slope_excursion: NotRequired[float]
    slope_limit: NotRequired[float]
    window: Optional[list[int]]


# "pass" is a Python keyword: these two are declared in the functional form.
PassVerdict = TypedDict(
    "PassVerdict",
    {"pass": str, "steady": bool, "steady_round": Optional[int], "window": Optional[list[int]]},
)
PassVerdict.__doc__ = """One pass of a test with several (Throughput: one per block size) in
steady.json's ``passes``: its name, verdict, the round it became steady at and its window."""

SteadyState = TypedDict(
    "SteadyState",
    {
        "rule": str,
        "min_rounds": int,
        "max_rounds": int,
        "steady": bool,
        "steady_round": Optional[int],
        "window": Optional[list[int]],
        "variables": list[SteadyVariable],
        "pass": NotRequired[str],
        "first_round": NotRequired[int],
        "passes": NotRequired[list[PassVerdict]],
    },
)
SteadyState.__doc__ = """steady.json (steady.evaluate, testrun.TestRun.rounds): the rule, the
rounds bounds, the verdict, the round steady state was reached at (None when not steady)
and the common window of every tracking variable. A pass's own evaluation also names the
pass and its first judged round (after saturation rounds); a test of several passes holds
every pass's variables and ``passes``."""


# --- a test's result (result.json) -----------------------------------------------------------


class XsrGroup(TypedDict):
    """One XSR access group (table.csv, result.json ``extra.access_groups``): its stimulus,
    segments and stimulus time (s), throughput (MB/s, 10^6 B/s) and IOPS at its end (the mean
    of its last 5 segments), its peak mean and peak maximum response time (µs)."""

    access_group: str
    stimulus: str
    segments: int
    duration_s: float
    tp_end_mb_s: float
    iops_end: float
    art_peak_us: float
    mrt_peak_us: float


class RthPoint(TypedDict):
    """A CBW/DIRTH response-time histogram point (result.json ``extra.rth``): which point
    (max, mid, min), its threads x queue depth, the element measured, and that run's IOPS
    and completion latency (µs; None when it did no I/O)."""

    point: str
    tc: int
    qd: int
    element: str
    iops: float
    lat_mean_us: Optional[float]
    lat_max_us: Optional[float]
    lat_p99_us: Optional[float]
    lat_p99_9_us: Optional[float]
    lat_p99_99_us: Optional[float]


class TestExtra(TypedDict, total=False):
    """What a test concludes beyond its status (result.json ``extra``), by test:
    every test with WIPC: ``wipc``; WSAT: ``steady`` (with --wsat-stop-steady) and ``stop``
    (why it stopped); HIR: ``pre_steady``, ``pre_window``, ``pre_fills`` (drive fills before
    the bursts), ``baseline_iops`` (the pre-HIR window's average IOPS), ``bursts`` (the 5 s
    write bursts run, A and C: result.json ``rounds_run`` counts the preconditioning rounds); the curve:
    ``pre_steady``; XSR: ``access_groups``, ``recovery_s`` (from AG3's start to 90 % of AG1's
    final throughput; None if never); CBW/DIRTH: ``pc_steady``, ``di_steady``, ``points``
    (point → (threads, queue depth)) and ``rth``. ``notes``: sentences for the report;
    ``table_error``: why table.csv could not be written (a partial run)."""

    wipc: list[WipcRun]
    table_error: str
    steady: WindowCheckDoc
    stop: str
    pre_steady: bool
    pre_window: Optional[list[int]]
    pre_fills: Optional[float]
    baseline_iops: Optional[float]
    bursts: int
    notes: list[str]
    access_groups: list[XsrGroup]
    recovery_s: Optional[float]
    pc_steady: bool
    di_steady: bool
    points: dict[str, tuple[int, int]]
    rth: list[RthPoint]


class TestSettings(TypedDict):
    """A test's settings (result.json ``settings``; suite.Runner.test_settings): threads and
    queue depth, round length (s), rounds bounds, purge method, and the test's own: block
    sizes (bytes), R/W mixes, WIPC; WSAT's segment (s) and stop conditions (drive fills,
    stimulus seconds, steady); HIR's repetitions, wait states (s), burst (s), drive fills
    before it; the curve's thread counts, queue depths and read %; XSR's access groups and
    their hours (full drive, and as run on a 1/N twin), segment (s); CBW/DIRTH's pattern,
    distribution, mix, the matrix's thread counts and queue depths, preconditioning
    intervals and their length (s), pre-writes (s), the histogram run (s) and the max
    point's mean response-time limit (µs)."""

    tc: int
    qd: int
    round_s: float
    min_rounds: int
    max_rounds: int
    purge: str
    bs_bytes: NotRequired[list[int]]
    mixes: NotRequired[list[str]]
    segment_s: NotRequired[float]
    stop_fills: NotRequired[float]
    stop_time_s: NotRequired[float]
    stop_steady: NotRequired[bool]
    steady_min_fills: NotRequired[float]
    reps: NotRequired[int]
    waits_s: NotRequired[list[float]]
    burst_s: NotRequired[float]
    pre_fills: NotRequired[float]
    jobs: NotRequired[list[int]]
    qd_list: NotRequired[list[int]]
    read_pct: NotRequired[int]
    access_groups: NotRequired[list[str]]
    hours_full_drive: NotRequired[list[float]]
    hours_run: NotRequired[list[float]]
    pattern: NotRequired[str]
    distribution: NotRequired[str]
    mix: NotRequired[str]
    tc_list: NotRequired[list[int]]
    pc_intervals: NotRequired[int]
    pc_interval_s: NotRequired[float]
    prewrite_s: NotRequired[float]
    rth_prewrite_s: NotRequired[float]
    rth_s: NotRequired[float]
    art_limit_us: NotRequired[float]
    wipc: NotRequired[str]


class TestResult(TypedDict):
    """result.json (testrun.TestRun.result_doc): the test, its title and status with a
    one-line message, rounds (segments) run, the measurement window, the purge method, its
    settings, wall-clock and stimulus seconds (simulated on a twin), bytes written since the
    last purge, and what it concludes (``extra``)."""

    test: str
    title: str
    status: TestStatus
    message: str
    rounds_run: int
    window: Optional[list[int]]
    purge: str
    settings: TestSettings
    wall_s: float
    sim_s: float
    bytes_written_total: int
    extra: TestExtra


class NoResult(TypedDict):
    """The result of a test that wrote no result.json (not run, or its process died): {}."""


# --- pts.json --------------------------------------------------------------------------------


class DeviceExtra(TypedDict, total=False):
    """The device's other facts in the report header (pts.json ``device.extra``), by target.
    A twin (and a twin's NBD export): the indirection unit (``iu_bytes``: the drive maps
    and programs whole IUs, so a write that is not whole IUs costs a read-modify-write); a
    twin: namespace, power state (number and text), image folder, its seed; with a namespace
    smaller than the drive, the drive's capacity (TNVMCAP) and what no namespace holds
    (UNVMCAP), bytes. Real targets:
    fio's version and path, the purge asked for; an NBD export's name, description, server,
    block sizes (bytes) and what it can do (nbdinfo's values); a block device's sysfs folder,
    whether it is a partition or rotational, its discard limit (bytes), write cache and
    scheduler as the kernel reports them, a loop device's backing file; a file's path."""

    iu_bytes: int
    drive_capacity_bytes: int
    unallocated_bytes: int
    namespace: int
    power_state: int
    power_state_desc: str
    image: str
    seed: Optional[int]
    fio: str
    fio_path: str
    purge_requested: str
    export_name: str
    description: str
    served_by: str
    block_size_preferred: Optional[int]
    block_size_maximum: Optional[int]
    can_trim: bool
    can_flush: Optional[bool]
    can_multi_conn: Optional[bool]
    tls: bool
    path: str
    sysfs: str
    partition: bool
    discard_max_bytes: int
    rotational: bool
    write_cache: str
    scheduler: str
    backing_file: str


class SpecDoc(TypedDict):
    """What a twin is made from (pts.json ``device.spec``): ``origin`` "preset" (its values are
    the preset's) or "spec file" (``create --spec``: an edited copy of a preset, a spec
    ``calibrate --out`` wrote, or a preset of another ssdtwin), the name it carries, and the
    digest of its values at full scale (drive.spec_digest; sweep's image cache names a preset
    by the same digest)."""

    origin: str
    name: str
    digest: str


class DeviceDoc(TypedDict):
    """The device under test (pts.json ``device``; target.DeviceInfo as JSON): its kind
    (twin, nbd, device, file), what the user named, identity, tested capacity and LBA size
    (bytes), NAND and interface, a twin's preset (only when its spec is that preset's: "" for
    a spec file; files from before ``spec`` held the spec's name here whatever it was) and
    scale ("1/N"), whether it is simulated, and a twin's ``spec``."""

    kind: str
    uri: str
    vendor: str
    model: str
    serial: str
    firmware: str
    capacity_bytes: int
    lba_bytes: int
    nand: str
    interface: str
    preset: str
    scale: str
    simulated: bool
    extra: DeviceExtra
    spec: NotRequired[SpecDoc]


class PlatformDoc(TypedDict):
    """The test platform (pts.json ``platform``): host, OS, CPU and its count, Python, the
    test software and fio (``ssdtwin fio (simulated time)`` on a twin)."""

    host: str
    os: str
    cpu: str
    cpus: Optional[int]
    python: str
    software: str
    fio: str


class TcQd(TypedDict):
    """A test's threads (tc), queue depth per thread (qd) and outstanding I/Os (oio = tc x qd)."""

    tc: int
    qd: int
    oio: int


class SettingsDoc(TypedDict):
    """Every setting of a run (settings.Settings as JSON: pts.json ``settings.all``), in
    the dataclass's units: durations in seconds, block sizes in bytes, mixes and read
    percentages in %, the response-time limit in µs; ``tc_qd`` per test."""

    round_s: float
    min_rounds: int
    max_rounds: int
    iops_bs: tuple[int, ...]
    iops_mixes: tuple[int, ...]
    tp_bs: tuple[int, ...]
    lat_bs: tuple[int, ...]
    lat_mixes: tuple[int, ...]
    tc_qd: dict[str, TcQd]
    wsat_fills: float
    wsat_max_time_s: float
    wsat_segment_s: Optional[float]
    wsat_stop_steady: bool
    wsat_min_fills: float
    hir_reps: int
    hir_waits_s: tuple[float, ...]
    hir_burst_s: float
    hir_pre_fills: float
    curve_jobs: tuple[int, ...]
    curve_qd: tuple[int, ...]
    xsr_hours: tuple[float, ...]
    xsr_segment_s: Optional[float]
    di_tc: tuple[int, ...]
    di_qd: tuple[int, ...]
    di_pc_intervals: int
    di_prewrite_s: float
    di_rth_prewrite_s: float
    di_rth_s: float
    di_art_limit_us: float
    dirth_bs: int
    dirth_mix: int
    purge: str
    seed: int
    converge: bool


class RunSettings(TypedDict):
    """The run's settings in the report header (pts.json ``settings``): round length (s),
    rounds bounds, the purge (the method used once resolved), the PTS's fixed conditions
    (active range %, write cache, data pattern, WIPC, power state), TC/QD per test, the
    seed, every setting (``all``); with --jobs, the number of tests at once and what
    happened to the image."""

    round_s: float
    min_rounds: int
    max_rounds: int
    purge: str
    active_range_pct: int
    write_cache: str
    data_pattern: str
    wipc: str
    power_state: str
    tc_qd: dict[str, TcQd]
    seed: int
    all: SettingsDoc
    jobs: NotRequired[int]
    image: NotRequired[str]


class ManifestTest(TypedDict):
    """A test in pts.json ``tests``: status, its folder, title, wall-clock and stimulus
    seconds so far (stimulus: simulated on a twin), once it ended its one-line message, the
    rounds run (``rounds_run``, as in result.json: WSAT's and XSR's segments, HIR's and the
    curve's preconditioning rounds) and HIR's bursts (``bursts``, A and C). Files from before
    the counts were recorded lack them."""

    status: TestStatus
    dir: str
    title: str
    wall_s: float
    sim_s: float
    message: NotRequired[str]
    rounds_run: NotRequired[int]
    bursts: NotRequired[int]


class Manifest(TypedDict):
    """pts.json (suite.Runner.start_manifest, rewritten after every round): format and
    version, whether the run completed or was interrupted, start and end (UTC ISO 8601),
    wall-clock seconds, the device, platform and settings, and every test asked for."""

    format: str
    version: int
    complete: bool
    interrupted: bool
    started: str
    finished: Optional[str]
    wall_s: float
    device: DeviceDoc
    platform: PlatformDoc
    settings: RunSettings
    tests: dict[str, ManifestTest]


# --- the tables (table.csv) --------------------------------------------------------------------

IopsTableRow = dict[str, Union[int, str, Optional[float]]]
"""A row of the IOPS test's table.csv: ``bs_bytes``, ``bs`` (its title), and the mean IOPS
of each R/W mix, a column per mix label ("65/35"; the mixes are a setting)."""


class TpTableRow(TypedDict):
    """A row of the Throughput test's table.csv: block size (bytes, title), the read and
    write passes' mean bandwidth over the window in MB/s (10^6 B/s) and MiB/s (2^20 B/s)."""

    bs_bytes: int
    bs: str
    read_mb_s: Optional[float]
    write_mb_s: Optional[float]
    read_mib_s: Optional[float]
    write_mib_s: Optional[float]


class LatTableRow(TypedDict):
    """A row of the Latency test's table.csv: block size (bytes, title) and R/W mix; the
    window's I/O-weighted mean, maximum and 99.99th percentile response time in µs, over
    both directions and per direction (None for a direction without I/O)."""

    bs_bytes: int
    bs: str
    mix: str
    mean_us: Optional[float]
    max_us: Optional[float]
    p99_99_us: Optional[float]
    read_mean_us: Optional[float]
    read_max_us: Optional[float]
    read_p99_99_us: Optional[float]
    write_mean_us: Optional[float]
    write_max_us: Optional[float]
    write_p99_99_us: Optional[float]


class WsatTableRow(RoundRow):
    """A row of WSAT's table.csv: the segment's round row and its end on the test clock (s)."""

    t_s: float


class HirTableRow(RoundRow):
    """A row of HIR's table.csv: the run's round row, its iteration (the round for the
    pre-HIR rounds, else the count within its wait state and phase) and its end (s)."""

    iteration: Optional[int]
    t_s: float


class DiTableRow(TypedDict):
    """A row of the CBW/DIRTH demand-intensity matrix (table.csv): threads, queue depth and
    outstanding I/Os; the window's mean IOPS (total, read, write), I/O-weighted mean, maximum
    and mean 99th/99.9th percentile response time (µs); ``point`` marks the histogram points
    (max, mid, min; "" for the others) in table.csv."""

    numjobs: int
    iodepth: int
    oio: int
    iops: Optional[float]
    read_iops: Optional[float]
    write_iops: Optional[float]
    lat_mean_us: Optional[float]
    lat_max_us: Optional[float]
    lat_p99_us: Optional[float]
    lat_p99_9_us: Optional[float]
    point: NotRequired[str]


# --- what a run returns ----------------------------------------------------------------------


class TestOutput(TypedDict):
    """One test in ``-o json``: its status, result.json and table.csv's rows (None when the
    test wrote no table)."""

    status: str
    result: Union[TestResult, NoResult, None]
    table: Optional[list[TableRecord]]


class RunOutput(TypedDict):
    """``ssdtwin pts run -o json`` (folder.PtsResult.to_json): the report folder, pts.json and
    every test's output."""

    folder: str
    manifest: Manifest
    tests: dict[str, TestOutput]
