"""Text renderings in the style of nvme-cli (``-o normal``).

JSON output (``-o json``) is nvme-cli 2.4's (nvmejson.py); these functions only make the
human form look like what storage engineers already read every day.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .core_types import EnduranceGroupLog, ErrorLogEntry, IdCtrl, IdNs, NamespaceRow, NvmSetList, SmartLog, VendorLog
from .nvmejson import CONTROLLER_NAME, PCI_ADDRESS, SUBSYSTEM_NAME
from .nvmejson import id_ctrl as json_id_ctrl


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


#: Identify Controller's lines as nvme-cli 2.4 prints them (nvme_show_id_ctrl): each key with
#: its C format, "x" for %#x, "d" for a number, "s" for text, in nvme-cli's order.
ID_CTRL_TEXT = (
    ("vid", "x"), ("ssvid", "x"), ("sn", "s"), ("mn", "s"), ("fr", "s"), ("rab", "d"), ("ieee", "ieee"), ("cmic", "x"),
    ("mdts", "d"), ("cntlid", "x"), ("ver", "x"), ("rtd3r", "x"), ("rtd3e", "x"), ("oaes", "x"), ("ctratt", "x"), ("rrls", "x"),
    ("cntrltype", "d"), ("fguid", "s"), ("crdt1", "d"), ("crdt2", "d"), ("crdt3", "d"), ("nvmsr", "d"), ("vwci", "d"),
    ("mec", "d"), ("oacs", "x"), ("acl", "d"), ("aerl", "d"), ("frmw", "x"), ("lpa", "x"), ("elpe", "d"), ("npss", "d"),
    ("avscc", "x"), ("apsta", "x"), ("wctemp", "d"), ("cctemp", "d"), ("mtfa", "d"), ("hmpre", "d"), ("hmmin", "d"),
    ("tnvmcap", "d"), ("unvmcap", "d"), ("rpmbs", "x"), ("edstt", "d"), ("dsto", "d"), ("fwug", "d"), ("kas", "d"),
    ("hctma", "x"), ("mntmt", "d"), ("mxtmt", "d"), ("sanicap", "x"), ("hmminds", "d"), ("hmmaxd", "d"), ("nsetidmax", "d"),
    ("endgidmax", "d"), ("anatt", "d"), ("anacap", "d"), ("anagrpmax", "d"), ("nanagrpid", "d"), ("pels", "d"),
    ("domainid", "d"), ("megcap", "d"), ("sqes", "x"), ("cqes", "x"), ("maxcmd", "d"), ("nn", "d"), ("oncs", "x"),
    ("fuses", "x"), ("fna", "x"), ("vwc", "x"), ("awun", "d"), ("awupf", "d"), ("icsvscc", "d"), ("nwpc", "d"), ("acwu", "d"),
    ("ocfs", "x"), ("sgls", "x"), ("mnan", "d"), ("maxdna", "d"), ("maxcna", "d"), ("subnqn", "s"), ("ioccsz", "d"),
    ("iorcsz", "d"), ("icdoff", "d"), ("fcatt", "x"), ("msdbd", "d"), ("ofcs", "d"),
)  # fmt: skip

#: print_psd_workload: the Active Power Workload hint.
PSD_WORKLOADS = {0: "-", 1: "1MiB 32 RW, 30s idle", 2: "80K 128KiB SW"}


def _psd_power(power: int, scale: int) -> str:
    """print_ps_power_and_scale: "-" when not reported, else in the scale's unit."""
    if scale == 1:
        return f"{power // 10000}.{power % 10000:04}W"
    if scale == 2:
        return f"{power // 100}.{power % 100:02}W"
    return "-" if scale == 0 else "reserved"


