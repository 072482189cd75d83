"""The types the binding (``ssdtwin._core``) returns and takes beyond a fio run's (those are in
fio/contract.py): one TypedDict per Rust structure, named as in Rust, with the crate file that
defines it. pythonize converts them (structs and maps become dicts, sequences lists,
fixed-length arrays tuples). tests/test_binding_types.py checks real values from the
binding against them, so a field added to or dropped from a Rust structure fails there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, NotRequired, Optional, Required, TypedDict

from ._core import HostStack

if TYPE_CHECKING:  # the fio package is imported only where a run needs it (drive.py)
    from ssdtwin.fio.contract import CloneOut

# --- a drive (image.rs, nvme/identify.rs, nvme/mod.rs, ftl) --------------------------------------


class Manifest(TypedDict):
    format: str
    version: int
    preset: str
    scale: int
    seed: int


class FtlCounters(TypedDict):
    host_write_bytes: int
    host_read_bytes: int
    host_trim_ius: int
    host_programmed_ius: int
    gc_programmed_ius: int
    parity_programmed_ius: NotRequired[int]
    nand_read_host_bytes: int
    nand_read_rmw_bytes: int
    nand_read_gc_bytes: int
    rmw_ius: int
    buffer_merges: int
    buffer_read_hits: int
    unmapped_reads: int
    erases: int
    gc_victims: int
    foreground_gc_victims: int
    overhead_sample_ius: int
    overhead_samples: int


class FtlFingerprint(TypedDict):
    l2p_xxh3: str
    p2l_xxh3: str
    counters: FtlCounters


class PowerStateDesc(TypedDict):
    """One power state descriptor as nvme-cli 2.4 prints it (flags: bit 0 MXPS, bit 1 NOPS)."""

    max_power: int
    flags: int
    entry_lat: int
    exit_lat: int
    read_tput: int
    read_lat: int
    write_tput: int
    write_lat: int
    idle_power: int
    idle_scale: int
    active_power: int
    active_power_work: int
    active_scale: int


class IdCtrl(TypedDict):
    """Identify Controller: every field nvme-cli 2.4 prints, in its order (nvme/identify.rs)."""

    vid: int
    ssvid: int
    sn: str
    mn: str
    fr: str
    rab: int
    ieee: int
    cmic: int
    mdts: int
    cntlid: int
    ver: int
    rtd3r: int
    rtd3e: int
    oaes: int
    ctratt: int
    rrls: int
    cntrltype: int
    fguid: str
    crdt1: int
    crdt2: int
    crdt3: int
    nvmsr: int
    vwci: int
    mec: int
    oacs: int
    acl: int
    aerl: int
    frmw: int
    lpa: int
    elpe: int
    npss: int
    avscc: int
    apsta: int
    wctemp: int
    cctemp: int
    mtfa: int
    hmpre: int
    hmmin: int
    tnvmcap: int
    unvmcap: int
    rpmbs: int
    edstt: int
    dsto: int
    fwug: int
    kas: int
    hctma: int
    mntmt: int
    mxtmt: int
    sanicap: int
    hmminds: int
    hmmaxd: int
    nsetidmax: int
    endgidmax: int
    anatt: int
    anacap: int
    anagrpmax: int
    nanagrpid: int
    pels: int
    domainid: int
    megcap: int
    sqes: int
    cqes: int
    maxcmd: int
    nn: int
    oncs: int
    fuses: int
    fna: int
    vwc: int
    awun: int
    awupf: int
    icsvscc: int
    nwpc: int
    acwu: int
    ocfs: int
    sgls: int
    mnan: int
    maxdna: int
    maxcna: int
    subnqn: str
    ioccsz: int
    iorcsz: int
    icdoff: int
    fcatt: int
    msdbd: int
    ofcs: int
    psds: list[PowerStateDesc]
    vs_dram_ns: NotRequired[dict[str, int]]


class LbaFormatDesc(TypedDict):
    ms: int
    ds: int
    rp: int


class IdNs(TypedDict):
    """Identify Namespace: every field nvme-cli 2.4 prints, in its order, then the twin's vs_ fields."""

    nsze: int
    ncap: int
    nuse: int
    nsfeat: int
    nlbaf: int
    flbas: int
    mc: int
    dpc: int
    dps: int
    nmic: int
    rescap: int
    fpi: int
    dlfeat: int
    nawun: int
    nawupf: int
    nacwu: int
    nabsn: int
    nabo: int
    nabspf: int
    noiob: int
    nvmcap: int
    nsattr: int
    nvmsetid: int
    npwg: int
    npwa: int
    npdg: int
    npda: int
    nows: int
    mssrl: int
    mcl: int
    msrc: int
    nulbaf: int
    anagrpid: int
    endgid: int
    eui64: str
    nguid: str
    lbafs: list[LbaFormatDesc]
    vs_dram: NotRequired[int]
    vs_mek_id: str


