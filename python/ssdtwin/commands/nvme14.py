"""NVMe 1.4 verbs of ``ssdtwin nvme``: predictable latency (IO Determinism), ANA, LBA status (rebuild assist), with
nvme-cli's names, flags and JSON field names (docs/tenants.md, "Predictable latency").

``register`` adds them to the ``nvme`` app (commands/nvme.py calls it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from .common import U16, U32, U64, ImageDir, OutputFmt, check_fmt, fail, opened

PLM_STATUS = {0: "not enabled", 1: "deterministic window (DTWIN)", 2: "non-deterministic window (NDWIN)"}

PRED_LAT_ROWS = [
    ("NVM Set ID", "nvmset_id"),
    ("Status", "status"),
    ("Event Type", "event_type"),
    ("DTWIN Reads Typical", "dtwin_reads_typical"),
    ("DTWIN Writes Typical", "dtwin_writes_typical"),
    ("DTWIN Time Maximum", "dtwin_time_maximum"),
    ("NDWIN Time Minimum High", "ndwin_time_minimum_high"),
    ("NDWIN Time Minimum Low", "ndwin_time_minimum_low"),
    ("DTWIN Reads Estimate", "dtwin_reads_estimate"),
    ("DTWIN Writes Estimate", "dtwin_writes_estimate"),
    ("DTWIN Time Estimate", "dtwin_time_estimate"),
]


def pred_lat_text(d: dict[str, int], device: str) -> str:
    lines = [f"Predictable Latency Per NVM Set Log for device: {device}"]
    for label, key in PRED_LAT_ROWS:
        v = d[key]
        note = ""
        if key == "status":
            note = f" ({PLM_STATUS.get(v, 'reserved')})"
        elif key == "event_type" and v & 0x4000:
            note = " (the controller ended a DTWIN: a typical or maximum value was exceeded)"
        elif key.endswith(("_maximum", "_high", "_low", "time_estimate")):
            note = " ms"
        lines.append(f"{label}: {v}{note}")
    return "\n".join(lines)


def pred_lat_log(
    path: Path = ImageDir,
    nvmsetid: int = typer.Option(..., "-i", "--nvmset-id", min=0, max=U16, help="the NVM Set"),
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
        for e in data["list_of_entries"]:
            typer.echo(f"Entry: {e['entry']} (NVM Set ID)")


ANA_STATE_NAMES = ["optimized", "non-optimized", "inaccessible", "persistent-loss", "change"]


def ana_log(path: Path = ImageDir, fmt: str = OutputFmt) -> None:
    """Asymmetric Namespace Access log (0Ch): each ANA group (one per namespace) and its state."""
    check_fmt(fmt)
    with opened(path, writable=False) as d:
        data = d.nvme.ana_log()
    if fmt == "json":
        typer.echo(json.dumps({"Asymmetric Namespace Access Log for NVMe device": str(path), **data}, indent=2))
        return
    lines = [f"Asymmetric Namespace Access Log for NVMe device: {path}", f"chgcnt\t:\t{data['chgcnt']}", f"ngrps\t:\t{data['ngrps']}"]
    for g in data["ANA DESC LIST "]:
        nsids = " ".join(str(n["nsid"]) for n in g["NSIDS"])
        lines.append(f"grpid\t:\t{g['grpid']}\nnnsids\t:\t{g['nnsids']}\nchgcnt\t:\t{g['chgcnt']}\nstate\t:\t{g['state']}\n\t{nsids}")
    typer.echo("\n".join(lines))


def ana_state(
    path: Path = ImageDir,
    group: int = typer.Option(..., "-g", "--group", min=0, max=U32, help="ANA group (ANAGRPID = the namespace's NSID)"),
    state: str = typer.Option(..., "-s", "--state", help="optimized, non-optimized, inaccessible, persistent-loss or change"),
) -> None:
    """Vendor command: set an ANA group's state (what a multipath target's failover does)."""
    with opened(path, writable=True) as d:
        d.nvme.set_ana_state(group, state)
    typer.echo(f"ana-state: Success, group:{group} state:{state}")


CMPC = {
    1: "Completed due to transferring the amount of data specified in the MNDW field",
    2: "Completed due to having performed the action specified in the Action Type field over the number of logical blocks "
    "specified in the Range Length field",
}


def lba_status_json(d: dict[str, Any]) -> dict[str, Any]:
    """nvme-cli's JSON form of an LBA Status Descriptor list."""
    out: dict[str, Any] = {
        "Number of LBA Status Descriptors (NLSD)": d["nlsd"],
        "Completion Condition (CMPC)": d["cmpc"],
        "cmpc-definition": CMPC[d["cmpc"]],
    }
    for i, e in enumerate(d["descs"]):
        out[f"LSD entry {i}"] = [{"DSLBA": f"0x{e['dslba']:016x}"}, {"NLB": f"0x{e['nlb']:08x}"}, {"status": "0x00"}]
    return out


