"""One point of a sweep: its preconditioned image (shared through a cache folder) and the
job run on it, as one table row (docs/sweep.md, "Columns").

Everything here runs in whichever process executes the point (this one, or a Ray worker on
any node), so it takes plain values and returns plain values. A row depends only on the
point (its parameters, seeds and job text) and the ssdtwin version: not on the process, the
node, the order of points or the wall clock.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import socket
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from .. import _core
from .. import drive as drivemod
from .. import waf as wafm
from ..core_types import VendorLog
from ..drive import Drive
from ..fio import parse_string
from ..fio.contract import CloneOut, Ddir, JobSpec
from ..fio.hist import PLAT_NR, dense, percentiles
from ..fio.run import engine_specs
from ..fio.units import parse_time_us
from ..studies.experiments import cm6_drive
from .columns import OUTPUT_COLUMNS
from .config import Point, capacity_bytes, min_rate_iops, mixed_clone, namespace_fraction, rate_too_low

PERCENTILES = (50.0, 99.0, 99.9)


def input_columns(point: Point) -> dict[str, Any]:
    row: dict[str, Any] = {"point_id": point.point_id, "seed": point.seed, "image_seed": point.image_seed}
    for k, v in point.params.items():
        if k != "vars":
            row[k] = v
    for n, x in point.params["vars"].items():
        row[f"var_{n}"] = x
    return row


def failed_row(point: Point, error: str) -> dict[str, Any]:
    row = input_columns(point)
    row.update({k: None for k in OUTPUT_COLUMNS})
    row.update(status="failed", error=" ".join(error.split()) or "failed", ssdtwin_version=_core.__version__)
    with contextlib.suppress(_core.SsdtwinError, KeyError):  # a point whose preset does not exist has no digest
        row.update(image_identity(point))
    return row


# ------------------------------------------------------------------------------ images


def image_path(cache: Path, point: Point) -> Path:
    return cache / "images" / point.image_key


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive flock on ``path``: one builder per image per node (and per shared folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def remove_stopped_builds(cache: Path) -> None:
    """Remove the half-built images a stopped sweep left in ``cache`` (a Ray worker killed as
    its task was cancelled cannot remove its own), except those a builder still holds the
    lock of (another sweep sharing the cache)."""
    for tmp in sorted((cache / "images").glob("*.tmp")):
        with open(tmp.with_suffix(".lock"), "a") as f:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # being built
            try:
                shutil.rmtree(tmp, ignore_errors=True)
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def _scale_named_as_in_sweeps() -> Iterator[None]:
    """A scale the drive cannot be built at is named as the sweep file names it
    (``scale=1024: too small ...``), in whichever process builds the image: the CLI names it
    ``--scale 1/1024`` in its own process (points run with --in-process) but a Ray worker
    does not, and a failed row must not depend on where it ran."""
    was, drivemod.SCALE_NAME = drivemod.SCALE_NAME, "scale"
    try:
        yield
    finally:
        drivemod.SCALE_NAME = was


@functools.cache
def core_build() -> str:
    """The build of the compiled core (a hash of the extension file): two builds of one
    version can compute differently (a development tree), so a cached image names its build."""
    h = hashlib.sha256()
    with open(_core.__file__ or "", "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


@functools.cache
def preset_digest(preset: str) -> str:
    """A hash of the preset's parameter values (sources and published corners left out: they
    change no image)."""
    return drivemod.spec_digest(_core.preset(preset))


def image_identity(point: Point) -> dict[str, str]:
    """What a cached image's content depends on besides its key (preset name, scale,
    precondition, namespace, seed): the ssdtwin version, the core's build and the preset's
    parameter values. An image made under another one is stale: rebuilt, never used."""
    return {"ssdtwin_version": _core.__version__, "core_build": core_build(), "preset_digest": preset_digest(point.params["preset"])}


def stale_row(point: Point, row: Mapping[str, Any]) -> Optional[str]:
    """Why a kept row was not made by this ssdtwin from this preset, as its image would be
    checked (cached_image); None when it was. A row from before rows recorded the core's
    build and the preset's digest cannot be told apart: it is stale too."""
    ours = image_identity(point)
    if row.get("ssdtwin_version") != ours["ssdtwin_version"]:
        return f"made by ssdtwin {row.get('ssdtwin_version') or 'of unknown version'}"
    if "core_build" not in row or "preset_digest" not in row:
        return "made before rows recorded the core build and the preset's parameters"
    if row["core_build"] != ours["core_build"]:
        return f"made by another build of ssdtwin {ours['ssdtwin_version']}"
    if row["preset_digest"] != ours["preset_digest"]:
        return f"made from another definition of preset {point.params['preset']}"
    return None


