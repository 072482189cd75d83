"""Rebuild assist verbs of ``ssdtwin nvme``: Get LBA Status (the LBA ranges the drive marks
unrecoverable, in nvme-cli's form) and the vendor command that marks LBAs unrecoverable.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from ..core_types import LbaStatus
from ..nvmefmt import c_hex
from .common import U8, U16, U32, U64, ImageDir, NvmeInt, OutputFmt, check_fmt, opened

CMPC = {
    1: "Completed due to transferring the amount of data specified in the MNDW field",
    2: "Completed due to having performed the action specified in the Action Type field over the number of logical blocks "
    "specified in the Range Length field",
}


#: nvme-cli 2.16's text for each Completion Condition (stdout_lba_status).
CMPC_TEXT = {
    0: ("\tNo indication of the completion condition",),
    1: (
        "\tCompleted transferring the amount of data specified in the",
        "\tMNDW field. But, additional LBA Status Descriptor Entries are",
        "\tavailable to transfer or scan did not complete (if ATYPE = 10h)",
    ),
    2: (
        "\tCompleted the specified action over the number of LBAs specified",
        "\tin the Range Length field and transferred all available LBA Status",
        "\tDescriptor Entries",
    ),
}


def lba_status_json(d: LbaStatus) -> dict[str, object]:
    """nvme-cli's JSON form of an LBA Status Descriptor list (one key per descriptor)."""
    out: dict[str, object] = {
        "Number of LBA Status Descriptors (NLSD)": d["nlsd"],
        "Completion Condition (CMPC)": d["cmpc"],
        "cmpc-definition": CMPC[d["cmpc"]],
    }
    for i, e in enumerate(d["descs"]):
        out[f"LSD entry {i}"] = [{"DSLBA": f"0x{e['dslba']:016x}"}, {"NLB": f"0x{e['nlb']:08x}"}, {"status": "0x00"}]
    return out


def get_lba_status(
    path: Path = ImageDir,
    nsid: int = NvmeInt(..., "-n", "--namespace-id", what="a namespace ID", low=1, top=U32),
    slba: int = NvmeInt(0, "-s", "--start-lba", what="an LBA", top=U64),
    mndw: int = NvmeInt(0xFFFF, "-m", "--max-dw", what="a number of dwords", top=U32, help="dwords of descriptors to return, 0's based"),
    a: int = NvmeInt(0x11, "-a", "--action", what="an action type", top=U8, help="0x10 scan and report, 0x11 tracked LBAs (the same here)"),
    rl: int = NvmeInt(0, "-l", "--range-len", what="a number of blocks", top=U16, help="blocks to look at (0: to the end)"),
    timeout: int = NvmeInt(0, "-t", "--timeout", what="a timeout in ms", top=U32, help="accepted (ms)"),
    fmt: str = OutputFmt,
) -> None:
    """Get LBA Status (rebuild assist): the LBA ranges the drive marks unrecoverable."""
    check_fmt(fmt)
    with opened(path, writable=False) as d:
        data = d.nvme.get_lba_status(nsid, slba, mndw, a, rl)
    if fmt == "json":
        typer.echo(json.dumps(lba_status_json(data), indent=2))
        return
    # nvme-cli 2.16's stdout_lba_status, line for line (2.4's printed the LBA in decimal
    # digits after "0x"); the JSON above is 2.7+'s form too.
    lines = [
        f"Number of LBA Status Descriptors(NLSD): {data['nlsd']}",
        f"Completion Condition(CMPC): {data['cmpc']}",
        *CMPC_TEXT.get(data["cmpc"], ()),
    ]
    lines += [f"{{ DSLBA: {c_hex(e['dslba'], 16)}, NLB: {c_hex(e['nlb'], 8)}, Status: {c_hex(0, 2)} }}" for e in data["descs"]]
    typer.echo("\n".join(lines))


def inject_media_error(
    path: Path = ImageDir,
    nsid: int = NvmeInt(..., "-n", "--namespace-id", what="a namespace ID", low=1, top=U32),
    slba: int = NvmeInt(..., "-s", "--start-lba", what="an LBA", top=U64),
    nlb: int = NvmeInt(..., "-c", "--block-count", what="a number of blocks", low=1, top=U64, help="blocks (1's based)"),
) -> None:
    """Vendor command: mark LBAs unrecoverable (reads fail with READ_ERROR until rewritten)."""
    with opened(path, writable=True) as d:
        d.nvme.inject_media_error(nsid, slba, nlb)
    typer.echo(f"inject-media-error: Success, nsid:{nsid} slba:{slba} blocks:{nlb}")


def register(app: typer.Typer) -> None:
    """Add the LBA status verbs to the ``nvme`` app."""
    app.command("get-lba-status")(get_lba_status)
    app.command("inject-media-error")(inject_media_error)
