"""``ssdtwin nvme …``: nvme-cli verbs against a drive image (docs/cli.md).

Flags follow nvme-cli, with a drive image directory where nvme-cli takes a device. The
read-only verbs show a served image's live state through the same structure as an image's
(``common.drive_view``); the others open the image writable and commit only on success.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Optional

import typer

from .. import nvmefmt, nvmejson
from ..drive import SQ_PRIORITIES, Drive
from . import nvme_ana, nvme_intel, nvme_lba_status, nvme_media, nvme_predictable_latency
from .common import (
    U8,
    U16,
    U32,
    U64,
    ImageDir,
    NvmeInt,
    OutputFmt,
    check_fmt,
    drive_view,
    emit_json,
    fail,
    int_arg,
    opened,
    parse_whole,
    plain_float,
    plain_int,
    say,
    write_binary,
)

nvme = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="nvme-cli verbs against a drive image.")


@nvme.command("list")
def nvme_list(
    path: Path = ImageDir,
    verbose: bool = typer.Option(False, "-v", "--verbose", help="subsystem, controller and namespace tables (JSON: the tree)"),
    fmt: str = OutputFmt,
) -> None:
    """Namespaces of the drive (like `nvme list`; -v: the subsystem and controller too)."""
    check_fmt(fmt)
    view = drive_view(path)
    ctrl, rows = view.id_ctrl(), view.list_ns()
    if fmt == "json":
        emit_json((nvmejson.list_detail if verbose else nvmejson.list_simple)(str(path), ctrl, rows))
    else:
        typer.echo((nvmefmt.nvme_list_detailed if verbose else nvmefmt.nvme_list)(str(path), ctrl, rows))


VendorSpecific = typer.Option(False, "-v", "--vendor-specific", help="the twin's vendor-specific fields too (vs_*)")
RawBinary = typer.Option(False, "-b", "--raw-binary", help="the raw 4096-byte structure on stdout")


@nvme.command("id-ctrl")
def nvme_id_ctrl(path: Path = ImageDir, vendor: bool = VendorSpecific, raw: bool = RawBinary, fmt: str = OutputFmt) -> None:
    """Identify Controller (tnvmcap, unvmcap, nn, oacs …)."""
    check_fmt(fmt, raw)
    view = drive_view(path)
    if raw:
        write_binary(view.identify(0x01))
        return
    data = view.id_ctrl()
    if fmt == "json":
        emit_json(nvmejson.id_ctrl(data, vendor))
    else:
        typer.echo(nvmefmt.id_ctrl(data))


@nvme.command("id-ns")
def nvme_id_ns(
    path: Path = ImageDir,
    nsid: int = NvmeInt(..., "-n", "--namespace-id", what="a namespace ID", top=U32),
    force: bool = typer.Option(False, "--force", help="the namespace even if not attached (Identify CNS 11h)"),
    vendor: bool = VendorSpecific,
    raw: bool = RawBinary,
    fmt: str = OutputFmt,
) -> None:
    """Identify Namespace (nsze, ncap, nuse, flbas, lbaf, npwg/npwa/npdg/npda/nows …); an
    inactive NSID (not attached, or not allocated) gives zeros, as a drive does."""
    check_fmt(fmt, raw)
    view = drive_view(path)
    data = view.identify_ns(nsid, force)  # NvmeError INVALID_NS for 0 and NSIDs past NN
    row = next((r for r in view.list_ns() if r["nsid"] == nsid), None)
    if nsid == 0xFFFFFFFF:
        pass  # the capabilities common to all namespaces (NVMe 1.4 §5.15.2.1), no one namespace's
    elif row is None or not (row["attached"] or force):
        what = "is not attached" if row else "does not exist"
        hint = ": --force shows it (CNS 11h)" if row else ""
        say(f"ssdtwin: namespace {nsid} {what}, an inactive NSID: Identify Namespace returns zeros{hint}")
    if raw:
        write_binary(view.identify(0x11 if force else 0x00, nsid))
        return
    if fmt == "json":
        emit_json(nvmejson.id_ns(data, vendor))
    else:
        typer.echo(nvmefmt.id_ns(data, nsid))


@nvme.command("create-ns")
def nvme_create_ns(
    path: Path = ImageDir,
    nsze: str = typer.Option(..., "-s", "--nsze", help="size in logical blocks"),
    ncap: str = typer.Option(..., "-c", "--ncap", help="capacity in logical blocks (= nsze: no thin provisioning)"),
    flbas: Optional[int] = NvmeInt(None, "-f", "--flbas", what="an LBA format index", top=U8, help="LBA format index"),
    block_size: Optional[int] = NvmeInt(
        None, "-b", "--block-size", what="an LBA size", low=1, top=U32, help="LBA size in bytes (picks the format)"
    ),
    nmic: int = NvmeInt(0, "-m", "--nmic", what="a multi-path I/O and sharing field", top=U8),
    dram: bool = typer.Option(False, "--dram", help="a DRAM namespace (vendor extension): within the DRAM budget, no NAND behind it"),
    nvmsetid: int = NvmeInt(
        0,
        "-i",
        "--nvmset-id",
        "--nvm-set",
        what="an NVM Set ID",
        top=U16,
        help="NVM Set to place it in (0: the first with room; ssdtwin nvme id-nvmset)",
    ),
) -> None:
    """Namespace Management: create (nvme-cli flags; --dram for a DRAM namespace, -i for its NVM Set)."""
    s, c = blocks_arg("-s/--nsze", nsze), blocks_arg("-c/--ncap", ncap)
    with opened(path, writable=True) as d:
        if block_size is not None and flbas is not None:
            fail("give -b/--block-size or -f/--flbas, not both")
        if block_size is not None:
            flbas = lba_format_arg(d, block_size)
        nsid = d.nvme.create_ns(s, c, flbas=flbas or 0, nmic=nmic, dram=dram, nvmsetid=nvmsetid)
    typer.echo(f"create-ns: Success, created nsid:{nsid}")


def lba_format_arg(d: Drive, block_size: int) -> int:
    """The LBA format index for -b/--block-size, or a one-line error naming the allowed sizes."""
    sizes = d.nvme.lba_sizes()
    if block_size not in sizes:
        fail(f"-b/--block-size {block_size}: not an LBA format of this drive (allowed: {', '.join(map(str, sizes))})")
    return sizes.index(block_size)


def blocks_arg(flag: str, text: str) -> int:
    """A namespace size (-s/-c): logical blocks, decimal or 0x hex, 1 .. 2^64-1."""
    v = int_arg(flag, text, "a whole number of logical blocks", U64)
    if v <= 0:
        fail(f"{flag} {text}: must be at least 1 block")
    return v


@nvme.command("delete-ns")
def nvme_delete_ns(path: Path = ImageDir, n: int = NvmeInt(..., "-n", "--namespace-id", what="a namespace ID", top=U32)) -> None:
    """Namespace Management: delete (-n 0xffffffff deletes all)."""
    with opened(path, writable=True) as d:
        d.nvme.delete_ns(n)
    typer.echo(f"delete-ns: Success, deleted nsid:{nvmefmt.c_int(n)}")  # nvme-cli's %d: -n 0xffffffff is -1


def ctrl_list(text: str) -> list[int]:
    try:
        ids = [plain_int(x.strip(), 0) for x in text.split(",") if x.strip()]
    except ValueError:
        ids = []
    if not ids or not all(0 <= i <= 0xFFFF for i in ids):
        fail(f"-c/--controllers '{text}': a comma-separated list of controller IDs (this drive has 1)")
    return ids


@nvme.command("attach-ns")
def nvme_attach_ns(
    path: Path = ImageDir,
    nsid: int = NvmeInt(..., "-n", "--namespace-id", what="a namespace ID", top=U32),
    controllers: str = typer.Option(..., "-c", "--controllers"),
) -> None:
    """Namespace Attachment: attach to controllers (this drive has controller 1)."""
    with opened(path, writable=True) as d:
        d.nvme.attach_ns(nsid, ctrl_list(controllers))
    typer.echo(f"attach-ns: Success, nsid:{nvmefmt.c_int(nsid)}")


@nvme.command("detach-ns")
def nvme_detach_ns(
    path: Path = ImageDir,
    nsid: int = NvmeInt(..., "-n", "--namespace-id", what="a namespace ID", top=U32),
    controllers: str = typer.Option("1", "-c", "--controllers"),
) -> None:
    """Namespace Attachment: detach from controllers."""
    with opened(path, writable=True) as d:
        d.nvme.detach_ns(nsid, ctrl_list(controllers))
    typer.echo(f"detach-ns: Success, nsid:{nvmefmt.c_int(nsid)}")


@nvme.command("format")
def nvme_format(
    path: Path = ImageDir,
    n: int = NvmeInt(..., "-n", "--namespace-id", what="a namespace ID", top=U32),
    lbaf: Optional[int] = NvmeInt(None, "-l", "--lbaf", what="an LBA format index", top=U8),
    ses: int = NvmeInt(0, "-s", "--ses", what="a secure erase setting", top=7, help="0 none, 1 user data erase, 2 cryptographic erase"),
    block_size: Optional[int] = NvmeInt(None, "-b", "--block-size", what="an LBA size", low=1, top=U32),
    pi: int = NvmeInt(0, "-i", "--pi", what="a protection information type", top=7, help="protection information type: 0 none, 1, 2 or 3"),
    pil: int = NvmeInt(0, "-p", "--pil", what="a PI location", top=1, help="PI location: 1 first, 0 last 8 bytes of the metadata"),
    ms: int = NvmeInt(
        0, "-m", "--ms", what="a metadata setting", top=1, help="1: extended LBA (metadata after each block's data), 0: separate buffer"
    ),
) -> None:
    """Format NVM: change the LBA format (metadata, protection information) and erase (every ses deallocates: a purge)."""
    with opened(path, writable=True) as d:
        if block_size is not None:
            lbaf = lba_format_arg(d, block_size)
        if lbaf is None:
            # Keep the namespace's format; a missing namespace is reported by the controller.
            lbaf = next((ns.flbas for ns in d.namespaces() if ns.nsid == n), 0)
        d.nvme.format(n, lbaf, ses, pi, bool(pil), bool(ms))
    typer.echo(f"Success formatting namespace:{n:x}")


PI_TAGS = {"guard": 4, "apptag": 2, "reftag": 1}


@nvme.command("inject-pi-error")
def nvme_inject_pi_error(
    path: Path = ImageDir,
    n: int = NvmeInt(..., "-n", "--namespace-id", what="a namespace ID", top=U32),
    lba: int = NvmeInt(..., "-s", "--start-block", what="an LBA", top=U64, help="the LBA whose stored PI goes bad"),
    tags: str = typer.Option("guard", "--tags", help="comma-separated: guard, apptag, reftag"),
) -> None:
    """Vendor error injection: the stored protection information of one LBA fails the given tag checks until it is written again."""
    names = [t.strip().lower() for t in tags.split(",") if t.strip()]
    bad = [t for t in names if t not in PI_TAGS]
    if bad or not names:
        fail(f"--tags {tags!r}: give one or more of {', '.join(PI_TAGS)}")
    mask = 0
    for t in names:
        mask |= PI_TAGS[t]
    with opened(path, writable=True) as d:
        d.nvme.inject_pi_error(n, lba, mask)
    typer.echo(f"PI error injected: namespace {n} LBA {lba} ({', '.join(names)})")


@nvme.command("smart-log")
def nvme_smart_log(
    path: Path = ImageDir,
    nsid: int = NvmeInt(
        0xFFFFFFFF, "-n", "--namespace-id", what="a namespace ID", top=U32, help="0 or 0xffffffff: the log is the controller's"
    ),
    raw: bool = typer.Option(False, "-b", "--raw-binary", help="the raw page on stdout"),
    human: bool = typer.Option(False, "-H", "--human-readable", help="the critical warning's bits one by one"),
    fmt: str = OutputFmt,
) -> None:
    """SMART / Health log (data units in thousands of 512 B, rounded up)."""
    check_fmt(fmt, raw)
    if nsid not in (0, 0xFFFFFFFF):
        # NVMe 1.4 §5.14.1.2: without a per-namespace log (Identify Controller LPA bit 0
        # clear on every preset) any other NSID fails with Invalid Field in Command.
        fail(
            f"INVALID_FIELD(0x4002): -n/--namespace-id {nsid}: this drive keeps the SMART / Health log"
            " for the controller only (id-ctrl lpa bit 0 clear): 0 or 0xffffffff"
        )
    view = drive_view(path)
    if raw:
        write_binary(view.log_page(0x02, 512))
        return
    data = view.smart_log()
    if fmt == "json":
        emit_json(nvmejson.smart_log(data, human))
    else:
        typer.echo(nvmefmt.smart_log(data, str(path), human, nsid))


@nvme.command("id-nvmset")
def nvme_id_nvmset(
    path: Path = ImageDir,
    # --nvmset_id: nvme-cli 2.4's spelling of the flag for this verb (create-ns has --nvmset-id).
    nvmsetid: int = NvmeInt(
        0, "-i", "--nvmset-id", "--nvmset_id", what="an NVM Set ID", top=U16, help="list the sets from this one on (0: every set)"
    ),
    fmt: str = OutputFmt,
) -> None:
    """Identify NVM Set List (CNS 04h): each set's capacity, Endurance Group, typical 4 KiB read."""
    check_fmt(fmt)
    data = drive_view(path).id_nvmset(nvmsetid)  # NvmeError INVALID_FIELD from the core
    typer.echo(json.dumps(data, indent=2) if fmt == "json" else nvmefmt.id_nvmset(data, nvmsetid))


