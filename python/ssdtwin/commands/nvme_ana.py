"""Asymmetric Namespace Access verbs of ``ssdtwin nvme``: the ANA log (0Ch) in nvme-cli's
form, and the vendor command that sets a group's state (what a multipath target's failover
does; docs/tenants.md, ANA).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from .common import U32, ImageDir, NvmeInt, OutputFmt, check_fmt, opened

ANA_STATE_NAMES = ["optimized", "non-optimized", "inaccessible", "persistent-loss", "change"]


def ana_log(path: Path = ImageDir, fmt: str = OutputFmt) -> None:
    """Asymmetric Namespace Access log (0Ch): each ANA group (one per namespace) and its state."""
    check_fmt(fmt)
    with opened(path, writable=False) as d:
        data = d.nvme.ana_log()
    if fmt == "json":
        typer.echo(json.dumps({"Asymmetric Namespace Access Log for NVMe device": str(path), **data}, indent=2))
        return
    # nvme-cli 2.4's nvme_show_ana_log, line for line: its two headings, a tab-indented
    # nsid line per namespace and an empty line after each group.
    lines = [
        f"Asymmetric Namespace Access Log for NVMe device: {path}",
        "ANA LOG HEADER :-",
        f"chgcnt\t:\t{data['chgcnt']}",
        f"ngrps\t:\t{data['ngrps']}",
        "ANA Log Desc :-",
    ]
    for g in data["ANA DESC LIST "]:
        lines += [f"grpid\t:\t{g['grpid']}", f"nnsids\t:\t{g['nnsids']}", f"chgcnt\t:\t{g['chgcnt']}", f"state\t:\t{g['state']}"]
        lines += [f"\tnsid\t:\t{n['nsid']}" for n in g["NSIDS"]]
        lines.append("")
    typer.echo("\n".join(lines))


def ana_state(
    path: Path = ImageDir,
    group: int = NvmeInt(..., "-g", "--group", what="an ANA group ID", top=U32, help="ANA group (ANAGRPID = the namespace's NSID)"),
    state: str = typer.Option(..., "-s", "--state", help="optimized, non-optimized, inaccessible, persistent-loss or change"),
) -> None:
    """Vendor command: set an ANA group's state (what a multipath target's failover does)."""
    with opened(path, writable=True) as d:
        d.nvme.set_ana_state(group, state)
        # the state's name as the log spells it: `-s 3` echoed "state:3", `-s 0xf` "state:0xf"
        name = next(g["state"] for g in d.nvme.ana_log()["ANA DESC LIST "] if g["grpid"] == group)
    typer.echo(f"ana-state: Success, group:{group} state:{name}")


def register(app: typer.Typer) -> None:
    """Add the ANA verbs to the ``nvme`` app."""
    app.command("ana-log")(ana_log)
    app.command("ana-state")(ana_state)