def cached_image(point: Point, cache: Path) -> tuple[Optional[dict[str, Any]], Optional[str]]:
    """The metadata of the point's image in ``cache`` when it can be used; otherwise None and
    why it cannot (None too when there is none)."""
    final = image_path(cache, point)
    meta_path = final.with_suffix(".json")
    if not (meta_path.exists() or meta_path.is_symlink()):
        return None, None
    try:
        meta = json.loads(meta_path.read_text())
        if not isinstance(meta, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as e:
        return None, f"its record {meta_path.name} is unreadable ({getattr(e, 'strerror', None) or e})"
    if not (final / "ssdtwin.toml").is_file():
        return None, f"its image {final.name}/ is missing or incomplete"
    ours = image_identity(point)
    if meta.get("ssdtwin_version") != ours["ssdtwin_version"]:
        return None, f"made by ssdtwin {meta.get('ssdtwin_version', 'of unknown version')}, this is ssdtwin {ours['ssdtwin_version']}"
    if "core_build" not in meta or "preset_digest" not in meta:
        return None, "made before cached images recorded the core build and the preset's parameters"
    if meta["core_build"] != ours["core_build"]:
        return None, f"made by another build of ssdtwin {ours['ssdtwin_version']} (core {meta['core_build']}, this is {ours['core_build']})"
    if meta["preset_digest"] != ours["preset_digest"]:
        return None, f"made from another definition of preset {point.params['preset']} (its parameter values have changed since)"
    return dict(meta), None


def stale_images(points: Sequence[Point], cache: Path) -> list[tuple[Point, str]]:
    """The images of ``points`` the cache holds but cannot use (one per image), and why."""
    out, seen = [], set()
    for p in points:
        if p.image_key in seen:
            continue
        seen.add(p.image_key)
        why = cached_image(p, cache)[1]
        if why is not None:
            out.append((p, why))
    return out


def _drop(point: Point, cache: Path) -> None:
    """Remove the point's cached image and its record (the record first: a half-removed
    entry is never taken for a finished image)."""
    final = image_path(cache, point)
    meta_path = final.with_suffix(".json")
    if meta_path.exists() or meta_path.is_symlink():
        meta_path.unlink()
    if final.is_symlink() or final.is_file():
        final.unlink()
    elif final.exists():
        shutil.rmtree(final)


def ensure_image(point: Point, cache: Path) -> dict[str, Any]:
    """The point's preconditioned image in ``cache``, built unless another point (in any
    process sharing the folder) built it already; returns its metadata. The image is
    written under a temporary name and renamed, and the metadata written last, so a killed
    build leaves nothing that a later run would take for a finished image. A cached image
    that is stale or unreadable (:func:`cached_image`) is removed and built again."""
    final = image_path(cache, point)
    meta_path = final.with_suffix(".json")
    meta, _ = cached_image(point, cache)
    if meta is not None:
        return meta
    with _locked(final.with_suffix(".lock")):
        meta, stale = cached_image(point, cache)
        if meta is not None:
            return meta
        if stale is not None:
            _drop(point, cache)
        p = point.params
        frac = namespace_fraction(p)
        if frac is not None and frac > 1:
            full = capacity_bytes(p["preset"])
            raise ValueError(f"namespace {p['namespace_tb']} TB: larger than the drive ({p['preset']}: {full / 1e12:.2f} TB)")
        tmp = final.with_name(final.name + ".tmp")
        for stale_dir in (tmp, final):
            if stale_dir.exists():
                shutil.rmtree(stale_dir)
        t0 = time.perf_counter()
        try:
            with _scale_named_as_in_sweeps():
                fraction = 1.0 if frac is None else frac
                prepared = cm6_drive(p["preset"], p["scale"], p["precondition"], fraction, point.image_seed, path=str(tmp))
            d = prepared.drive
            info = d.ftl_info()
            ns = d.namespaces()[0]
            d.close()
        except BaseException:
            # A build stopped (Ctrl-C, SIGTERM) or failed leaves no half image in the cache:
            # the next build would remove it, but it can be as large as the namespace.
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        os.rename(tmp, final)
        meta = {
            "key": point.image_key,
            "preset": p["preset"],
            "scale": p["scale"],
            "precondition": p["precondition"],
            "namespace_fraction": frac,
            "namespace_bytes": ns.bytes,
            "data_pool_bytes": info["data_pool_bytes"],
            "steady_waf": prepared.steady_waf,
            "steady_waf_measurement": prepared.steady_measurement,
            "seed": point.image_seed,
            "build_wall_s": round(time.perf_counter() - t0, 3),
            **image_identity(point),
        }
        part = meta_path.with_name(meta_path.name + ".tmp")
        part.write_text(json.dumps(meta, indent=1))
        os.rename(part, meta_path)
        return meta


# ------------------------------------------------------------------------------ running


def run_point(point: Point, cache: str) -> dict[str, Any]:
    """The point's row; an error in it (a namespace the drive cannot hold, a bad job) is the
    row's ``error`` with status "failed", never an exception."""
    t0 = time.perf_counter()
    try:
        row = _run(point, Path(cache))
    except Exception as e:  # a point's failure is its row; the sweep goes on
        row = failed_row(point, str(e) or type(e).__name__)
    except BaseException as e:
        if not is_panic(e):
            raise  # Ctrl-C, SIGTERM, a cancelled Ray task: the sweep stops
        # A panic of the core (a bug: pyo3 raises it as a BaseException) is the point's failure
        # too: it stopped a sweep run in process with a traceback, and on a Ray worker became a
        # row whose error was Ray's traceback of the worker (its pid, terminal colours).
        row = failed_row(point, f"the core panicked (a bug of ssdtwin, please report it): {e}")
    return {"row": row, "wall_s": round(time.perf_counter() - t0, 3), "node": socket.gethostname(), "pid": os.getpid()}


def is_panic(e: BaseException) -> bool:
    """A Rust panic in the core, as pyo3 raises it (``pyo3_runtime.PanicException``, a
    BaseException so that ``except Exception`` does not swallow it)."""
    return type(e).__name__ == "PanicException"


def prepare(point: Point, cache: str) -> Optional[str]:
    """Build the point's image ahead of the points that share it; the error (if any) as text."""
    try:
        ensure_image(point, Path(cache))
    except Exception as e:
        return str(e) or type(e).__name__
    except BaseException as e:
        if not is_panic(e):
            raise
        return f"the core panicked (a bug of ssdtwin, please report it): {e}"
    return None


def _run(point: Point, cache: Path) -> dict[str, Any]:
    meta = ensure_image(point, cache)
    p = point.params
    run = parse_string(point.job_text, name=point.job_name, env=p["vars"], run_seed=point.seed)
    try:
        d = Drive.open(image_path(cache, point), writable=False)  # a scratch run: the image never changes
    except _core.ImageError as e:
        # A cached image damaged since it was made (a file cut short, removed by hand): said
        # in one line, built again once (a second failure is the point's error).
        print(
            f"ssdtwin: note: cached image {image_path(cache, point)} cannot be opened ({e}); building it again", file=sys.stderr, flush=True
        )
        with _locked(image_path(cache, point).with_suffix(".lock")):
            _drop(point, cache)
        meta = ensure_image(point, cache)
        d = Drive.open(image_path(cache, point), writable=False)
    try:
        specs = engine_specs(d, run, 1)
        adjust_specs(specs, p)
        v0 = d.vendor_log()
        out = d.run_fio(specs, 1)
        v1 = d.vendor_log()
    finally:
        d.close()
    row = input_columns(point)
    pool, ns_bytes = meta["data_pool_bytes"], meta["namespace_bytes"]
    row.update(outputs(out, v0, v1, ns_bytes))
    row.update(steady_columns(meta, specs))
    full = capacity_bytes(p["preset"])
    frac = meta["namespace_fraction"]
    row.update(
        namespace_bytes=ns_bytes,
        namespace_tb_full=(full if frac is None else frac * full) / 1e12,
        op=pool / ns_bytes - 1,
        model_waf=_core.waf_greedy(pool / ns_bytes) if pool > ns_bytes else None,
        steady_waf=meta["steady_waf"],
        status="ok",
        error=None,
    )
    row.update(image_identity(point))  # the version, the core's build and the preset's values: what --resume checks
    errors = sorted({str(r["error"]) for r in out if r.get("error")})
    if errors:
        row.update(status="failed", error=f"job ended with error {', '.join(errors)} (fio errno)")
    return row


def adjust_specs(specs: list[JobSpec], p: Mapping[str, Any]) -> None:
    """The job parameters a sweep sets on top of the job file: runtime and ramp_time (every
    job becomes time based), and rate_iops: the drive's total IOPS cap, split evenly over
    the job's clones, a clone's share split between reads and writes by its rwmixread."""
    for s in specs:
        if p.get("runtime") is not None:
            s["time_based"] = True
            s["runtime_ns"] = parse_time_us(p["runtime"], default_unit="s") * 1000
        if p.get("ramp_time") is not None:
            s["ramp_time_ns"] = parse_time_us(p["ramp_time"], default_unit="s") * 1000
    rate = p.get("rate_iops")
    if rate:
        # Whole I/Os per second that add up to the cap: the remainder of an uneven split
        # goes one each to the first clones (1001 over 8 clones capped at 1000 in all, and 3
        # at 8: every clone got at least 1). fio's rate_iops=0 is no cap, so a clone's
        # direction that does I/O needs at least 1 of its own: a mixed clone whose even share
        # is 1 takes its one of the remainder before the others do (3 over a randread and a
        # randrw clone gave the randread one 2 and left the randrw one's reads uncapped).
        least = min_rate_iops(specs)
        if rate < least:
            raise ValueError(f"rate_iops {rate}: {rate_too_low(least)}")
        base, extra = divmod(rate, len(specs))
        short_first = sorted(range(len(specs)), key=lambda i: base >= 1 + mixed_clone(specs[i]))  # stable
        gets_one_more = set(short_first[:extra])
        for i, s in enumerate(specs):
            share = base + (i in gets_one_more)
            dirs = set(s["directions"])
            read_pct = s["rwmixread"] if {"read", "write"} <= dirs else 100 if "read" in dirs else 0
            both = 0 < read_pct < 100
            r = min(max(round(share * read_pct / 100), 1), share - 1) if both else share if read_pct else 0
            w = share - r
            s["rate_bytes_per_s"] = {"read": 0, "write": 0, "trim": 0}
            s["rate_iops"] = {
                "read": r,
                "write": w if "write" in dirs else 0,
                "trim": share if "trim" in dirs else 0,
            }


def steady_columns(meta: Mapping[str, Any], specs: Sequence[JobSpec]) -> dict[str, Any]:
    """The image's fast-forward steady-state WAF measurement (precondition "rand": one pass
    of 4 KiB random writes over the namespace) and whether the job writes the same way, so
    that this WAF is the job's (reads do not change where GC finds valid data)."""
    m = meta.get("steady_waf_measurement")  # images built before it was kept have none
    return {
        "steady_waf_host_bytes": None if m is None else m["host_bytes"],
        "steady_waf_gc_cycles": None if m is None else m["gc_cycles"],
        "steady_waf_verdict": None if m is None else m["verdict"],
        "steady_waf_is_jobs": m is not None and writes_like_steady_pass(specs, STEADY_PASS_BLOCK_BYTES),
    }


STEADY_PASS_BLOCK_BYTES = 4096  # the block of precondition "rand"'s passes (cm6_drive's default)


def writes_like_steady_pass(specs: Sequence[JobSpec], block_bytes: int) -> bool:
    """Every clone that writes does so uniformly at random over its whole namespace in
    blocks of ``block_bytes`` (no trims, no skew, no mixed sizes): the write stream of a
    precondition "rand" pass, whose steady-state WAF is then this job's."""
    writers = [s for s in specs if "write" in s["directions"]]
    if not writers or any("trim" in s["directions"] for s in specs):
        return False

    def uniform(s: JobSpec) -> bool:
        bs = s["bs"]["write"]
        whole = s["offset_bytes"] == 0 and s["size_bytes"] in (0, s["target_size_bytes"])
        return (
            s["random"]
            and s["percentage_random"]["write"] == 100
            and s["random_distribution"]["kind"] == "random"
            and bs["min"] == bs["max"] == block_bytes
            and bs["split"] in (None, [], [[block_bytes, 100]])
            and whole
        )

    return all(uniform(s) for s in writers)


def outputs(out: Sequence[CloneOut], v0: VendorLog, v1: VendorLog, namespace_bytes: int) -> dict[str, Any]:
    """Figures of a run (every clone together): rates over the longest clone's runtime of
    each direction, fio's completion-latency (clat) percentiles, the WAF measurement of the
    window from the vendor log (``waf`` only when the window is steady, waf.py)."""
    row: dict[str, Any] = {}
    merged = [0] * PLAT_NR
    n_all = 0
    iops = 0.0
    secs_all = 0.0
    directions: tuple[Ddir, ...] = ("read", "write")
    for d in directions:
        ios = sum(int(r[d]["total_ios"]) for r in out)
        byts = sum(int(r[d]["io_bytes"]) for r in out)
        secs = max((int(r[d]["runtime_ns"]) for r in out), default=0) / 1e9
        secs_all = max(secs_all, secs)
        row[f"{d}_ios"], row[f"{d}_bytes"] = ios, byts
        row[f"{d}_iops"] = ios / secs if secs else 0.0
        row[f"{d}_mb_s"] = byts / secs / 1e6 if secs else 0.0
        iops += row[f"{d}_iops"]
        n = sum(int(r[d]["lat"]["n"]) for r in out)
        row[f"{d}_lat_mean_us"] = sum(int(r[d]["lat"]["sum_ns"]) for r in out) / n / 1e3 if n else None
        hist = [0] * PLAT_NR
        for r in out:
            for i, c in enumerate(dense(r[d]["clat"]["hist"])):
                hist[i] += c
        cn = sum(hist)
        pcts = dict(percentiles(hist, cn, PERCENTILES)) if cn else {}
        for pct, name in zip(PERCENTILES, ("p50", "p99", "p999")):
            row[f"{d}_{name}_us"] = pcts[pct] / 1e3 if pct in pcts else None
        merged = [a + b for a, b in zip(merged, hist)]
        n_all += cn
    both = dict(percentiles(merged, n_all, PERCENTILES)) if n_all else {}
    row["p99_us"] = both[99.0] / 1e3 if 99.0 in both else None
    row["p999_us"] = both[99.9] / 1e3 if 99.9 in both else None
    row["iops"] = iops
    dh = int(v1["host_write_bytes"]) - int(v0["host_write_bytes"])
    dn = int(v1["nand_write_bytes"]) - int(v0["nand_write_bytes"])
    m = wafm.measure(v0, v1, "timed", namespace_bytes)
    row.update(host_write_bytes=dh, nand_write_bytes=dn, simulated_s=secs_all)
    row.update(waf=m["waf"], waf_window_raw=m["waf_window_raw"], waf_verdict=m["verdict"], waf_gc_cycles=m["gc_cycles"])
    return row