@nvme.command("endurance-log")
def nvme_endurance_log(
    path: Path = ImageDir,
    endgid: int = NvmeInt(..., "-g", "--group-id", what="an Endurance Group ID", top=U16, help="Endurance Group (ENDGID: one per NVM Set)"),
    fmt: str = OutputFmt,
) -> None:
    """Endurance Group Information log (09h): one group's wear, traffic and capacity."""
    check_fmt(fmt)
    data = drive_view(path).endurance_log(endgid)
    if fmt == "json":
        emit_json(nvmejson.endurance_log(data))
    else:
        typer.echo(nvmefmt.endurance_log(data, str(path), endgid))


@nvme.command("vendor-log")
def nvme_vendor_log(path: Path = ImageDir, fmt: str = OutputFmt) -> None:
    """Host and NAND bytes written, lifetime WAF, GC and wear (Intel 0xF4/0xF5 where the preset has them)."""
    check_fmt(fmt)
    data = drive_view(path).vendor_log()
    typer.echo(json.dumps(data, indent=2) if fmt == "json" else nvmefmt.vendor_log(data, str(path)))


@nvme.command("get-feature")
def nvme_get_feature(
    path: Path = ImageDir,
    f: int = NvmeInt(..., "-f", "--feature-id", what="a feature ID", top=U8),
    nsid: int = NvmeInt(0, "-n", "--namespace-id", what="a namespace ID", top=U32),
    c11: int = NvmeInt(0, "-c", "--cdw11", what="a command dword", top=U32, help="the NVM Set of 0x13/0x14, the threshold of 0x04"),
    sel: int = NvmeInt(0, "-s", "--sel", what="a Select value", top=3, help="0 current, 1 default, 2 saved, 3 supported capabilities"),
    fmt: str = OutputFmt,
) -> None:
    """Get Features (0x02 power management, 0x13/0x14 predictable latency, 0x84 write protect, …)."""
    check_fmt(fmt)
    with opened(path, writable=False) as d:
        v = d.nvme.get_feature(f, nsid, c11, sel)
    if fmt == "json":
        emit_json({"feature_id": f, "sel": sel, "value": v})
    else:
        typer.echo(nvmefmt.get_feature(f, v, sel))