def id_ctrl(d: IdCtrl) -> str:
    """nvme-cli 2.4's text of Identify Controller, line for line (nvme_show_id_ctrl and
    nvme_show_id_ctrl_power); the fields are read from the twin's nvme-cli JSON."""
    j: Mapping[str, Any] = json_id_ctrl(d, False)  # read by name from ID_CTRL_TEXT
    rows: list[tuple[str, Any]] = []
    for k, how in ID_CTRL_TEXT:
        v = j[k]
        rows.append((k, f"{v:06x}" if how == "ieee" else c_x(v) if how == "x" else v))
    out = ["NVME Identify Controller:", _kv(rows, 10)]
    for i, p in enumerate(j["psds"]):
        mp = p["max_power"]
        mp_text = f"{mp // 10000}.{mp % 10000:04}W" if p["flags"] & 0x1 else f"{mp // 100}.{mp % 100:02}W"  # MXPS
        op = "non-operational" if p["flags"] & 0x2 else "operational"  # NOPS
        out.append(
            f"ps   {i:4} : mp:{mp_text} {op} enlat:{p['entry_lat']} exlat:{p['exit_lat']} rrt:{p['read_tput']} rrl:{p['read_lat']}\n"
            f"{'':12}rwt:{p['write_tput']} rwl:{p['write_lat']} idle_power:{_psd_power(p['idle_power'], p['idle_scale'])}"
            f" active_power:{_psd_power(p['active_power'], p['active_scale'])}\n"
            f"{'':12}active_power_workload:{PSD_WORKLOADS.get(p['active_power_work'] & 0x7, 'reserved')}"
        )
    return "\n".join(out)


def c_x(v: int) -> str:
    """C's ``%#x``: 0x and the hex digits, but a zero is plain ``0``, as nvme-cli prints."""
    return f"{v:#x}" if v else "0"


def id_ns(d: IdNs, nsid: int) -> str:
    """nvme-cli 2.4's text of Identify Namespace (nvme_show_id_ns), line for line: %#x
    fields (a zero without 0x), the npwg..nows hints only while nsfeat bit 4 says they are
    valid, ``nsattr`` with its tab, and each LBA format line ending in " (in use)" or " "."""
    f: Mapping[str, Any] = d  # read by name
    rows: list[tuple[str, Any]] = [(k, c_x(f[k])) for k in ("nsze", "ncap", "nuse", "nsfeat")]
    rows += [("nlbaf", f["nlbaf"])]
    rows += [(k, c_x(f[k])) for k in ("flbas", "mc", "dpc", "dps", "nmic", "rescap", "fpi")]
    rows += [(k, f[k]) for k in ("dlfeat", "nawun", "nawupf", "nacwu", "nabsn", "nabo", "nabspf", "noiob", "nvmcap")]
    if f["nsfeat"] & 0x10:
        rows += [(k, f[k]) for k in ("npwg", "npwa", "npdg", "npda", "nows")]
    rows += [(k, f[k]) for k in ("mssrl", "mcl", "msrc", "nulbaf", "anagrpid")]
    out = [f"NVME Identify Namespace {c_int(nsid)}:", _kv(rows, 8), f"nsattr\t: {f['nsattr']}"]
    out.append(_kv([(k, f[k]) for k in ("nvmsetid", "endgid", "nguid", "eui64")], 8))
    in_use = f["flbas"] & 0xF
    for i, lbaf in enumerate(d["lbafs"][: f["nlbaf"] + f["nulbaf"] + 1]):
        use = "(in use)" if i == in_use else ""
        out.append(f"lbaf {i:2} : ms:{lbaf['ms']:<3} lbads:{lbaf['ds']:<2} rp:{c_x(lbaf['rp'])} {use}")
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


