"""Text renderings in the style of nvme-cli (``-o normal``).

JSON output (``-o json``) is nvme-cli 2.4's (nvmejson.py); these functions only make the
human form look like what storage engineers already read every day.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from .core_types import EnduranceGroupLog, ErrorLogEntry, IdCtrl, IdNs, NamespaceRow, NvmSetList, SanitizeLog, SmartLog, VendorLog
from .nvmejson import CONTROLLER_NAME, PCI_ADDRESS, SUBSYSTEM_NAME


def si_bytes(n: float) -> str:
    """nvme-cli's decimal rendering: ``3.84 TB``."""
    units = ["B", "KB", "MB", "GB", "TB", "PB", "EB"]
    v = float(n)
    i = 0
    while v >= 1000 and i < len(units) - 1:
        v /= 1000
        i += 1
    return f"{v:.2f} {units[i]}"


def _kv(rows: list[tuple[str, Any]], width: int) -> str:
    return "\n".join(f"{k:<{width}}: {v}" for k, v in rows)


def id_ctrl(d: IdCtrl) -> str:
    hexes = {"vid", "ssvid", "cmic", "cntlid", "ver", "oacs", "frmw", "lpa", "oncs", "fna", "vwc", "nwpc", "sqes", "cqes"}
    keys = [
        "vid",
        "ssvid",
        "sn",
        "mn",
        "fr",
        "rab",
        "ieee",
        "cmic",
        "mdts",
        "cntlid",
        "ver",
        "oacs",
        "acl",
        "aerl",
        "frmw",
        "lpa",
        "elpe",
        "npss",
        "wctemp",
        "cctemp",
        "tnvmcap",
        "unvmcap",
        "sqes",
        "cqes",
        "nn",
        "oncs",
        "fna",
        "vwc",
        "awun",
        "awupf",
        "nwpc",
        "mnan",
        "subnqn",
    ]
    if d.get("ctratt"):  # NVM Sets and Endurance Groups (shown by drives that have them)
        keys[keys.index("ver") + 1 : keys.index("ver") + 1] = ["ctratt"]
        keys += ["nsetidmax", "endgidmax"]
        hexes = hexes | {"ctratt"}
    fields: Mapping[str, object] = d  # read by name from the list above
    rows: list[tuple[str, Any]] = []
    for k in keys:
        v = fields[k]
        if k == "ieee":
            v = f"{v:06x}"
        elif k in hexes and isinstance(v, int):
            v = hex(v)
        rows.append((k, v))
    out = ["NVME Identify Controller:", _kv(rows, 10)]
    for i, p in enumerate(d["psds"]):
        mp = p["max_power"] / 100
        op = "non-operational" if p["flags"] & 0x2 else "operational"  # NOPS
        ap = f"{p['active_power'] / 100:.2f}W" if p["active_power"] else "-"
        out.append(
            f"ps {i:5} : mp:{mp:.2f}W {op} enlat:{p['entry_lat']} exlat:{p['exit_lat']} "
            f"rrt:{p['read_tput']} rrl:{p['read_lat']}\n"
            f"{'':10}rwt:{p['write_tput']} rwl:{p['write_lat']} idle_power:- active_power:{ap}"
        )
    return "\n".join(out)


def id_ns(d: IdNs, nsid: int) -> str:
    hexes = {"nsze", "ncap", "nuse"}
    keys = [
        "nsze",
        "ncap",
        "nuse",
        "nsfeat",
        "nlbaf",
        "flbas",
        "mc",
        "dpc",
        "dps",
        "nmic",
        "rescap",
        "fpi",
        "dlfeat",
        "nawun",
        "nawupf",
        "nacwu",
        "nabsn",
        "nabo",
        "nabspf",
        "noiob",
        "nvmcap",
        "npwg",
        "npwa",
        "npdg",
        "npda",
        "nows",
        "anagrpid",
        "nsattr",
        "nvmsetid",
        "endgid",
        "nguid",
        "eui64",
    ]
    fields: Mapping[str, object] = d  # read by name from the list above
    rows = [
        (k, hex(cast(int, v)) if k in hexes else (f"{v:#x}" if k in {"nsfeat", "fpi", "dlfeat"} else v))
        for k, v in ((k, fields[k]) for k in keys)
    ]
    out = [f"NVME Identify Namespace {nsid}:", _kv(rows, 8)]
    for i, f in enumerate(d["lbafs"]):
        use = " (in use)" if i == d["flbas"] & 0xF else ""
        out.append(f"lbaf {i:2} : ms:{f['ms']:<3} lbads:{f['ds']:<2} rp:{f['rp']:#x}{use}")
    return "\n".join(out)