def mbps_arg(flag: str, text: Optional[str]) -> Optional[float]:
    """A bandwidth cap in MB/s as given: a finite number >= 0 (0 = no cap); its upper bound
    is the drive's (``mbps_cap``)."""
    if text is None:
        return None
    try:
        v = plain_float(text)
    except ValueError:
        fail(f"{flag} '{text}': must be a number of MB/s (0 = no cap)")
    if not 0 <= v < float("inf"):
        fail(f"{flag} {text}: must be 0 (no cap) or a positive number of MB/s")
    return v


def mbps_cap(flag: str, text: str, mbps: float, link_bytes_per_s: int) -> int:
    """``mbps`` in bytes/s, at most the host link's rate (above it a cap never binds): the
    range in the flag's own unit (the core's check said B/s, and the parse's allowed "up to
    1.1259e+09 MB/s")."""
    b = round(mbps * 1e6)
    if b > link_bytes_per_s or (mbps > 0 and b == 0):  # a cap rounding to 0 would be no cap at all
        fail(f"{flag} {text}: must be 0 (no cap) or from 1e-06 up to {link_bytes_per_s / 1e6:g} MB/s (the host link's rate)")
    return b


def _mbps(bytes_per_s: int) -> str:
    return f"{bytes_per_s / 1e6:g} MB/s" if bytes_per_s else "no cap"