def smart_log(d: SmartLog, device: str, human: bool = False, nsid: int = 0xFFFFFFFF) -> str:
    """nvme-cli 2.4's text of the SMART / Health log (nvme_show_smart_log), tabs and all; no
    temperature sensor reports, so no ``Temperature Sensor N`` line. ``nsid``: the NSID asked
    for (0 or the broadcast one), printed in hex as nvme-cli does."""
    t = d["temperature"]
    cw = d["critical_warning"]
    lines = [f"Smart Log for NVME device:{device} namespace-id:{nsid:x}", f"critical_warning\t\t\t: {c_x(cw)}"]
    if human:
        lines += [f"      {name:<31}: {cw >> bit & 1}" for bit, name in enumerate(CRITICAL_WARNING_ROWS)]
    dur, duw = d["data_units_read"], d["data_units_written"]
    lines += [
        f"temperature\t\t\t\t: {t - 273} °C ({t} K)",
        f"available_spare\t\t\t\t: {d['avail_spare']}%",
        f"available_spare_threshold\t\t: {d['spare_thresh']}%",
        f"percentage_used\t\t\t\t: {d['percent_used']}%",
        f"endurance group critical warning summary: {c_x(d['endurance_grp_critical_warning_summary'])}",
        f"Data Units Read\t\t\t\t: {dur} ({si_bytes(dur * 512000)})",
        f"Data Units Written\t\t\t: {duw} ({si_bytes(duw * 512000)})",
        f"host_read_commands\t\t\t: {d['host_read_commands']}",
        f"host_write_commands\t\t\t: {d['host_write_commands']}",
        f"controller_busy_time\t\t\t: {d['controller_busy_time']}",
        f"power_cycles\t\t\t\t: {d['power_cycles']}",
        f"power_on_hours\t\t\t\t: {d['power_on_hours']}",
        f"unsafe_shutdowns\t\t\t: {d['unsafe_shutdowns']}",
        f"media_errors\t\t\t\t: {d['media_errors']}",
        f"num_err_log_entries\t\t\t: {d['num_err_log_entries']}",
        f"Warning Temperature Time\t\t: {d['warning_temp_time']}",
        f"Critical Composite Temperature Time\t: {d['critical_comp_time']}",
        f"Thermal Management T1 Trans Count\t: {d['thm_temp1_trans_count']}",
        f"Thermal Management T2 Trans Count\t: {d['thm_temp2_trans_count']}",
        f"Thermal Management T1 Total Time\t: {d['thm_temp1_total_time']}",
        f"Thermal Management T2 Total Time\t: {d['thm_temp2_total_time']}",
    ]
    return "\n".join(lines)


def id_nvmset(d: NvmSetList, nvmsetid: int) -> str:
    """Identify NVM Set List (CNS 04h) as nvme-cli prints it."""
    keys = ["nvmset_id", "endurance_group_id", "random_4k_read_typical", "optimal_write_size", "total_nvmset_cap", "unalloc_nvmset_cap"]
    out = [f"NVME Identify NVM Set List {nvmsetid}:", f"nid     : {d['nid']}", "." * 17]
    for i, entry in enumerate(d["NVMSet"]):
        e: Mapping[str, object] = entry  # read by name from the list above
        out += [f" NVM Set Attribute Entry[{i:2}]", "." * 17, _kv([(k, e[k]) for k in keys], 24), "." * 17]
    return "\n".join(out)


def endurance_log(d: EnduranceGroupLog, device: str, endgid: int) -> str:
    """Endurance Group Information log (09h) as nvme-cli prints it: 2.16's
    stdout_endurance_log line for line (its tabs, ``percent_used : N%``), which has the four
    fields 2.4's printer lacks (and spells ``critical_warning`` as 2.4 does not)."""
    rows = [
        ("critical_warning\t", d["critical_warning"]),
        ("endurance_group_features", d["endurance_group_features"]),
        ("avl_spare\t\t", d["avl_spare"]),
        ("avl_spare_threshold\t", d["avl_spare_threshold"]),
        ("percent_used\t\t", f"{d['percent_used']}%"),
        ("domain_identifier\t", d["domain_identifier"]),
        ("endurance_estimate\t", d["endurance_estimate"]),
        ("data_units_read\t\t", d["data_units_read"]),
        ("data_units_written\t", d["data_units_written"]),
        ("media_units_written\t", d["media_units_written"]),
        ("host_read_cmds\t\t", d["host_read_cmds"]),
        ("host_write_cmds\t\t", d["host_write_cmds"]),
        ("media_data_integrity_err", d["media_data_integrity_err"]),
        ("num_err_info_log_entries", d["num_err_info_log_entries"]),
        ("total_end_grp_cap\t", d["total_end_grp_cap"]),
        ("unalloc_end_grp_cap\t", d["unalloc_end_grp_cap"]),
    ]
    return f"Endurance Group Log for NVME device:{device} Group ID:{endgid:x}\n" + "\n".join(f"{k}: {v}" for k, v in rows)


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


