"""``ssdtwin reproduce``: re-run a published experiment (docs/sources.md) and print the
twin's figures beside the published ones (studies/experiments.py and the studies each
experiment names)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from .cluster import check_lab_memory
from .common import (
    OutputFmt,
    Seed,
    check_fmt,
    check_maps_fit,
    emit_json,
    fail,
    make_plot_folder,
    plain_int,
    scale_arg,
    sigterm_cleans_up,
    sizes_arg,
)


def reproduce_cmd(
    experiment: str = typer.Argument(
        ...,
        metavar="EXPERIMENT",
        help="cm6 (KIOXIA namespace brief), p5316 (Intel IU whitepaper), pblaze5 (Memblaze talk), kumoscale (KumoScale vs Ceph), "
        "ceph-reef (the Ceph lab's Reef posts), spdk-tcp (SPDK's NVMe-oF/TCP target report), spdk-rdma (SPDK's RDMA target and "
        "the kernel target in SPDK's reports) "
        "or shaping (a write-shaping tier in front of the P5316, docs/host.md)",
    ),
    scale: Optional[str] = typer.Option(None, "--scale", help="default 1/64 (pblaze5 --part mariadb: 1/256)"),
    seed: Optional[int] = Seed(None, "seed of the drives; default 1 (cm6 as demo and calibrate, pblaze5, kumoscale), 5 for p5316"),
    sizes: Optional[str] = typer.Option(None, "--sizes", help="cm6: namespace sizes in TB at full scale (default 3.84,3.52,3.20,2.56)"),
    plot: Optional[Path] = typer.Option(
        None,
        "--plot",
        help="pblaze5: the noisy-neighbour figure (a PNG); kumoscale: a folder for the curves (a PNG per direction); "
        "ceph-reef, spdk-tcp, spdk-rdma: a folder for the predicted-against-published figure",
    ),
    curves: bool = typer.Option(True, "--curves/--no-curves", help="kumoscale: also sweep 1..256 outstanding I/O per client"),
    quick: bool = typer.Option(False, "--quick", help="pblaze5: shorter measurement windows (a smoke run)"),
    full: bool = typer.Option(False, "--full", help="shaping: the full study (1/64, 32 GiB per point; hours) instead of the CI-sized one"),
    part: Optional[str] = typer.Option(
        None,
        "--part",
        help="pblaze5: one part alone: doublewrite (the InnoDB doublewrite study, modelled) or mariadb (the same with a real MariaDB)",
    ),
    threads: Optional[str] = typer.Option(
        None, "--threads", help="pblaze5 --part: client threads (doublewrite: a list, default 64; mariadb: one, default 16)"
    ),
    placements: Optional[str] = typer.Option(
        None, "--placements", help="pblaze5 --part: doublewrite placements, of shared, dram, nand (default shared,dram)"
    ),
    drive_state: Optional[str] = typer.Option(
        None,
        "--drive-state",
        help="pblaze5 --part doublewrite: the namespace past the database, trimmed (discarded) and/or written (valid); default trimmed",
    ),
    run_s: Optional[int] = typer.Option(
        None, "--run-s", min=1, max=86_400, help="pblaze5 --part mariadb: seconds of sysbench run per placement (default 600)"
    ),
    workdir: Optional[Path] = typer.Option(
        None, "--dir", help="pblaze5 --part mariadb: where the images and file systems go (default: a new temporary directory)"
    ),
    fmt: str = OutputFmt,
) -> None:
    """Re-run a published experiment (docs/sources.md) and print it beside the published figures."""
    from ..studies import experiments

    check_fmt(fmt)
    # Every option is checked against the experiment before any runs (shaping's too: it ran
    # the whole study with a --quick, --sizes or --part it did not have).
    if experiment not in ("cm6", "p5316", "pblaze5", "kumoscale", "ceph-reef", "spdk-tcp", "spdk-rdma", "shaping"):
        fail(f"experiment '{experiment}': choose cm6, p5316, pblaze5, kumoscale, ceph-reef, spdk-tcp, spdk-rdma or shaping")
    if full and experiment != "shaping":
        fail("--full: only the shaping experiment has it")
    if quick and experiment != "pblaze5":
        fail("--quick: only the pblaze5 experiment has it")
    if plot is not None and experiment not in ("pblaze5", "kumoscale", "ceph-reef", "spdk-tcp", "spdk-rdma", "shaping"):
        fail("--plot: only the pblaze5, kumoscale, ceph-reef, spdk-tcp, spdk-rdma and shaping experiments draw figures")
    if not curves and experiment != "kumoscale":
        fail("--no-curves: only the kumoscale experiment has curves")
    if experiment == "kumoscale" and plot is not None and not curves:
        fail("--plot: kumoscale draws its curves; not with --no-curves")
    if sizes is not None and experiment != "cm6":
        fail("--sizes: only the cm6 experiment has namespace sizes")
    if part is None and any(x is not None for x in (threads, placements, workdir, drive_state, run_s)):
        fail("--threads, --placements, --drive-state, --run-s and --dir: only with pblaze5 --part")
    if part is not None and experiment != "pblaze5":
        fail("--part: only the pblaze5 experiment has parts")
    if part is not None and (plot is not None or quick):
        fail("--plot and --quick: for the whole pblaze5 talk, not one --part")
    if part == "doublewrite" and (run_s is not None or workdir is not None):
        fail("--run-s and --dir: only with pblaze5 --part mariadb (doublewrite is modelled: no sysbench, no file systems)")
    if plot is not None:
        # Checked before the study runs (minutes to hours): a figure that cannot be written
        # failed only at the end, with the study's figures thrown away.
        if experiment in ("pblaze5", "shaping"):
            _check_plot_file(plot)
        else:
            make_plot_folder(plot)
    # SIGTERM as Ctrl-C: it killed the command alone, leaving shaping's stack images in the
    # temporary folder and --part mariadb's servers, database and mounts running.
    with sigterm_cleans_up():
        if experiment == "shaping":  # the write-shaping tier (docs/host.md)
            _reproduce_shaping(full, seed, plot, scale, fmt)
            return
        if experiment in ("ceph-reef", "spdk-tcp", "spdk-rdma"):
            _reproduce_cluster_lab(experiment, scale, seed, plot, fmt)
            return
        log = (lambda m: print(m, file=sys.stderr)) if fmt == "json" else typer.echo
        t0 = time.perf_counter()
        if part is not None:
            n, rows = _reproduce_pblaze5(part, scale, seed, threads, placements, drive_state, run_s, workdir, log)
        else:
            tbs = tuple(sizes_arg(sizes)) if sizes is not None else (3.84, 3.52, 3.20, 2.56)
            for tb in tbs:
                try:
                    experiments.namespace_fraction("kioxia-cm6-r-3.84t", tb)
                except ValueError as e:
                    fail(f"--sizes: {e}")
            models = {"cm6": "kioxia-cm6-r-3.84t", "p5316": "intel-p5316-15.36t", "pblaze5": "memblaze-pblaze5-910-3.84t"}
            model = models.get(experiment, "kioxia-cm5-r-3.84t")
            n = scale_arg(scale or "1/64", model, "ssdtwin reproduce")
            if experiment == "cm6":
                # Its 3.84 and 3.20 TB columns, and the 3 DWPD SKU's, hold a sequential and a
                # random drive at once: at --scale 1, 16 GB of maps, with no check they fitted.
                full_columns = any(experiments.namespace_label(tb) in ("3.84", "3.20") for tb in tbs)
                check_maps_fit(model, n, scale or "1/64", drives=2 if full_columns else 1)
                check_maps_fit("kioxia-cm6-v-3.2t", n, scale or "1/64", drives=2)
                rows = experiments.cm6_brief(scale=n, seed=1 if seed is None else seed, sizes=tbs, log=log)
            elif experiment == "pblaze5":
                from ..studies import pblaze5

                rows = pblaze5.pblaze5_talk(
                    scale=n, seed=1 if seed is None else seed, plot=None if plot is None else str(plot), quick=quick, log=log
                )
            elif experiment == "kumoscale":
                from ..studies.kumoscale import lab

                check_lab_memory(lab(n, 1 if seed is None else seed)["ceph-rbd"], f"--scale {scale or '1/64'}", "use a smaller scale")
                rows = _reproduce_kumoscale(n, 1 if seed is None else seed, curves, plot, log)
            else:
                check_maps_fit(model, n, scale or "1/64")
                rows = experiments.p5316_whitepaper(scale=n, seed=5 if seed is None else seed, log=log)
        if fmt == "json":
            emit_json(rows)
        else:
            typer.echo(f"({time.perf_counter() - t0:.0f} s wall, scale 1/{n})")


def _reproduce_shaping(full: bool, seed: Optional[int], plot: Optional[Path], scale: Optional[str], fmt: str) -> None:
    """`reproduce shaping`: figures 1-3 of docs/host.md."""
    from ..studies.shaping import shaping

    if scale is not None:
        fail("--scale: the shaping study picks its scale (1/256, or 1/64 with --full)")
    log = (lambda m: print(m, file=sys.stderr)) if fmt == "json" else typer.echo
    t0 = time.perf_counter()
    rows = shaping(full=full, seed=5 if seed is None else seed, plot=None if plot is None else str(plot), log=log)
    if fmt == "json":
        emit_json(rows)
    else:
        typer.echo(f"({time.perf_counter() - t0:.0f} s wall)")


def _reproduce_cluster_lab(experiment: str, scale: Optional[str], seed: Optional[int], plot: Optional[Path], fmt: str) -> None:
    """`reproduce ceph-reef`, `reproduce spdk-tcp` and `reproduce spdk-rdma`: published lab figures beside the cluster
    model's predictions (docs/models.md §11), and with --plot the predicted-against-published
    figure."""
    from ..studies import ceph_reef, spdk_rdma, spdk_tcp

    study = {"ceph-reef": ceph_reef, "spdk-tcp": spdk_tcp, "spdk-rdma": spdk_rdma}[experiment]
    n = scale_arg(scale or f"1/{study.SCALE}", study.DRIVE, "ssdtwin reproduce")
    s = 1 if seed is None else seed
    # The study's largest lab (the Reef freeze lab's 60 drives; the SPDK labs are one each).
    largest = ceph_reef.freeze_lab(scale=n, seed=s) if study is ceph_reef else spdk_tcp.lab(1, n, s)
    check_lab_memory(largest, f"--scale {scale or f'1/{study.SCALE}'}", "use a smaller scale")
    log = (lambda m: print(m, file=sys.stderr)) if fmt == "json" else typer.echo
    t0 = time.perf_counter()
    res = study.run(scale=n, seed=s, log=log)
    if plot is not None:
        for p in study.plot(res, plot):
            print(f"ssdtwin reproduce: wrote {p}", file=sys.stderr)
    if fmt == "json":
        emit_json(res)
    else:
        typer.echo(f"({time.perf_counter() - t0:.0f} s wall, drives at 1/{n})")


def _reproduce_kumoscale(n: int, seed: int, curves: bool, plot: Optional[Path], log: Callable[[str], None]) -> Any:
    """`reproduce kumoscale`: both stacks at the study's load, then (curves) their sweeps."""
    from ..cluster import plot_sweep
    from ..studies.kumoscale import BRIEF, kumoscale

    rows = kumoscale(scale=n, seed=seed, curves=curves, log=log)
    if plot is not None and curves:
        marks = [("randread", f"brief: {b.system}", float(b.iops), b.read_lat_us) for b in BRIEF.values()]
        title = "KumoScale (NVMe-oF/TCP) vs Ceph 14 (RBD), 3 nodes x 5 CM5, 4 clients, 100 GbE"
        for p in plot_sweep(rows["curves"], plot, title=title, marks=marks, bands=rows["band"]):
            print(f"ssdtwin reproduce: wrote {p}", file=sys.stderr)
    return rows