@nvme.command("qos")
def nvme_qos(
    path: Path = ImageDir,
    n: Optional[int] = NvmeInt(
        None, "-n", "--namespace-id", what="a namespace ID", top=U32, help="the namespace to cap (all namespaces when reading back)"
    ),
    read_mbps: Optional[str] = typer.Option(None, "--read-mbps", help="read bandwidth cap, MB/s (10^6 B/s); 0 = no cap"),
    write_mbps: Optional[str] = typer.Option(None, "--write-mbps", help="write bandwidth cap, MB/s; 0 = no cap"),
    iops_text: Optional[str] = typer.Option(
        None,
        "--iops",
        metavar="NUM",
        help="commands per second cap, decimal or 0x hex; 0 = no cap; at most the drive's command ceiling (timing.ctrl_max_iops)",
    ),
    sq_priority: Optional[str] = typer.Option(None, "--sq-priority", help="class of its queues under WRR: urgent, high, medium, low"),
    fmt: str = OutputFmt,
) -> None:
    """Vendor QoS command: per-namespace bandwidth and IOPS caps, enforced by the controller
    (docs/cli.md). Without a cap flag it reads the caps back."""
    check_fmt(fmt)
    given = (mbps_arg("--read-mbps", read_mbps), mbps_arg("--write-mbps", write_mbps))
    # Its range is the drive's (checked once the image is open): a bound of the option's own
    # (it was 0..0x4000000000000) named a range no drive has.
    iops = None if iops_text is None else parse_whole(iops_text)
    if iops_text is not None and iops is None:
        fail(f"--iops '{iops_text}': must be a whole number of commands per second (0 = no cap), a decimal or 0x hex integer")
    if sq_priority is not None and sq_priority not in SQ_PRIORITIES:
        fail(f"--sq-priority '{sq_priority}': must be one of {', '.join(SQ_PRIORITIES)}")
    if all(c is None for c in (*given, iops)) and sq_priority is None:
        with opened(path, writable=False) as d:
            rows = [r for r in d.nvme.qos() if n is None or r["nsid"] == n]
            if n is not None and not rows:
                d.nvme.id_ns(n)  # the controller's INVALID_NS for a missing namespace
        if fmt == "json":
            emit_json(rows)
        else:
            for r in rows:
                typer.echo(
                    f"nsid {r['nsid']}: read {_mbps(r['read_bytes_per_s'])}, write {_mbps(r['write_bytes_per_s'])}, "
                    f"iops {r['iops'] or 'no cap'}, queues {r['sq_priority']}"
                )
        return
    if n is None:
        fail("-n/--namespace-id: give the namespace to cap")
    with opened(path, writable=True) as d:
        timing = d.spec()["timing"]
        link, ceiling = int(timing["host_link_bytes_per_s"]["value"]), int(timing["ctrl_max_iops"]["value"])
        flags = zip(("--read-mbps", "--write-mbps"), (read_mbps, write_mbps), given)
        caps = (
            *(None if v is None else mbps_cap(f, str(t), v, link) for f, t, v in flags),
            iops,  # a whole number (NvmeInt): 1.5 was rounded to 2 and 0.4 refused as rounding to 0
        )
        if iops is not None and not 0 <= iops <= ceiling:
            fail(f"--iops {iops_text}: must be 0 (no cap) or 1 up to {ceiling} (the controller's command ceiling)")
        old: Mapping[str, Any] = next(
            (r for r in d.nvme.qos() if r["nsid"] == n), {"read_bytes_per_s": 0, "write_bytes_per_s": 0, "iops": 0}
        )
        rw, ww, iw = (int(old[k]) if c is None else c for c, k in zip(caps, ("read_bytes_per_s", "write_bytes_per_s", "iops")))
        d.nvme.set_qos(n, rw, ww, iw)
        if sq_priority is not None:
            d.nvme.set_sq_priority(n, sq_priority)
        row = next(x for x in d.nvme.qos() if x["nsid"] == n)
    if fmt == "json":
        emit_json(row)
    else:
        typer.echo(f"qos: Success, nsid:{n}")


