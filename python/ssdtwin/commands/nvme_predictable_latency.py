"""Predictable Latency Mode (NVMe 1.4 IO Determinism) verbs of ``ssdtwin nvme``: the
Predictable Latency Per NVM Set log (0Ah) and the Event Aggregate log (0Bh), with
nvme-cli's names, flags and JSON field names (docs/tenants.md, "Predictable latency"). The
feature itself is set with ``set-feature -f 0x13/0x14`` (nvme.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import cast

import typer

from ..core_types import PredLatLog
from .common import U16, ImageDir, NvmeInt, OutputFmt, check_fmt, opened

PLM_STATUS = {0: "not enabled", 1: "deterministic window (DTWIN)", 2: "non-deterministic window (NDWIN)"}

#: nvme-cli 2.4's nvme_show_predictable_latency_per_nvmset, its labels and spacing (the
#: trailing space after NDWIN Time Minimum High is nvme-cli's).
PRED_LAT_ROWS = [
    ("Status: ", "status"),
    ("Event Type: ", "event_type"),
    ("DTWIN Reads Typical: ", "dtwin_reads_typical"),
    ("DTWIN Writes Typical: ", "dtwin_writes_typical"),
    ("DTWIN Time Maximum: ", "dtwin_time_maximum"),
    ("NDWIN Time Minimum High: ", "ndwin_time_minimum_high"),
    ("NDWIN Time Minimum Low: ", "ndwin_time_minimum_low"),
    ("DTWIN Reads Estimate: ", "dtwin_reads_estimate"),
    ("DTWIN Writes Estimate: ", "dtwin_writes_estimate"),
    ("DTWIN Time Estimate: ", "dtwin_time_estimate"),
]


def pred_lat_text(log: PredLatLog, device: str) -> str:
    """nvme-cli 2.4's text line for line (two empty lines at the end), then the twin's notes
    on lines of their own: what the status means and, with bit 14 of the event type, why."""
    d = cast(Mapping[str, int], log)  # every field a number, read by name from PRED_LAT_ROWS
    lines = [
        f"Predictable Latency Per NVM Set Log for device: {device}",
        f"Predictable Latency Per NVM Set Log for NVM Set ID: {d['nvmset_id']}",
    ]
    lines += [f"{label}{d[key]}{' ' if key == 'ndwin_time_minimum_high' else ''}" for label, key in PRED_LAT_ROWS]
    lines += ["", ""]
    lines.append(f"(twin) status {d['status']}: {PLM_STATUS.get(d['status'], 'reserved')}; times in ms")
    if d["event_type"] & 0x4000:
        lines.append("(twin) event type bit 14: the controller ended a DTWIN (a typical or maximum value was exceeded)")
    return "\n".join(lines)


def pred_lat_log(
    path: Path = ImageDir,
    nvmsetid: int = NvmeInt(..., "-i", "--nvmset-id", what="an NVM Set ID", top=U16, help="the NVM Set"),
    fmt: str = OutputFmt,
) -> None:
    """Predictable Latency Per NVM Set log (0Ah): window, events, DTWIN limits and estimates."""
    check_fmt(fmt)
    with opened(path, writable=False) as d:
        data = d.nvme.pred_lat_log(nvmsetid)
        state = d.nvme.plm_state()
    if fmt == "json":
        typer.echo(json.dumps(data, indent=2))
        return
    typer.echo(pred_lat_text(data, str(path)))
    if state and state[nvmsetid - 1]["last_dtwin_ns"]:
        s = state[nvmsetid - 1]
        why = f"the controller ({s['ended_by']})" if s.get("ended_by") else "the host"
        typer.echo(f"(twin) last DTWIN: {s['last_dtwin_ns'] / 1e6:.1f} ms, ended by {why}")


def pred_lat_event_agg_log(path: Path = ImageDir, fmt: str = OutputFmt) -> None:
    """Predictable Latency Event Aggregate log (0Bh): the NVM Sets with events."""
    check_fmt(fmt)
    with opened(path, writable=False) as d:
        data = d.nvme.pred_lat_event_agg()
    if fmt == "json":
        typer.echo(json.dumps(data, indent=2))
    else:
        typer.echo(f"Predictable Latency Event Aggregate Log for device: {path}\nNumber of Entries Available: {data['num_entries_avail']}")
        for i, e in enumerate(data["list_of_entries"], 1):  # nvme-cli 2.4's "Entry[%d]: %u"
            typer.echo(f"Entry[{i}]: {e['entry']}")


def register(app: typer.Typer) -> None:
    """Add the predictable-latency verbs to the ``nvme`` app."""
    app.command("predictable-lat-log")(pred_lat_log)
    app.command("pred-lat-log", hidden=True)(pred_lat_log)
    app.command("pred-lat-event-agg-log")(pred_lat_event_agg_log)
