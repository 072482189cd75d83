"""``ssdtwin nvme`` verbs for lists, logs and sanitize (docs/cli.md): ``list-ns``,
``list-ctrl``, ``error-log``, ``fw-log``, ``get-log``, ``sanitize``, ``sanitize-log``.

Flags and JSON field names follow nvme-cli 2.x (``nvme help``); a drive image directory
stands where nvme-cli takes a device. The read-only verbs answer from a served image's live
state like the other read-only verbs (``common.drive_view``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional, cast

import typer

from .. import nvmefmt, nvmejson
from ..core_types import ErrorLogEntry
from .common import U8, U16, U32, ImageDir, NvmeInt, OutputFmt, check_fmt, drive_view, emit_json, fail, int_arg, opened, write_binary

#: The drive's one controller (its Identify Controller CNTLID).
CONTROLLER_ID = 1
#: The verbs of this module, registered on the ``nvme`` app by :func:`register`.
_VERBS: list[tuple[str, Callable[..., None]]] = []


def verb(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def add(fn: Callable[..., None]) -> Callable[..., None]:
        _VERBS.append((name, fn))
        return fn

    return add


def register(app: typer.Typer) -> None:
    """Add this module's verbs to the ``nvme`` app."""
    for name, fn in _VERBS:
        app.command(name)(fn)


#: nvme-cli's names for the sanitize actions (``--sanact start-block-erase``).
SANACT_NAMES = {"exit-failure": 1, "start-block-erase": 2, "start-overwrite": 3, "start-crypto-erase": 4, "exit-media-verification": 5}


@verb("list-ns")
def nvme_list_ns(
    path: Path = ImageDir,
    nsid: int = NvmeInt(
        1, "-n", "--namespace-id", what="the first NSID to list", low=1, top=U32, help="the first NSID to list (nvme-cli 2.x)"
    ),
    cntid: int = NvmeInt(0, "-c", "--cntid", what="a controller ID", top=U16, help="accepted; the drive has one controller"),
    all_ns: bool = typer.Option(False, "-a", "--all", help="every allocated namespace, attached or not (CNS 10h)"),
    fmt: str = OutputFmt,
) -> None:
    """Identify Active (or, with --all, Allocated) Namespace ID list from -n on."""
    check_fmt(fmt)
    # nvme-cli 2.x sends CNS 02h/10h with NSID n - 1: the NSIDs greater than it, n included.
    # The controller refuses FFFFFFFEh and FFFFFFFFh there (NVMe 1.4 Figure 245).
    if nsid - 1 >= 0xFFFFFFFE:
        fail(f"INVALID_NS(0x400b): a namespace list from NSID {nsid:#x}: Identify CNS 02h/10h refuses NSID {nsid - 1:#x}")
    ids = [r["nsid"] for r in drive_view(path).list_ns() if (all_ns or r["attached"]) and r["nsid"] >= nsid]
    if fmt == "json":
        emit_json({"nsid_list": [{"nsid": i} for i in ids]})
    elif ids:  # as nvme-cli: no line at all for an empty list
        typer.echo("\n".join(f"[{k:4}]:{i:#x}" for k, i in enumerate(ids)))


@verb("list-ctrl")
def nvme_list_ctrl(
    path: Path = ImageDir,
    cntid: int = NvmeInt(0, "-c", "--cntid", what="a controller ID", top=U16, help="list controller IDs from this one on"),
    nsid: Optional[int] = NvmeInt(
        None, "-n", "--namespace-id", what="a namespace ID", low=1, top=U32, help="controllers attached to this namespace"
    ),
    fmt: str = OutputFmt,
) -> None:
    """Identify Controller List: the subsystem's controllers, or those attached to -n."""
    check_fmt(fmt)
    view = drive_view(path)
    ctrls = [CONTROLLER_ID] if cntid <= CONTROLLER_ID else []
    if nsid is not None:
        row = next((r for r in view.list_ns() if r["nsid"] == nsid), None)
        if row is None:
            view.id_ns(nsid)  # the controller's INVALID_NS
        ctrls = ctrls if row and row["attached"] else []
    if fmt == "json":
        emit_json({"num_ctrl": len(ctrls), "ctrl_list": [{"ctrl_id": c} for c in ctrls]})
    else:
        typer.echo(f"num of ctrls present: {len(ctrls)}")
        for k, c in enumerate(ctrls):
            typer.echo(f"[{k:4}]:{c:#x}")


@verb("error-log")
def nvme_error_log(
    path: Path = ImageDir,
    log_entries: int = NvmeInt(
        64, "-e", "--log-entries", what="a number of entries", low=1, top=64, help="entries to show (the log keeps 64)"
    ),
    raw: bool = typer.Option(False, "-b", "--raw-binary", help="the raw page on stdout"),
    fmt: str = OutputFmt,
) -> None:
    """Error Information log (01h): I/O commands the drive failed, newest first."""
    check_fmt(fmt, raw)
    view = drive_view(path)
    if raw:
        write_binary(view.log_page(0x01, 64 * log_entries))
        return
    entries = view.error_log()
    rows = (entries + [_empty_error_entry() for _ in range(log_entries)])[:log_entries]  # as nvme-cli: every entry asked for
    if fmt == "json":
        emit_json(nvmejson.error_log(rows))
    else:
        typer.echo(nvmefmt.error_log(rows, str(path)))


def _empty_error_entry() -> ErrorLogEntry:
    """An unused entry: every field of the core's entry 0."""
    return cast(ErrorLogEntry, dict.fromkeys(ErrorLogEntry.__annotations__, 0))