@nvme.command("set-feature")
def nvme_set_feature(
    path: Path = ImageDir,
    f: int = NvmeInt(..., "-f", "--feature-id", what="a feature ID", top=U8),
    v: int = NvmeInt(..., "-v", "-V", "--value", what="a command dword", top=U32, help="CDW11 (the NVM Set of 0x13/0x14)"),
    nsid: int = NvmeInt(0, "-n", "--namespace-id", what="a namespace ID", top=U32),
    c12: int = NvmeInt(
        0, "-c", "--cdw12", what="a command dword", top=U32, help="0x13: 1 enables predictable latency; 0x14: 1 DTWIN, 2 NDWIN"
    ),
    save: bool = typer.Option(
        False, "--save/--no-save", "-s", help="SV: also save the value (a power cycle restores it); 0x01, 0x02, 0x04, 0x08 are saveable"
    ),
) -> None:
    """Set Features (e.g. -f 2 -v 5 selects power state 5; -f 0x14 -V 1 -c 1: NVM Set 1 deterministic)."""
    with opened(path, writable=True) as d:
        d.nvme.set_feature(f, v, nsid, c12, save)
    typer.echo(nvmefmt.set_feature(f, v, c12, save))


# Predictable latency (IO Determinism), ANA and LBA status (rebuild assist) live in modules of their own.
nvme_ana.register(nvme)
nvme_lba_status.register(nvme)
nvme_predictable_latency.register(nvme)

# Lists, logs and sanitize live in nvme_media.py.
nvme_media.register(nvme)

# `nvme intel …`: the Intel plugin's verbs (nvme_intel.py).
nvme.add_typer(nvme_intel.intel, name="intel")