#: nvme-cli's names of the critical warning bits (smart-log -H).
CRITICAL_WARNING_ROWS = (
    "Available Spare[0]",
    "Temp. Threshold[1]",
    "NVM subsystem Reliability[2]",
    "Read-only[3]",
    "Volatile mem. backup failed[4]",
    "Persistent Mem. RO[5]",
)


def smart_log(d: SmartLog, device: str, human: bool = False) -> str:
    t = d["temperature"]
    cw = d["critical_warning"]
    bits = [(f"      {name:<31}", cw >> bit & 1) for bit, name in enumerate(CRITICAL_WARNING_ROWS)] if human else []
    rows = [
        ("critical_warning", hex(cw) if human else cw),
        *bits,
        ("temperature", f"{t - 273} °C ({t} K)"),
        ("available_spare", f"{d['avail_spare']}%"),
        ("available_spare_threshold", f"{d['spare_thresh']}%"),
        ("percentage_used", f"{d['percent_used']}%"),
        ("endurance group critical warning summary", d["endurance_grp_critical_warning_summary"]),
        ("Data Units Read", f"{d['data_units_read']} ({si_bytes(d['data_units_read'] * 512000)})"),
        ("Data Units Written", f"{d['data_units_written']} ({si_bytes(d['data_units_written'] * 512000)})"),
        ("host_read_commands", d["host_read_commands"]),
        ("host_write_commands", d["host_write_commands"]),
        ("controller_busy_time", d["controller_busy_time"]),
        ("power_cycles", d["power_cycles"]),
        ("power_on_hours", d["power_on_hours"]),
        ("unsafe_shutdowns", d["unsafe_shutdowns"]),
        ("media_errors", d["media_errors"]),
        ("num_err_log_entries", d["num_err_log_entries"]),
        ("Warning Temperature Time", d["warning_temp_time"]),
        ("Critical Composite Temperature Time", d["critical_comp_time"]),
        ("Thermal Management T1 Trans Count", d["thm_temp1_trans_count"]),
        ("Thermal Management T2 Trans Count", d["thm_temp2_trans_count"]),
        ("Thermal Management T1 Total Time", d["thm_temp1_total_time"]),
        ("Thermal Management T2 Total Time", d["thm_temp2_total_time"]),
    ]
    return f"Smart Log for NVME device:{device} namespace-id:ffffffff\n" + _kv(rows, 40)


def id_nvmset(d: NvmSetList, nvmsetid: int) -> str:
    """Identify NVM Set List (CNS 04h) as nvme-cli prints it."""
    keys = ["nvmset_id", "endurance_group_id", "random_4k_read_typical", "optimal_write_size", "total_nvmset_cap", "unalloc_nvmset_cap"]
    out = [f"NVME Identify NVM Set List {nvmsetid}:", f"nid     : {d['nid']}", "." * 17]
    for i, entry in enumerate(d["NVMSet"]):
        e: Mapping[str, object] = entry  # read by name from the list above
        out += [f" NVM Set Attribute Entry[{i:2}]", "." * 17, _kv([(k, e[k]) for k in keys], 24), "." * 17]
    return "\n".join(out)