#: libnvme 1.4's nvme_status_to_string (src/nvme/util.c), which nvme-cli 2.4 prints after an
#: error-log entry's status: by (status code type, status code), for every status the twin
#: can log (a failed I/O command), and the zero of an empty entry.
STATUS_STRINGS = {
    (0, 0x00): "Successful Completion: The command completed without error",
    (0, 0x01): "Invalid Command Opcode: A reserved coded value or an unsupported value in the command opcode field",
    (0, 0x02): "Invalid Field in Command: A reserved coded value or an unsupported value in a defined field",
    (0, 0x0B): "Invalid Namespace or Format: The namespace or the format of that namespace is invalid",
    (0, 0x0C): "Command Sequence Error: The command was aborted due to a protocol violation in a multi- command sequence",
    (0, 0x1C): "Sanitize Failed: The most recent sanitize operation failed and no recovery action has been successfully completed",
    (0, 0x1D): "Sanitize In Progress: The requested function is prohibited while a sanitize operation is in progress",
    (0, 0x20): "Namespace is Write Protected: The command is prohibited while the namespace is write protected",
    (0, 0x80): "LBA Out of Range: The command references an LBA that exceeds the size of the namespace",
    (0, 0x81): "Capacity Exceeded: Execution of the command has caused the capacity of the namespace to be exceeded",
    (2, 0x81): "Unrecovered Read Error: The read data could not be recovered from the media",
    (2, 0x82): "End-to-end Guard Check Error: The command was aborted due to an end-to-end guard check failure",
    (2, 0x83): "End-to-end Application Tag Check Error: The command was aborted due to an end-to-end application tag check failure",
    (2, 0x84): "End-to-end Reference Tag Check Error: The command was aborted due to an end-to-end reference tag check failure",
    (3, 0x01): "Asymmetric Access Persistent Loss: The controller is in a persistent loss state with the requested namespace",
    (3, 0x02): "Asymmetric Access Inaccessible: The controller is in an inaccessible state with the requested namespace",
    (3, 0x03): "Asymmetric Access Transition: The controller is currently transitioning states with the requested namespace",
}

#: nvme-cli 2.4's nvme_trtype_to_string (nvme-print.c).
TRTYPE_STRINGS = {
    0: "The transport type is not indicated or the error is not transport related.",
    1: "RDMA Transport error.",
    2: "Fibre Channel Transport error.",
    3: "TCP Transport error.",
    254: "Intra-host Transport error.",
}


def c_hash_x(v: int) -> str:
    """C's ``%#x``: 0x before a non-zero value, a plain 0 for zero."""
    return f"{v:#x}" if v else "0"


def error_log(rows: list[ErrorLogEntry], dev: str) -> str:
    """``nvme error-log``: one block per entry, nvme-cli 2.4's nvme_show_error_log line for
    line (its tabs, C's ``%#x``, the status and transport type spelled out)."""
    out = [f"Error Log Entries for device:{dev} entries:{len(rows)}", "................."]
    for i, e in enumerate(rows):
        status = e["status_field"]
        text = STATUS_STRINGS.get(((status >> 8) & 0x7, status & 0xFF), "Unknown status")
        out += [
            f" Entry[{i:2}]   ",
            ".................",
            f"error_count\t: {e['error_count']}",
            f"sqid\t\t: {e['sqid']}",
            f"cmdid\t\t: {c_hash_x(e['cmdid'])}",
            f"status_field\t: {c_hash_x(status)}({text})",
            f"phase_tag\t: {c_hash_x(e['phase_tag'])}",
            f"parm_err_loc\t: {c_hash_x(e['parm_error_location'])}",
            f"lba\t\t: {c_hash_x(e['lba'])}",
            f"nsid\t\t: {c_hash_x(e['nsid'])}",
            f"vs\t\t: {e['vs']}",
            f"trtype\t\t: {TRTYPE_STRINGS.get(e['trtype'], 'Reserved')}",
            f"csi\t\t: {e['csi']}",
            f"opcode\t\t: {c_hash_x(e['opcode'])}",
            f"cs\t\t: {c_hash_x(e['cs'])}",
            f"trtype_spec_info: {c_hash_x(e['trtype_spec_info'])}",
            f"log_page_version: {e['log_page_version']}",
            ".................",
        ]
    return "\n".join(out)


#: nvme-cli 2.4's get_sanitize_log_sstat_status_str: SSTAT bits 2:0.
SSTAT_STRINGS = {
    0: "NVM Subsystem has never been sanitized.",
    1: "Most Recent Sanitize Command Completed Successfully.",
    2: "Sanitize in Progress.",
    3: "Most Recent Sanitize Command Failed.",
    4: "Most Recent Sanitize Command (No-Deallocate After Sanitize) Completed Successfully.",
}

