"""``ssdtwin nvme intel …``: the verbs of nvme-cli's Intel plugin, on presets whose drive
keeps Intel's additional SMART attributes (``[logs] intel_smart_add``; docs/cli.md).
"""

from __future__ import annotations

from pathlib import Path

import typer

from .. import nvmejson
from .common import U32, ImageDir, NvmeInt, OutputFmt, check_fmt, drive_view, emit_json, fail

intel = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="nvme-cli's Intel plugin verbs.")

#: Attribute ids of the plugin's text output (id_to_key in plugins/intel/intel-nvme.c).
ATTRIBUTE_IDS = (0xAB, 0xAC, 0xAD, 0xB8, 0xC7, 0xE2, 0xE3, 0xE4, 0xEA, 0xF0, 0xF3, 0xF4, 0xF5, 0xF6, 0xF7, 0x05, 0x0D, 0xAE, 0xF8, 0xF9)
TEXT_KEYS = (
    "program_fail_count",
    "erase_fail_count",
    "wear_leveling_count",
    "e2e_error_detect_count",
    "crc_error_count",
    "media_wear_percentage",
    "host_reads",
    "timed_work_load",
    "thermal_throttle_status",
    "retry_buff_overflow_count",
    "pll_lock_loss_counter",
    "nand_bytes_written",
    "host_bytes_written",
    "host_context_wear_used",
    "performance_status_indicator",
    "re-allocated_sector_count",
    "soft_ecc_error_rate",
    "unexpected_power_loss",
    "media_bytes_read",
    "available_fw_downgrades",
)


def _raw_number(raw: object) -> int:
    """The plugin's text shows a composite raw value as its 48 bits: min, max, avg (wear
    leveling) or pct, count (throttle) packed low to high."""
    if isinstance(raw, dict):
        v = 0
        for i, part in enumerate(raw.values()):
            v |= int(part) << (16 * i if len(raw) == 3 else 8 * i)
        return v
    return int(float(raw)) if isinstance(raw, str) else int(raw)  # type: ignore[call-overload]


@intel.command("smart-log-add")
def smart_log_add(
    path: Path = ImageDir,
    nsid: int = NvmeInt(0xFFFFFFFF, "-n", "--namespace-id", what="a namespace ID", top=U32, help="accepted; the log is controller-wide"),
    json_out: bool = typer.Option(False, "-j", "--json", help="JSON (the plugin's flag; -o json does the same)"),
    fmt: str = OutputFmt,
) -> None:
    """Intel additional SMART log (0xCA): NAND and host bytes written (0xF4/0xF5), wear leveling, …"""
    check_fmt(fmt)
    vendor = drive_view(path).vendor_log()
    if not vendor.get("intel_smart_add"):
        fail(f"{path}: log page 0xca is not kept by this drive (INVALID_LOG_PAGE): only presets with Intel's additional SMART log have it")
    data = nvmejson.intel_smart_log_add(str(path), vendor, drive_view(path).smart_log())
    if json_out or fmt == "json":
        emit_json(data)
        return
    lines = [
        f"Additional Smart Log for NVME device:{path} namespace-id:{nsid:x}",
        "ID             KEY                                 Normalized     Raw",
    ]
    for attr, key, entry in zip(ATTRIBUTE_IDS, TEXT_KEYS, data["Device stats"].values()):
        lines.append(f"{attr:#x}    {key:<45}  {entry['normalized']:3d}         {_raw_number(entry['raw'])}")
    typer.echo("\n".join(lines))