class NamespaceRow(TypedDict):
    nsid: int
    nsze: int
    ncap: int
    nuse: int
    lba_bytes: int
    flbas: int
    attached: bool
    write_protect: int
    nmic: int
    bytes: int
    dram: bool
    nvmsetid: int
    ms: int
    pi: int


class SmartLog(TypedDict):
    critical_warning: int
    temperature: int
    avail_spare: int
    spare_thresh: int
    percent_used: int
    endurance_grp_critical_warning_summary: int
    data_units_read: int
    data_units_written: int
    host_read_commands: int
    host_write_commands: int
    controller_busy_time: int
    power_cycles: int
    power_on_hours: int
    unsafe_shutdowns: int
    media_errors: int
    num_err_log_entries: int
    warning_temp_time: int
    critical_comp_time: int
    thm_temp1_trans_count: int
    thm_temp2_trans_count: int
    thm_temp1_total_time: int
    thm_temp2_total_time: int


class IntelSmartAdd(TypedDict):
    """nvme/logs.rs: what Intel's additional SMART log (0xCA) counts, in 32 MiB units."""

    nand_bytes_written_sectors: int
    host_bytes_written_sectors: int


class VendorLog(TypedDict):
    host_write_bytes: int
    host_read_bytes: int
    nand_write_bytes: int
    nand_write_host_bytes: int
    nand_write_gc_bytes: int
    nand_write_parity_bytes: NotRequired[int]
    nand_read_bytes: int
    nand_read_rmw_bytes: int
    nand_read_gc_bytes: int
    waf: float
    rmw_ius: int
    buffer_merges: int
    trimmed_ius: int
    gc_victims: int
    foreground_gc_victims: int
    superblock_erases: int
    erase_count_min: int
    erase_count_max: int
    erase_count_avg: float
    pe_cycles_rated: int
    superblocks: int
    free_superblocks: int
    superblock_bytes: int
    valid_bytes: int
    buffered_bytes: int
    iu_bytes: int
    gc_overhead_superblocks: float
    gc_overhead_samples: int
    gc_overhead_sample_ius: float
    intel_smart_add: NotRequired[IntelSmartAdd]
    dram_write_bytes: int
    dram_read_bytes: int
    dram_flush_bytes: int
    nand_write_sanitize_bytes: NotRequired[int]


class FtlInfo(TypedDict):
    iu_bytes: int
    superblocks: int
    ius_per_superblock: int
    superblock_bytes: int
    gc_overhead_superblocks: float
    logical_ius: int
    chunk_ius: int
    buffer_slots: int
    raw_bytes: int
    program_unit_bytes: int
    dies: int
    nvm_sets: int
    partitions: int
    data_pool_bytes: int
    maps_loaded: bool


class QosRow(TypedDict):
    nsid: int
    read_bytes_per_s: int
    write_bytes_per_s: int
    iops: int
    sq_priority: str


class ReadSummary(TypedDict):
    nand_ius: int
    buffer_ius: int
    unmapped_ius: int