@verb("fw-log")
def nvme_fw_log(
    path: Path = ImageDir,
    raw: bool = typer.Option(False, "-b", "--raw-binary", help="the raw page on stdout"),
    fmt: str = OutputFmt,
) -> None:
    """Firmware Slot Information log (03h): slot 1 active with the preset's firmware."""
    check_fmt(fmt, raw)
    view = drive_view(path)
    if raw:
        write_binary(view.log_page(0x03, 512))
        return
    page = view.log_page(0x03, 64)
    if fmt == "json":
        emit_json(nvmejson.fw_log(str(path), page))
        return
    lines = [f"Firmware Log for device:{path}", f"afi  : {page[0]:#x}"]
    for n in range(1, 8):
        slot = page[8 * n : 8 * n + 8]
        if slot[0]:
            lines.append(f"frs{n} : {int.from_bytes(slot, 'little'):#018x} ({nvmejson.fw_rev(slot)})")
    typer.echo("\n".join(lines))


@verb("get-log")
def nvme_get_log(
    path: Path = ImageDir,
    lid: int = NvmeInt(
        ...,
        "-i",
        "--log-id",
        what="a log page identifier",
        top=U8,
        help="log page identifier (0x01 error, 0x02 SMART, 0x03 firmware slot, 0x81 sanitize)",
    ),
    length: int = NvmeInt(..., "-l", "--log-len", what="a length in bytes", low=1, top=1 << 20, help="bytes to read"),
    nsid: int = NvmeInt(
        0xFFFFFFFF, "-n", "--namespace-id", what="a namespace ID", top=U32, help="accepted; the pages kept are controller-wide"
    ),
    raw: bool = typer.Option(False, "-b", "--raw-binary", help="the raw bytes on stdout"),
    fmt: str = OutputFmt,
) -> None:
    """Get Log Page: the raw bytes, as nvme-cli's hex dump (or -b binary, -o json)."""
    check_fmt(fmt, raw)
    data = drive_view(path).log_page(lid, length)  # NvmeError INVALID_LOG_PAGE for others
    if raw:
        write_binary(data)
    elif fmt == "json":
        emit_json({"log_id": lid, "namespace_id": nsid, "log_len": length, "data": nvmefmt.hex_lines(data)})
    else:
        typer.echo(f"Device:{path} log-id:{lid} namespace-id:{nsid:#x}")
        typer.echo(nvmefmt.hexdump(data))


def sanact_arg(text: str) -> int:
    """--sanact: 1..7 or one of nvme-cli's names (unsupported values reach the controller)."""
    if text in SANACT_NAMES:
        return SANACT_NAMES[text]
    return int_arg("-a/--sanact", text, f"a sanitize action (1..7 or {', '.join(SANACT_NAMES)})", 7)


@verb("sanitize")
def nvme_sanitize(
    path: Path = ImageDir,
    sanact: str = typer.Option(..., "-a", "--sanact", help="1 exit failure mode, 2 block erase, 3 overwrite, 4 crypto erase"),
    pattern: int = NvmeInt(0, "-p", "--ovrpat", what="a 32-bit pattern", top=U32, help="overwrite pattern (32 bits)"),
    owpass: int = NvmeInt(0, "-n", "--owpass", what="a number of overwrite passes", top=15, help="overwrite passes (0 = 16)"),
    oipbp: bool = typer.Option(False, "-i", "--oipbp", help="invert the pattern between passes"),
    no_dealloc: bool = typer.Option(False, "-d", "--no-dealloc", help="refused: the drive deallocates after sanitize"),
    ause: bool = typer.Option(False, "-u", "--ause", help="allow unrestricted sanitize exit"),
    emvs: bool = typer.Option(False, "-e", "--emvs", help="refused: no media verification state"),
    wait: bool = typer.Option(False, "--wait", help="ssdtwin: let the drive run until the sanitize ends (the clock advances)"),
) -> None:
    """Sanitize the whole drive. Every mapping (and served data) goes at once; the drive then
    refuses I/O until its clock passes the action's duration (docs/cli.md)."""
    act = sanact_arg(sanact)
    if emvs:
        fail("-e/--emvs: this drive has no media verification state (NVMe status INVALID_FIELD)")
    with opened(path, writable=True) as d:
        d.nvme.sanitize(act, ause=ause, owpass=owpass, oipbp=oipbp, no_dealloc=no_dealloc, ovrpat=pattern)
        waited = d.nvme.wait_sanitize() if wait else 0
        log = d.view().sanitize_log()
    note = f", waited {waited / 1e9:.3f} s" if wait else ""
    typer.echo(f"sanitize: Success, sanact:{act} ({log['sstat']['status']}{note})")


@verb("sanitize-log")
def nvme_sanitize_log(
    path: Path = ImageDir,
    rae: bool = typer.Option(False, "-r", "--rae", help="accepted (no asynchronous events to retain)"),
    human: bool = typer.Option(False, "-H", "--human-readable", help="decode the fields"),
    raw: bool = typer.Option(False, "-b", "--raw-binary", help="the raw page on stdout"),
    wait: bool = typer.Option(False, "--wait", help="ssdtwin: let the drive run until a sanitize in progress ends first"),
    fmt: str = OutputFmt,
) -> None:
    """Sanitize Status log (81h): progress, status, CDW10 and the estimated times (s)."""
    check_fmt(fmt, raw)
    if wait:
        with opened(path, writable=True) as d:
            d.nvme.wait_sanitize()
    view = drive_view(path)
    if raw:
        write_binary(view.log_page(0x81, 512))
        return
    if fmt == "json":
        emit_json(nvmejson.sanitize_log(str(path), view.sanitize_log()))
    else:
        typer.echo(nvmefmt.sanitize_log(view.log_page(0x81, 512), human))