def _check_plot_file(plot: Path) -> None:
    """--plot FILE (pblaze5, shaping): in an existing, writable folder, of a format
    matplotlib writes (its suffix picks the format: noisy.png, noisy.svg)."""
    from matplotlib.backend_bases import FigureCanvasBase

    if plot.is_dir() or not plot.parent.is_dir():
        fail(f"--plot {plot}: a PNG file in an existing folder")
    if not os.access(plot.parent, os.W_OK):
        fail(f"--plot {plot}: the folder {plot.parent} is not writable")
    kinds = FigureCanvasBase.get_supported_filetypes()
    suffix = plot.suffix.removeprefix(".").lower()
    if suffix and suffix not in kinds:
        fail(f"--plot {plot}: '.{suffix}' is not an image format matplotlib writes; use .png or one of {', '.join(sorted(kinds))}")


def _int_list(flag: str, text: str) -> list[int]:
    try:
        out = [plain_int(x.strip()) for x in text.split(",")]
    except ValueError:
        fail(f"{flag} '{text}': a comma-separated list of whole numbers")
    if not out or any(x < 1 for x in out):
        fail(f"{flag} '{text}': every value must be at least 1")
    return out


def _reproduce_pblaze5(
    part: Optional[str],
    scale: Optional[str],
    seed: Optional[int],
    threads: Optional[str],
    placements: Optional[str],
    drive_state: Optional[str],
    run_s: Optional[int],
    workdir: Optional[Path],
    log: Callable[[str], None],
) -> tuple[int, list[dict[str, Any]]]:
    """`reproduce pblaze5 --part doublewrite|mariadb` (docs/models.md, "An InnoDB workload")."""
    from ..studies import doublewrite, mariadb

    if part not in ("doublewrite", "mariadb"):
        fail(f"--part {part}: pblaze5 has the parts doublewrite and mariadb (without --part: the whole talk)")
    allowed = doublewrite.PLACEMENTS if part == "doublewrite" else mariadb.PLACEMENTS
    # `is not None`: an empty value ('--placements ""') ran the default, as if it was not given.
    chosen = tuple(placements.split(",")) if placements is not None else ("shared", "dram")
    bad = [p for p in chosen if p not in allowed]
    if bad or len(set(chosen)) != len(chosen):
        fail(f"--placements '{placements}': each of {', '.join(allowed)} at most once")
    states = tuple(drive_state.split(",")) if drive_state is not None else ("trimmed",)
    if any(x not in doublewrite.DRIVE_STATES for x in states) or len(set(states)) != len(states):
        fail(f"--drive-state '{drive_state}': each of {', '.join(doublewrite.DRIVE_STATES)} at most once")
    if drive_state is not None and part != "doublewrite":
        fail("--drive-state: only with --part doublewrite")
    counts = tuple(_int_list("--threads", threads)) if threads is not None else ((64,) if part == "doublewrite" else (16,))
    if part == "doublewrite":
        for c in counts:
            if doublewrite.FLOW_ROUND_IOS % c:
                fail(f"--threads {c}: must divide {doublewrite.FLOW_ROUND_IOS} (fio's flow weights are whole numbers)")
    elif len(counts) != 1:
        fail("--threads: --part mariadb takes one thread count")
    if workdir is not None and workdir.exists() and not workdir.is_dir():
        fail(f"--dir {workdir}: not a folder")
    n = scale_arg(scale or ("1/64" if part == "doublewrite" else "1/256"), doublewrite.MODEL, "ssdtwin reproduce")
    s = 1 if seed is None else seed
    if part == "doublewrite":
        return n, doublewrite.doublewrite_study(scale=n, seed=s, threads=counts, log=log, placements=chosen, states=states)
    why = mariadb.missing()
    if why:
        fail(f"pblaze5 --part mariadb: {why}")
    cfg = mariadb.Config(scale=n, seed=s, threads=counts[0], run_s=600 if run_s is None else run_s)
    import tempfile

    work = workdir if workdir is not None else Path(tempfile.mkdtemp(prefix="ssdtwin-mariadb-"))
    log(f"work directory: {work}")
    try:
        return n, mariadb.mariadb_study(work, cfg, chosen, log=log)
    except mariadb.StackError as e:
        fail(f"pblaze5 --part mariadb: {e}")