class WafMeasurement(TypedDict):
    """nvme/waf.rs: a WAF over a window between two vendor logs (docs/models.md, "Measuring WAF")."""

    basis: Literal["timed", "fast_forward", "window"]
    verdict: Literal["steady", "insufficient", "no_writes"]
    waf: Optional[float]
    waf_window_raw: Optional[float]
    host_bytes: int
    nand_bytes: int
    gc_victims: int
    superblocks: int
    gc_cycles: float
    namespace_bytes: int
    namespace_passes: float
    buffered_change_bytes: int


class PreconditionReport(TypedDict):
    nsid: int
    pattern: str
    block_bytes: int
    seed: int
    host_bytes: int
    ios: int
    nand_bytes: int
    waf: float
    interrupted: bool


class Recovery(TypedDict):
    """image/recovery.rs: what opening did with a journal a killed server left."""

    action: Literal["replayed", "replayed_in_memory", "discarded", "repaired"]
    journal_generation: Optional[int]
    image_generation: int
    records: int
    ignored_bytes: int
    dropped_records: int
    kept_copy: Optional[str]
    detail: str


class PreconditionTouches(TypedDict):
    """The binding's ``Touches``: a precondition's report and the FTL's random map accesses."""

    report: PreconditionReport
    host_l2p: int
    gc_checks: int


# --- log pages and vendor views (nvme/*.rs; nvme-cli's JSON names where it has them) ----------


class NvmSetEntry(TypedDict):
    nvmset_id: int
    endurance_group_id: int
    random_4k_read_typical: int
    optimal_write_size: int
    total_nvmset_cap: int
    unalloc_nvmset_cap: int


# nvme/sets.rs NvmSetList: Identify CNS 04h (the list's key is nvme-cli's "NVMSet").
class NvmSetList(TypedDict):
    nid: int
    NVMSet: list[NvmSetEntry]


class EnduranceGroupLog(TypedDict):
    """nvme/sets.rs: log page 09h."""

    critical_warning: int
    endurance_group_features: int
    avl_spare: int
    avl_spare_threshold: int
    percent_used: int
    domain_identifier: int
    endurance_estimate: int
    data_units_read: int
    data_units_written: int
    media_units_written: int
    host_read_cmds: int
    host_write_cmds: int
    media_data_integrity_err: int
    num_err_info_log_entries: int
    total_end_grp_cap: int
    unalloc_end_grp_cap: int


class ErrorLogEntry(TypedDict):
    """nvme/logs.rs: one entry of log page 01h."""

    error_count: int
    sqid: int
    cmdid: int
    status_field: int
    phase_tag: int
    parm_error_location: int
    lba: int
    nsid: int
    vs: int
    trtype: int
    csi: int
    opcode: int
    cs: int
    trtype_spec_info: int
    log_page_version: int


class SanitizeLogPage(TypedDict):
    """nvme/sanitize.rs: log page 81h as the drive keeps it (a live.json's ``sanitize_log``)."""

    sprog: int
    sstat: int
    scdw10: int
    eto: int
    etbe: int
    etce: int
    etond: int
    etbend: int
    etcend: int
    etpvds: int
    ssi: int


class SanitizeStatus(TypedDict):
    """nvme/sanitize.rs ``SstatJson``."""

    media_verification_canceled: int
    global_erased: int
    no_cmplted_passes: int
    status: str


class SanitizeStateInformation(TypedDict):
    """nvme/sanitize.rs ``SsiJson``."""

    sanitize_state: str


class SanitizeLog(TypedDict):
    """nvme/sanitize.rs ``SanitizeLogJson``: log page 81h with nvme-cli's JSON names."""

    sprog: int
    sstat: SanitizeStatus
    cdw10_info: int
    time_over_write: int
    time_block_erase: int
    time_crypto_erase: int
    time_over_write_no_dealloc: int
    time_block_erase_no_dealloc: int
    time_crypto_erase_no_dealloc: int
    time_post_verification_dealloc: int
    sanitize_state_information: SanitizeStateInformation


class SanitizeTimes(TypedDict):
    """nvme/sanitize.rs: how long each sanitize action takes in one power state."""

    crypto_erase_ns: int
    block_erase_ns: int
    overwrite_pass_ns: int
    parallel_planes: int


