"""The types the binding (``ssdtwin._core``) returns and takes beyond a fio run's (those are in
fio/contract.py): one TypedDict per Rust structure, named as in Rust, with the crate file that
defines it. pythonize converts them (structs and maps become dicts, sequences lists,
fixed-length arrays tuples). tests/test_binding_types.py checks real values from the
binding against them, so a field added to or dropped from a Rust structure fails there.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Optional, TypedDict

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
    intel_smart_add: NotRequired[dict[str, Any]]
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


# --- host stacks (host/tier.rs, host/media.rs, engine/stack.rs) -------------------------------


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
    policy: str
    capacity_bytes: int
    high_watermark_pct: int
    low_watermark_pct: int
    destage_concurrency: int
    iu_bytes: int
    drive_bytes: int
    stripe_bytes: int
    band_bytes: int
    host_op_pct: int
    area_bytes: int


class Tier(TypedDict):
    config: TierConfig
    counters: TierCounters
    next_id: int
    # The policy's own state ({"IuFill": ...} or {"Log": ...}): the core's alone to read.
    state: dict[str, Any]


class StackState(TypedDict):
    """A host stack's state (engine/stack.rs ``Stack``) in JSON's data model (map keys are
    strings): Python keeps it in the stack image's state.json and hands it back."""

    media: dict[str, Any]
    tier: Tier


class StackSummary(TypedDict):
    """Sizes and traffic of a stack, from the tier's own accounting (the binding's
    ``StackSummary``)."""

    user_bytes: int
    resident_bytes: int
    drive_write_bytes: int
