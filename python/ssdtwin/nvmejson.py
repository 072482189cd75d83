"""nvme-cli 2.4's JSON (``-o json``), built from the core's structures.

The pinned version is nvme-cli 2.4 (the Debian 12 line): the same keys, in the same order,
nesting and JSON types as its printers (nvme-print-json.c and the Intel plugin at tag v2.4).
tests/data/nvme-cli-2.4 holds the keys extracted from that source, and
tests/test_nvme_cli_json.py compares every verb against them. docs/cli.md, "nvme-cli's
JSON", lists where later nvme-cli versions print otherwise.

The core's Identify and SMART structures already follow nvme-cli's names and order; what
is shaped here is presentation only: the space padding of the fixed-width strings, the keys
a verb of 2.4 does not print, the wrapping objects (a device-named root, ``errors``), and
the ``vs_`` keys, which are the twin's vendor-specific fields, printed with
``-v/--vendor-specific`` only (as a vendor plugin's id-ctrl adds its own).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypedDict

from .core_types import EnduranceGroupLog, ErrorLogEntry, IdCtrl, IdNs, NamespaceRow, SanitizeLog, SmartLog, VendorLog

#: The fixed-width ASCII fields of Identify Controller (bytes): nvme-cli prints all of each.
PADDED_FIELDS = {"sn": 20, "mn": 40, "fr": 8}

#: Error Information entry keys nvme-cli 2.4 prints (csi, opcode and log_page_version are in
#: the normal output only).
ERROR_ENTRY_KEYS = (
    "error_count",
    "sqid",
    "cmdid",
    "status_field",
    "phase_tag",
    "parm_error_location",
    "lba",
    "nsid",
    "vs",
    "trtype",
    "cs",
    "trtype_spec_info",
)

#: Endurance Group Information keys nvme-cli 2.4 prints (2.6 added the group's features,
#: domain identifier and capacities).
ENDURANCE_KEYS = (
    "critical_warning",
    "avl_spare",
    "avl_spare_threshold",
    "percent_used",
    "endurance_estimate",
    "data_units_read",
    "data_units_written",
    "media_units_written",
    "host_read_cmds",
    "host_write_cmds",
    "media_data_integrity_err",
    "num_err_info_log_entries",
)

#: Sanitize Status keys nvme-cli 2.4 prints, and those of its sstat object.
SANITIZE_KEYS = (
    "sprog",
    "sstat",
    "cdw10_info",
    "time_over_write",
    "time_block_erase",
    "time_crypto_erase",
    "time_over_write_no_dealloc",
    "time_block_erase_no_dealloc",
    "time_crypto_erase_no_dealloc",
)
SSTAT_KEYS = ("global_erased", "no_cmplted_passes", "status")

#: The bits of SMART's critical warning, as ``smart-log -H -o json`` names them.
CRITICAL_WARNING_BITS = ("available_spare", "temp_threshold", "reliability_degraded", "ro", "vmbu_failed", "pmr_ro")


def _pick(d: Mapping[str, object], keys: Sequence[str]) -> dict[str, object]:
    return {k: d[k] for k in keys}


def _without_vendor(d: Mapping[str, object], vendor: bool) -> dict[str, object]:
    return {k: v for k, v in d.items() if vendor or not k.startswith("vs_")}


def id_ctrl(d: IdCtrl, vendor: bool = False) -> dict[str, object]:
    """``nvme id-ctrl -o json``: sn, mn and fr as their whole fixed-width fields."""
    out = _without_vendor(d, vendor)
    for k, width in PADDED_FIELDS.items():
        out[k] = str(out[k])[:width].ljust(width)
    return out


def id_ns(d: IdNs, vendor: bool = False) -> dict[str, object]:
    """``nvme id-ns -o json``."""
    return _without_vendor(d, vendor)


def smart_log(d: SmartLog, human: bool = False) -> dict[str, object]:
    """``nvme smart-log -o json``; with ``-H`` the critical warning as an object of its bits."""
    out: dict[str, object] = dict(d)
    if human:
        cw = d["critical_warning"]
        out["critical_warning"] = {"value": cw, **{name: cw >> bit & 1 for bit, name in enumerate(CRITICAL_WARNING_BITS)}}
    return out


def error_log(entries: Sequence[ErrorLogEntry]) -> dict[str, object]:
    """``nvme error-log -o json``: every entry asked for."""
    return {"errors": [_pick(e, ERROR_ENTRY_KEYS) for e in entries]}


def fw_rev(slot: bytes) -> str:
    """A firmware slot's 8 bytes as nvme-cli shows them: what is not printable ASCII (the
    padding spaces too) as dots."""
    return "".join(chr(b) if 0x21 <= b <= 0x7E else "." for b in slot)


def fw_log(device: str, page: bytes) -> dict[str, object]:
    """``nvme fw-log -o json`` from the Firmware Slot Information page: the active slot and
    each slot holding a revision, as its 64-bit value and its text."""
    fwsi: dict[str, object] = {"Active Firmware Slot (afi)": page[0]}
    for n in range(1, 8):
        slot = page[8 * n : 8 * n + 8]
        if slot[0]:
            fwsi[f"Firmware Rev Slot {n}"] = f"{int.from_bytes(slot, 'little')} ({fw_rev(slot)})"
    return {device: fwsi}


def endurance_log(d: EnduranceGroupLog) -> dict[str, object]:
    """``nvme endurance-log -o json``."""
    return _pick(d, ENDURANCE_KEYS)


def sanitize_log(device: str, d: SanitizeLog) -> dict[str, object]:
    """``nvme sanitize-log -o json``: the log under the device's name."""
    out = _pick(d, SANITIZE_KEYS)
    out["sstat"] = _pick(d["sstat"], SSTAT_KEYS)
    return {device: out}