#: nvme-cli 2.16's nvme_ssi_state_to_string: SSI bits 3:0 (and 7:4), an NVMe 2.0 field.
SSI_STRINGS = {
    0: "Idle state",
    1: "Restricted Processing State",
    2: "Restricted Failure State",
    3: "Unrestricted Processing State",
    4: "Unrestricted Failure State",
    5: "Media Verification State",
    6: "Post-Verification Deallocation State",
}


def sanitize_log(page: bytes, human: bool) -> str:
    """``nvme sanitize-log`` from the raw page 81h: nvme-cli 2.4's nvme_show_sanitize_log
    line for line (``-H``: its decoded SSTAT and, while a sanitize runs, the progress in
    percent), then the NVMe 2.0 Sanitize State Information (byte 36) as nvme-cli 2.16 prints
    it, which 2.4 does not."""
    sprog, sstat = int.from_bytes(page[0:2], "little"), int.from_bytes(page[2:4], "little")
    scdw10 = int.from_bytes(page[4:8], "little")
    times = [int.from_bytes(page[o : o + 4], "little") for o in range(8, 32, 4)]
    ssi, status = page[36], sstat & 0x7
    progress = f"\t({sprog * 100 / 0x10000:f}%)" if human and status == 2 else ""
    out = [
        f"Sanitize Progress                      (SPROG) :  {sprog}{progress}",
        f"Sanitize Status                        (SSTAT) :  {c_hash_x(status)}",
    ]
    if human:
        erased = (
            "Global Data Erased set: no NS LB in the NVM subsystem has been written to and no PMR in the NVM subsystem has been enabled"
            if sstat & 0x100
            else "Global Data Erased cleared: a NS LB in the NVM subsystem has been written to or a PMR in the NVM "
            "subsystem has been enabled"
        )
        out += [
            f"\t[2:0]\t{SSTAT_STRINGS.get(status, 'Unknown')}",
            f"\t[7:3]\tNumber of completed passes if most recent operation was overwrite:\t{(sstat >> 3) & 0x1F}",
            f"\t  [8]\t{erased}",
        ]
    out.append(f"Sanitize Command Dword 10 Information (SCDW10) :  {c_hash_x(scdw10)}")
    names = (
        "Estimated Time For Overwrite                   ",
        "Estimated Time For Block Erase                 ",
        "Estimated Time For Crypto Erase                ",
        "Estimated Time For Overwrite (No-Deallocate)   ",
        "Estimated Time For Block Erase (No-Deallocate) ",
        "Estimated Time For Crypto Erase (No-Deallocate)",
    )
    out += [f"{n}:  {t}{' (No time period reported)' if t == 0xFFFFFFFF else ''}" for n, t in zip(names, times)]
    out.append(f"Sanitize State Information               (SSI) : {c_hash_x(ssi)}")
    if human:
        out.append(f"  [3:0] : Sanitize State : {c_hash_x(ssi & 0xF)}\t{SSI_STRINGS.get(ssi & 0xF, 'Reserved')}")
        if status == 3:
            out.append(f"  [7:4] : Failure State  : {c_hash_x(ssi >> 4)}\t{SSI_STRINGS.get(ssi >> 4, 'Reserved')}")
    return "\n".join(out)


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


SELECT_NAMES = ("Current", "Default", "Saved", "Supported capabilities")


def get_feature(fid: int, value: int, sel: int = 0) -> str:
    """nvme-cli 2.4's lines for a Get Features result (get_feature_id_print): with SEL 3 the
    capabilities follow, one a line (nvme_show_select_result)."""
    line = (
        f"get-feature:{c_hex(fid, 4 if fid else 2)} ({FEATURE_NAMES.get(fid, 'Unknown')}), "
        f"{SELECT_NAMES[sel]} value:{c_hex(value, 10 if value else 8)}"
    )
    if sel != 3:
        return line
    caps = [text for bit, text in ((1, "saveable"), (2, "per-namespace"), (4, "changeable")) if value & bit]
    return "\n".join([line, *(f"  Feature is {c}" for c in caps)])


def set_feature(fid: int, value: int, cdw12: int, save: bool) -> str:
    """nvme-cli 2.4's line for a successful Set Features."""
    return (
        f"set-feature:{c_hex(fid, 4 if fid else 2)} ({FEATURE_NAMES.get(fid, 'Unknown')}), "
        f"value:{c_hex(value, 10 if value else 8)}, cdw12:{c_hex(cdw12, 10 if cdw12 else 8)}, save:{c_hex(int(save), 0)}"
    )