class PlmSet(TypedDict):
    """nvme/plm.rs: one NVM Set's Predictable Latency Mode state (the vendor view)."""

    enabled: bool
    window: int
    since_ns: int
    event_type: int
    start_avail_ius: int
    start_host_write_bytes: int
    consumed_ius: int
    ended_by: NotRequired[str]
    last_dtwin_ns: int


class PredLatLog(TypedDict):
    """nvme/plm.rs: log page 0Ah of one NVM Set."""

    nvmset_id: int
    status: int
    event_type: int
    dtwin_reads_typical: int
    dtwin_writes_typical: int
    dtwin_time_maximum: int
    ndwin_time_minimum_high: int
    ndwin_time_minimum_low: int
    dtwin_reads_estimate: int
    dtwin_writes_estimate: int
    dtwin_time_estimate: int


class PredLatAggEntry(TypedDict):
    entry: int


class PredLatEventAgg(TypedDict):
    """nvme/plm.rs: log page 0Bh."""

    num_entries_avail: int
    list_of_entries: list[PredLatAggEntry]


class AnaNsid(TypedDict):
    nsid: int


# nvme/ana.rs AnaDesc and AnaLog: log page 0Ch with nvme-cli's JSON names.
class AnaDesc(TypedDict):
    grpid: int
    nnsids: int
    chgcnt: int
    state: str
    NSIDS: list[AnaNsid]


AnaLog = TypedDict("AnaLog", {"chgcnt": int, "ngrps": int, "ANA DESC LIST ": list[AnaDesc]})


class LbaStatusDesc(TypedDict):
    dslba: int
    nlb: int


class LbaStatus(TypedDict):
    """nvme/lbastatus.rs: Get LBA Status."""

    nlsd: int
    cmpc: int
    descs: list[LbaStatusDesc]


class SourcedValue(TypedDict):
    """spec/mod.rs ``Sourced<T>`` of a ``[timing]`` parameter: a number (or a flag) and where
    it comes from."""

    value: int | float | bool
    source: str


# A drive spec's [timing] table (spec/mod.rs ``TimingSpec``) by parameter name: what
# calibration and what-if runs vary, one named parameter at a time.
TimingTable = dict[str, SourcedValue]


# --- host stacks (host/tier.rs, host/media.rs, engine/stack.rs) -------------------------------


class SourcedInt(TypedDict):
    """spec/mod.rs ``Sourced<u64>``: a number with where it comes from."""

    value: int
    source: str


class SourcedBool(TypedDict):
    value: bool
    source: str


class MediaSpec(TypedDict):
    """host/media.rs: a fast medium a host stack's tier lives on (``media_presets``)."""

    name: str
    capacity_bytes_max: SourcedInt
    write_bytes_per_s: SourcedInt
    read_bytes_per_s: SourcedInt
    write_latency_ns: SourcedInt
    read_latency_ns: SourcedInt
    durable: SourcedBool


class StackFileTier(TypedDict):
    capacity_bytes: int
    high_watermark_pct: int
    low_watermark_pct: int
    destage_concurrency: int
    stripe_bytes: int
    band_bytes: int
    host_op_pct: int
    area_bytes: int


class StackFile(TypedDict):
    """A stack image's stack.toml as ``stack_toml`` reads it (the binding's ``StackFile``)."""

    format: str
    version: int
    drive: str
    namespace: int
    media: str
    policy: str
    tier: StackFileTier


class TierCounters(TypedDict):
    host_write_bytes: int
    host_read_bytes: int
    tier_write_bytes: int
    bypass_bytes: int
    overwrite_hit_bytes: int
    read_hit_bytes: int
    destage_bytes: int
    evict_bytes: int
    evictions: int
    dropped_bytes: int
    gc_read_bytes: int
    gc_write_bytes: int
    pad_bytes: int
    stalls: int


class TierConfig(TypedDict):
    """host/tier.rs: a tier's parameters (``stack_new``'s input; ``area_bytes`` defaults to 0)."""

    policy: Literal["iu-fill", "log"]
    capacity_bytes: int
    high_watermark_pct: int
    low_watermark_pct: int
    destage_concurrency: int
    iu_bytes: int
    drive_bytes: int
    stripe_bytes: int
    band_bytes: int
    host_op_pct: int
    area_bytes: NotRequired[int]