def get_lba_status(
    path: Path = ImageDir,
    nsid: int = typer.Option(..., "-n", "--namespace-id", min=1, max=U32),
    slba: int = typer.Option(0, "-s", "--start-lba", min=0, max=U64),
    mndw: int = typer.Option(0xFFFF, "-m", "--max-dw", min=0, max=U32, help="dwords of descriptors to return, 0's based"),
    atype: str = typer.Option("0x11", "-a", "--action", help="0x10 scan and report, 0x11 tracked LBAs (the same here)"),
    rl: int = typer.Option(0, "-l", "--range-len", min=0, max=U16, help="blocks to look at (0: to the end)"),
    timeout: int = typer.Option(0, "-t", "--timeout", min=0, help="accepted (ms)"),
    fmt: str = OutputFmt,
) -> None:
    """Get LBA Status (rebuild assist): the LBA ranges the drive marks unrecoverable."""
    check_fmt(fmt)
    try:
        a = int(atype, 0)
    except ValueError:
        a = -1
    if not 0 <= a <= 0xFF:
        fail(f"-a/--action '{atype}': an action type, 0x10 or 0x11")
    with opened(path, writable=False) as d:
        data = d.nvme.get_lba_status(nsid, slba, mndw, a, rl)
    if fmt == "json":
        typer.echo(json.dumps(lba_status_json(data), indent=2))
        return
    lines = [
        f"Number of LBA Status Descriptors(NLSD): {data['nlsd']}",
        f"Completion Condition(CMPC): {data['cmpc']}",
        f"\t{CMPC[data['cmpc']]}",
        "LBA Status Descriptor Entries",
        f"{'DSLBA':<20} {'NLB':<12} Status",
    ]
    lines += [f"0x{e['dslba']:016x}   0x{e['nlb']:08x}   0x00" for e in data["descs"]]
    typer.echo("\n".join(lines))


def inject_media_error(
    path: Path = ImageDir,
    nsid: int = typer.Option(..., "-n", "--namespace-id", min=1, max=U32),
    slba: int = typer.Option(..., "-s", "--start-lba", min=0, max=U64),
    nlb: int = typer.Option(..., "-c", "--block-count", min=1, max=U64, help="blocks (1's based)"),
) -> None:
    """Vendor command: mark LBAs unrecoverable (reads fail with READ_ERROR until rewritten)."""
    with opened(path, writable=True) as d:
        d.nvme.inject_media_error(nsid, slba, nlb)
    typer.echo(f"inject-media-error: Success, nsid:{nsid} slba:{slba} blocks:{nlb}")


def register(app: typer.Typer) -> None:
    """Add the NVMe 1.4 verbs to the ``nvme`` app."""
    app.command("ana-log")(ana_log)
    app.command("ana-state")(ana_state)
    app.command("get-lba-status")(get_lba_status)
    app.command("inject-media-error")(inject_media_error)
    app.command("predictable-lat-log")(pred_lat_log)
    app.command("pred-lat-log", hidden=True)(pred_lat_log)
    app.command("pred-lat-event-agg-log")(pred_lat_event_agg_log)