def endurance_log(d: EnduranceGroupLog, device: str, endgid: int) -> str:
    """Endurance Group Information log (09h) as nvme-cli prints it."""
    keys = [
        "critical_warning",
        "endurance_group_features",
        "avl_spare",
        "avl_spare_threshold",
        "percent_used",
        "domain_identifier",
        "endurance_estimate",
        "data_units_read",
        "data_units_written",
        "media_units_written",
        "host_read_cmds",
        "host_write_cmds",
        "media_data_integrity_err",
        "num_err_info_log_entries",
        "total_end_grp_cap",
        "unalloc_end_grp_cap",
    ]
    fields: Mapping[str, object] = d  # read by name from the list above
    return f"Endurance Group Log for NVME device:{device} Group ID:{endgid:x}\n" + _kv([(k, fields[k]) for k in keys], 28)


def vendor_log(d: VendorLog, device: str) -> str:
    rows = [
        ("host_write_bytes", f"{d['host_write_bytes']} ({si_bytes(d['host_write_bytes'])})"),
        ("host_read_bytes", f"{d['host_read_bytes']} ({si_bytes(d['host_read_bytes'])})"),
        ("nand_write_bytes", f"{d['nand_write_bytes']} ({si_bytes(d['nand_write_bytes'])})"),
        ("  host programs", f"{d['nand_write_host_bytes']} ({si_bytes(d['nand_write_host_bytes'])})"),
        ("  gc relocation", f"{d['nand_write_gc_bytes']} ({si_bytes(d['nand_write_gc_bytes'])})"),
        *(
            [("  die parity", f"{d['nand_write_parity_bytes']} ({si_bytes(d['nand_write_parity_bytes'])})")]
            if "nand_write_parity_bytes" in d
            else []
        ),
        ("nand_read_bytes", f"{d['nand_read_bytes']} ({si_bytes(d['nand_read_bytes'])})"),
        ("  read-modify-write", f"{d['nand_read_rmw_bytes']} ({si_bytes(d['nand_read_rmw_bytes'])})"),
        ("  gc relocation", f"{d['nand_read_gc_bytes']} ({si_bytes(d['nand_read_gc_bytes'])})"),
        ("waf (lifetime)", f"{d['waf']:.4f}" if d["host_write_bytes"] else "-"),
        ("rmw_ius", d["rmw_ius"]),
        ("buffer_merges", d["buffer_merges"]),
        ("trimmed_ius", d["trimmed_ius"]),
        ("gc_victims", f"{d['gc_victims']} ({d['foreground_gc_victims']} foreground)"),
        ("superblock_erases", d["superblock_erases"]),
        (
            "erase_count min/avg/max",
            f"{d['erase_count_min']} / {d['erase_count_avg']:.2f} / {d['erase_count_max']} of {d['pe_cycles_rated']} rated",
        ),
        ("superblocks", f"{d['superblocks']} x {si_bytes(d['superblock_bytes'])} ({d['free_superblocks']} free)"),
        ("valid_bytes", f"{d['valid_bytes']} ({si_bytes(d['valid_bytes'])})"),
        ("buffered_bytes", d["buffered_bytes"]),
        ("iu_bytes", d["iu_bytes"]),
    ]
    out = f"ssdtwin vendor log for device:{device}\n" + _kv(rows, 26)
    intel = d.get("intel_smart_add")
    if intel:
        out += (
            f"\n\nAdditional Smart Log for NVME device:{device} namespace-id:ffffffff\n"
            f"{'key':<32}{'normalized':<11}raw\n"
            f"{'nand_bytes_written':<32}: {'100%':<9}sectors: {intel['nand_bytes_written_sectors']}\n"
            f"{'host_bytes_written':<32}: {'100%':<9}sectors: {intel['host_bytes_written_sectors']}\n"
            "(0xF4/0xF5: sectors written / 65,536, i.e. units of 32 MiB)"
        )
    return out


def nvme_list(device: str, ctrl: IdCtrl, namespaces: list[NamespaceRow]) -> str:
    head = (
        f"{'Node':<30} {'SN':<20} {'Model':<24} {'Namespace':<9} {'Usage':<26} {'Format':<16} {'FW Rev':<8}\n"
        f"{'-' * 30} {'-' * 20} {'-' * 24} {'-' * 9} {'-' * 26} {'-' * 16} {'-' * 8}"
    )
    lines = [head]
    for ns in namespaces:
        used = ns["nuse"] * ns["lba_bytes"]
        usage = f"{si_bytes(used):>9} / {si_bytes(ns['bytes']):>9}"
        fmt = f"{ns['lba_bytes']:>4}   B + {ns.get('ms', 0):>2} B"
        state = "" if ns["attached"] else " (detached)"
        lines.append(
            f"{device + ':ns' + str(ns['nsid']) + state:<30} {ctrl['sn']:<20} {ctrl['mn']:<24} "
            f"{ns['nsid']:<9} {usage:<26} {fmt:<16} {ctrl['fr']:<8}"
        )
    return "\n".join(lines)