class Tier(TypedDict):
    config: TierConfig
    counters: TierCounters
    next_id: int
    # The policy's own state ({"IuFill": ...} or {"Log": ...}): the core's alone to read.
    state: dict[str, Any]


class StackState(TypedDict):
    """A host stack's state (engine/stack.rs ``HostStack``) in JSON's data model (map keys
    are strings): ``HostStack.to_state()``, what a stack image's state.json holds under
    ``stack`` (``HostStack.from_state`` reads it back)."""

    media: MediaSpec
    tier: Tier


class StackSummary(TypedDict):
    """Sizes and traffic of a stack, from the tier's own accounting (the binding's
    ``StackSummary``)."""

    user_bytes: int
    resident_bytes: int
    drive_write_bytes: int


# --- a served drive (ssdtwin-serve live.rs) ----------------------------------------------------


class ExportRow(TypedDict):
    name: str
    nsid: int
    size: int
    read_only: bool


class NsSummary(TypedDict):
    """live.rs: one export's share of a serving session (``SessionSummary.namespaces``)."""

    nsid: int
    export: str
    reads: int
    writes: int
    trims: int
    write_zeroes: int
    read_bytes: int
    write_bytes: int
    trim_bytes: int
    write_zeroes_bytes: int


class SessionSummary(TypedDict):
    """live.rs: what a serving session did (live.json's ``stats``)."""

    seconds: float
    pace: str
    reads: int
    writes: int
    trims: int
    write_zeroes: int
    flushes: int
    read_bytes: int
    write_bytes: int
    errors: int
    syncs: int
    connections: int
    requests: int
    error_replies: int
    protocol_errors: int
    replies_paced: int
    replies_late: int
    late_ns_max: int
    late_ns_mean: int
    host_write_bytes: int
    nand_write_bytes: int
    buffered_bytes: int
    buffered_change_bytes: int
    waf: float
    waf_measurement: Optional[WafMeasurement]
    idle_gc_moved_ius: int
    block_status: int
    read_latency_mean_us: Optional[float]
    write_latency_mean_us: Optional[float]
    namespaces: list[NsSummary]
    commits: int
    journal_records: int
    generation: int
    failure: Optional[str]


class StoppedSummary(TypedDict, total=False):
    """live.rs ``StoppedSummary``, what ``serve`` returns: the session's summary (absent when
    the server stopped before it had one), how it stopped, and a served stack as it stopped.

    The fields repeat ``SessionSummary``'s on purpose: Rust flattens an ``Option`` of it, so
    here they are all optional, and a TypedDict cannot inherit keys with another totality.
    Both are checked against the binding's real values (tests/test_binding_types.py)."""

    seconds: float
    pace: str
    reads: int
    writes: int
    trims: int
    write_zeroes: int
    flushes: int
    read_bytes: int
    write_bytes: int
    errors: int
    syncs: int
    connections: int
    requests: int
    error_replies: int
    protocol_errors: int
    replies_paced: int
    replies_late: int
    late_ns_max: int
    late_ns_mean: int
    host_write_bytes: int
    nand_write_bytes: int
    buffered_bytes: int
    buffered_change_bytes: int
    waf: float
    waf_measurement: Optional[WafMeasurement]
    idle_gc_moved_ius: int
    block_status: int
    read_latency_mean_us: Optional[float]
    write_latency_mean_us: Optional[float]
    namespaces: list[NsSummary]
    commits: int
    journal_records: int
    generation: int
    failure: Optional[str]
    stopped_by: Required[str]
    stack: HostStack


class ServeInfo(TypedDict):
    """live.rs: what ``serve`` hands its ``ready`` callback once serving."""

    dir: str
    pace: str
    uris: list[str]
    exports: list[str]
    metrics: Optional[str]
    recovery: Optional[Recovery]
    pid: int
    warnings: list[str]