def _ns_sizes(ns: NamespaceRow) -> dict[str, int]:
    lba = ns["lba_bytes"]
    return {"UsedBytes": ns["nuse"] * lba, "MaximumLBA": ns["nsze"], "PhysicalSize": ns["nsze"] * lba, "SectorSize": lba}


def list_simple(device: str, ctrl: IdCtrl, namespaces: Sequence[NamespaceRow]) -> dict[str, object]:
    """``nvme list -o json``: one entry per namespace the host sees (the attached ones); the
    drive image stands where nvme-cli names the block and generic devices."""
    rows = []
    for ns in namespaces:
        if ns["attached"]:
            rows.append(
                {
                    "NameSpace": int(ns["nsid"]),
                    "DevicePath": device,
                    "GenericPath": device,
                    "Firmware": ctrl["fr"],
                    "ModelNumber": ctrl["mn"],
                    "SerialNumber": ctrl["sn"],
                    **_ns_sizes(ns),
                }
            )
    return {"Devices": rows}


#: The names the verbose list gives the drive, as the kernel would name its first controller.
CONTROLLER_NAME = "nvme0"
SUBSYSTEM_NAME = "nvme-subsys0"
#: The host's identity in the verbose list: fixed, so the output is the same on every machine.
HOST_NQN = "nqn.2019-10.org.ssdtwin:host"
HOST_ID = "00000000-0000-0000-0000-000000000000"
#: The PCI address the verbose list shows for the drive's controller.
PCI_ADDRESS = "0000:01:00.0"


def list_detail(device: str, ctrl: IdCtrl, namespaces: Sequence[NamespaceRow]) -> dict[str, object]:
    """``nvme list -v -o json``: host, subsystem, controller, its namespaces. A drive with
    one PCIe controller and no multipath: the namespaces sit under the controller, its
    ``Paths`` and the subsystem's ``Namespaces`` are empty."""
    nss = [
        {"NameSpace": f"{CONTROLLER_NAME}n{ns['nsid']}", "Generic": f"ng0n{ns['nsid']}", "NSID": int(ns["nsid"]), **_ns_sizes(ns)}
        for ns in namespaces
        if ns["attached"]
    ]
    controller = {
        "Controller": CONTROLLER_NAME,
        "SerialNumber": ctrl["sn"],
        "ModelNumber": ctrl["mn"],
        "Firmware": ctrl["fr"],
        "Transport": "pcie",
        "Address": PCI_ADDRESS,
        "Namespaces": nss,
        "Paths": [],
    }
    subsystem = {"Subsystem": SUBSYSTEM_NAME, "SubsystemNQN": ctrl["subnqn"], "Controllers": [controller], "Namespaces": []}
    return {"Devices": [{"HostNQN": HOST_NQN, "HostID": HOST_ID, "Subsystems": [subsystem]}]}


#: The Intel additional SMART log (0xCA) attributes in the plugin's JSON order, each with the
#: vendor log or SMART field that gives its raw value (None: the twin counts none, 0).
INTEL_SMART_ADD = (
    ("program_fail_count", None),
    ("erase_fail_count", None),
    ("wear_leveling", "wear"),
    ("end_to_end_error_detection_count", None),
    ("crc_error_count", None),
    ("timed_workload_media_wear", "media_wear"),
    ("timed_workload_host_reads", None),
    ("timed_workload_timer", None),
    ("thermal_throttle_status", "throttle"),
    ("retry_buffer_overflow_count", None),
    ("pll_lock_loss_count", None),
    ("nand_bytes_written", "nand_bytes_written_sectors"),
    ("host_bytes_written", "host_bytes_written_sectors"),
    ("host_ctx_wear_used", None),
    ("perf_stat_indicator", None),
    ("re_alloc_sectr_cnt", None),
    ("soft_ecc_err_rate", None),
    ("unexp_power_loss", "unsafe_shutdowns"),
    ("media_bytes_read", None),
    ("avail_fw_downgrades", None),
)


class IntelStat(TypedDict):
    normalized: int
    raw: object  # a count, a string, or the plugin's object ({min, max, avg}; {pct, cnt})


# The Intel plugin's smart-log-add JSON: the device, and its attributes by name.
IntelSmartAddJson = TypedDict("IntelSmartAddJson", {"Intel Smart log": str, "Device stats": dict[str, IntelStat]})


def intel_smart_log_add(device: str, vendor: VendorLog, smart: SmartLog) -> IntelSmartAddJson:
    """``nvme intel smart-log-add --json``: every attribute normalized 100 (none degrades),
    raw from the model where it keeps the count: NAND and host writes (0xF4/0xF5, 32 MiB
    units), erase counts (wear leveling), unsafe shutdowns; the timed media wear is a
    string, as the plugin prints that one with "%Lf"."""
    raw: dict[str, object] = {
        **vendor["intel_smart_add"],
        "wear": {"min": vendor["erase_count_min"], "max": vendor["erase_count_max"], "avg": int(vendor["erase_count_avg"])},
        "media_wear": f"{0:f}",
        "throttle": {"pct": 0, "cnt": 0},
        "unsafe_shutdowns": smart["unsafe_shutdowns"],
    }
    stats: dict[str, IntelStat] = {name: {"normalized": 100, "raw": raw[src] if src else 0} for name, src in INTEL_SMART_ADD}
    return {"Intel Smart log": device, "Device stats": stats}