def nvme_list_detailed(device: str, ctrl: IdCtrl, namespaces: list[NamespaceRow]) -> str:
    """``nvme list -v``: the subsystem, its controller, its namespaces (names as in the JSON
    tree: the kernel's names of a first controller)."""
    attached = [ns for ns in namespaces if ns["attached"]]
    names = [f"{CONTROLLER_NAME}n{ns['nsid']}" for ns in attached]
    out = [
        f"{'Subsystem':<16} {'Subsystem-NQN':<96} Controllers",
        f"{'-' * 16} {'-' * 96} {'-' * 16}",
        f"{SUBSYSTEM_NAME:<16} {ctrl['subnqn']:<96} {CONTROLLER_NAME}",
        "",
        f"{'Device':<8} {'SN':<20} {'MN':<40} {'FR':<8} {'TxPort':<6} {'Address':<14} {'Subsystem':<12} Namespaces",
        f"{'-' * 8} {'-' * 20} {'-' * 40} {'-' * 8} {'-' * 6} {'-' * 14} {'-' * 12} {'-' * 16}",
        f"{CONTROLLER_NAME:<8} {ctrl['sn']:<20} {ctrl['mn']:<40} {ctrl['fr']:<8} {'pcie':<6} {PCI_ADDRESS:<14} "
        f"{SUBSYSTEM_NAME:<12} {', '.join(names)}",
        "",
        f"{'Device':<12} {'Generic':<12} {'NSID':<10} {'Usage':<26} {'Format':<16} Controllers",
        f"{'-' * 12} {'-' * 12} {'-' * 10} {'-' * 26} {'-' * 16} {'-' * 16}",
    ]
    for name, ns in zip(names, attached):
        usage = f"{si_bytes(ns['nuse'] * ns['lba_bytes']):>9} / {si_bytes(ns['bytes']):>9}"
        fmt = f"{ns['lba_bytes']:>4}   B + {ns.get('ms', 0):>2} B"
        out.append(f"{name:<12} {'ng0n' + str(ns['nsid']):<12} {ns['nsid']:<#10x} {usage:<26} {fmt:<16} {CONTROLLER_NAME}")
    return "\n".join(out)


def hex_lines(data: bytes, width: int = 16) -> list[str]:
    """The bytes as lines of ``width`` hex pairs (``get-log -o json``)."""
    return [" ".join(f"{b:02x}" for b in data[i : i + width]) for i in range(0, len(data), width)]


def hexdump(data: bytes, width: int = 16) -> str:
    """nvme-cli's hex dump: an offset, 16 bytes and their printable characters per line."""
    out = ["     " + "".join(f"{i:3x}" for i in range(width))]
    for i in range(0, len(data), width):
        chunk = data[i : i + width]
        text = "".join(chr(b) if 0x21 <= b <= 0x7E else "." for b in chunk)
        hexes = "".join(f" {b:02x}" for b in chunk)
        out.append(f'{i:04x}:{hexes:<{3 * width}} "{text}"')
    return "\n".join(out)