class LiveSnapshot(TypedDict):
    """live.rs: a server's live.json; the drive's view (nvme/mod.rs ``ControllerView``) is
    flattened into it."""

    format: str
    version: int
    pid: int
    serving: bool
    time_unix_ms: int
    started_unix_ms: int
    generation: int
    pace: str
    exports: list[ExportRow]
    uris: list[str]
    id_ctrl: IdCtrl
    id_ns: dict[str, IdNs]
    id_ns_common: NotRequired[IdNs]  # Identify with NSID FFFFFFFFh (Namespace Management)
    namespaces: list[NamespaceRow]
    smart_log: SmartLog
    vendor_log: VendorLog
    id_nvmset: NotRequired[NvmSetList]
    endurance_logs: NotRequired[dict[str, EnduranceGroupLog]]
    error_log: list[ErrorLogEntry]
    sanitize_log: SanitizeLogPage
    stats: SessionSummary


# --- clusters (cluster/spec.rs, layout.rs, out.rs) ----------------------------------------------


class SourcedCount(TypedDict):
    """spec/mod.rs ``Sourced<u32>``."""

    value: int
    source: str


class ClusterNetwork(TypedDict):
    """cluster/spec.rs ``Network``: a lab's ``[network]`` table."""

    name: str
    link_bits_per_s: SourcedCount
    mtu_bytes: SourcedCount
    frame_overhead_bytes: SourcedCount
    propagation_ns: SourcedCount
    switch_latency_ns: SourcedCount
    tcp_ip_header_bytes: SourcedCount
    roce_header_bytes: SourcedCount
    roce_mtu_bytes: SourcedCount


class ClusterInitOptions(TypedDict, total=False):
    """cluster/spec.rs ``InitOptions`` (``cluster_init``'s input): a missing key takes the
    brief's lab."""

    stack: str
    nodes: int
    drives_per_node: int
    drive: str
    scale: int
    clients: int
    replicas: int
    network: str
    volume_bytes: int
    seed: int
    ceph_version: int
    osds_per_drive: int
    fio_procs_per_client: int
    clients_on_nodes: bool
    rbd_client: str
    msgr_version: int
    node_cores: Optional[SourcedCount]
    client_cores: Optional[SourcedCount]
    osd_cpus: Optional[SourcedCount]
    osd_threads: Optional[int]
    pg_num: Optional[SourcedCount]
    network_table: Optional[ClusterNetwork]


class LayoutInfo(TypedDict):
    """cluster/layout.rs: where a cluster's data lives (``cluster_info``)."""

    stack: str
    drives: int
    drive_bytes: int
    volume_bytes: int
    volumes: int
    used_bytes: list[int]
    pgs: int
    osds_per_drive: int
    placements: list[int]


class DirTotals(TypedDict):
    ios: int
    bytes: int
    iops: float
    lat_mean_ns: float
    lat_p50_ns: int
    lat_p99_ns: int
    lat_max_ns: int


class ResourceUse(TypedDict):
    name: str
    kind: str
    servers: int
    utilisation: float
    mean_in_use: float


class DriveLoad(TypedDict):
    drive: int
    node: int
    reads: int
    writes: int
    commands_per_s: float
    ctrl_load: float
    busy: float
    mean_outstanding: float


class ClusterRun(TypedDict):
    """cluster/out.rs: a cluster run (``cluster_run``): the clients' fio results and the
    cluster's totals, resources and drives over the measured window."""

    stack: str
    seed: int
    scale: int
    clones: list[CloneOut]
    window_ns: tuple[int, int]
    read: DirTotals
    write: DirTotals
    outstanding_mean: float
    resources: list[ResourceUse]
    drives: list[DriveLoad]
    kv_batches: int
    kv_txns: int
    events: int
    simulated_ns: int


# --- the host's memory (ssdtwin-py hwbench.rs) --------------------------------------------------


class RmwReport(TypedDict):
    """hwbench.rs: the random read-modify-write rate of this machine's memory (wall clock)."""

    array_bytes: int
    ops: int
    inflight: int
    seed: int
    threads: int
    fill_seconds: float
    seconds: float
    rmw_per_s: float
    checksum: int