def error_log(rows: list[ErrorLogEntry], dev: str) -> str:
    """``nvme error-log``: one block per entry."""
    out = [f"Error Log Entries for device:{dev} entries:{len(rows)}", "................."]
    for i, e in enumerate(rows):
        out += [
            f" Entry[{i:2}]   ",
            ".................",
            f"error_count     : {e['error_count']}",
            f"sqid            : {e['sqid']}",
            f"cmdid           : {e['cmdid']:#x}",
            f"status_field    : {e['status_field']:#x}",
            f"phase_tag       : {e['phase_tag']:#x}",
            f"parm_err_loc    : {e['parm_error_location']:#x}",
            f"lba             : {e['lba']:#x}",
            f"nsid            : {e['nsid']:#x}",
            f"vs              : {e['vs']}",
            f"trtype          : {e['trtype']}",
            f"csi             : {e['csi']}",
            f"opcode          : {e['opcode']:#x}",
            f"cs              : {e['cs']:#x}",
            f"trtype_spec_info: {e['trtype_spec_info']:#x}",
            f"log_page_version: {e['log_page_version']}",
            ".................",
        ]
    return "\n".join(out)


def _estimate(s: int) -> str:
    return f"{s} (No time period reported)" if s == 0xFFFFFFFF else str(s)


def sanitize_log(d: SanitizeLog, human: bool) -> str:
    """``nvme sanitize-log``: progress, status and the estimated times in seconds."""
    st = d["sstat"]
    rows = [
        ("Sanitize Progress                      (SPROG)", d["sprog"]),
        (
            "Sanitize Status                        (SSTAT)",
            st["status"] if human else f"global_erased:{st['global_erased']} passes:{st['no_cmplted_passes']} {st['status']}",
        ),
        ("Sanitize Command Dword 10 Information (SCDW10)", f"{d['cdw10_info']:#x}"),
        ("Estimated Time For Overwrite                   ", _estimate(d["time_over_write"])),
        ("Estimated Time For Block Erase                 ", _estimate(d["time_block_erase"])),
        ("Estimated Time For Crypto Erase                ", _estimate(d["time_crypto_erase"])),
        ("Estimated Time For Overwrite (No-Deallocate)   ", _estimate(d["time_over_write_no_dealloc"])),
        ("Estimated Time For Block Erase (No-Deallocate) ", _estimate(d["time_block_erase_no_dealloc"])),
        ("Estimated Time For Crypto Erase (No-Deallocate)", _estimate(d["time_crypto_erase_no_dealloc"])),
        ("Sanitize State Information               (SSI)", d["sanitize_state_information"]["sanitize_state"]),
    ]
    return "\n".join(f"{k}:  {v}" for k, v in rows)


#: nvme-cli's names of the features (nvme_feature_to_string, nvme-print.c at v2.4) the twin has.
FEATURE_NAMES = {
    0x01: "Arbitration",
    0x02: "Power Management",
    0x04: "Temperature Threshold",
    0x06: "Volatile Write Cache",
    0x07: "Number of Queues",
    0x08: "Interrupt Coalescing",
    0x13: "Predictable Latency Mode Config",
    0x14: "Predictable Latency Mode Window",
    0x84: "Namespace Write Protect",
}


def c_hex(v: int, width: int) -> str:
    """C's ``%#0*x``: 0x and zero padding to ``width`` characters, but 0 is plain zeros
    (``#`` adds no 0x to zero), as nvme-cli prints it."""
    return "0" * max(width, 1) if v == 0 else f"{v:#0{width}x}"


def c_int(v: int) -> int:
    """A 32-bit field through C's ``%d``, as nvme-cli prints an NSID (0xffffffff is -1)."""
    return v - (1 << 32) if v >= 1 << 31 else v


def get_feature(fid: int, value: int) -> str:
    """nvme-cli 2.4's line for a Get Features result (get_feature_id_print, sel 0)."""
    return (
        f"get-feature:{c_hex(fid, 4 if fid else 2)} ({FEATURE_NAMES.get(fid, 'Unknown')}), Current value:{c_hex(value, 10 if value else 8)}"
    )


def set_feature(fid: int, value: int, cdw12: int, save: bool) -> str:
    """nvme-cli 2.4's line for a successful Set Features."""
    return (
        f"set-feature:{c_hex(fid, 4 if fid else 2)} ({FEATURE_NAMES.get(fid, 'Unknown')}), "
        f"value:{c_hex(value, 10 if value else 8)}, cdw12:{c_hex(cdw12, 10 if cdw12 else 8)}, save:{c_hex(int(save), 0)}"
    )
