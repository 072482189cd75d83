"""``ssdtwin calibrate``: fit a spec's timing parameters to its corners (a preset's own, a
datasheet's, or a real drive's fio JSON), print the fio jobs behind the figures, and write
the fitted spec. docs/calibration.md; the fit is studies/calibrate.py, the corners
studies/corners.py."""

from __future__ import annotations

import math
import os
import stat
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from .. import _core
from ..drive import parse_scale
from .common import OutputFmt, Seed, check_fmt, emit_json, fail, note_stale_derivations, read_spec, say, scale_rounding, spec_error

if TYPE_CHECKING:  # the studies are imported when the command runs
    from ..studies.calibrate import Calibration


def calibrate_cmd(
    model: Optional[str] = typer.Argument(
        None, metavar="[MODEL]", help="a preset, fitted on its [corners] (default kioxia-cm6-r-3.84t: the CM6 brief's four figures)"
    ),
    spec: Optional[Path] = typer.Option(
        None, "--spec", help="a drive spec TOML in place of MODEL (`ssdtwin models NAME > mine.toml`, edited)"
    ),
    datasheet: Optional[str] = typer.Option(
        None,
        "--datasheet",
        help="the figures to fit, datasheet units: seq-read=5200MB/s,rand-read=1100000,seq-write=3100MB/s,rand-write=120k",
    ),
    measured: Optional[Path] = typer.Option(
        None, "--measured", help="a folder of fio JSON from the real drive: the --print-jobs jobs, or an `ssdtwin pts` report"
    ),
    sets: Optional[str] = typer.Option(
        None, "--sets", help="the [timing] parameter a figure sets, e.g. seq-write=ctrl_backend_bytes_per_s; NAME=none: a prediction"
    ),
    print_jobs: Optional[Path] = typer.Option(None, "--print-jobs", help="write the fio jobs behind each figure to this folder, and exit"),
    out: Optional[Path] = typer.Option(None, "--out", help="write the spec with the fitted values and the [corners] it was fitted on"),
    scale: str = typer.Option("1/64", "--scale"),
    seed: int = Seed(1, "seed of the drives and their preconditioning"),
    tol: float = typer.Option(0.003, "--tol", help="relative tolerance per figure"),
    write: bool = typer.Option(
        False, "--write/--no-write", help="rewrite MODEL's preset in the source checkout (the CM6-R: its family too)"
    ),
    fmt: str = OutputFmt,
) -> None:
    """Fit the timing parameters a drive's corners set (docs/calibration.md).

    Exits 1, naming each figure, when a fit ends outside --tol or a figure does not
    identify its parameter; then nothing is written."""
    from ..studies import calibrate as cal
    from ..studies.corners import CornerError

    check_fmt(fmt)
    if not 0 < tol < 1:
        fail(f"--tol {tol}: a relative tolerance above 0 and below 1 (0.003 = 0.3 %)")
    text, origin = spec_text(model, spec)
    try:
        if print_jobs is not None:
            again = f"--spec {spec} " if spec is not None else f"{model} " if model is not None else ""
            if scale != "1/64":  # the fit the jobs are for runs at the scale given here
                again += f"--scale {scale} "
            return _print_jobs(print_jobs, text, origin, (datasheet, measured, out, sets), write, fmt, again)
        corners, legacy = _corners(text, origin, model, spec, datasheet, measured, sets)
    except CornerError as e:
        fail(str(e))
    _check_outputs(out, write, spec)
    n = _scale(scale, text)
    res = cal.calibrate(text, corners, n, tol, lambda m: print(m, file=sys.stderr), seed=seed)
    res["spec"] = origin
    if fmt == "json":
        emit_json(res)
    else:
        _table(res)
    for note in res.get("implausible", []):
        say(f"ssdtwin calibrate: note: {note}")
    _fail_outside(res, tol, out, write)
    if out is not None:
        _write_atomically(out, cal.fitted_spec(text, res, str(out)))
        say(f"wrote {out}")
        _note_stale_sources(out, res)
    if write:
        for p in cal.write_presets(res) if legacy else [_write_preset(model or cal.CM6_MODEL, res)]:
            say(f"updated {p}")


def spec_text(model: Optional[str], spec: Optional[Path]) -> tuple[str, str]:
    """The spec to fit (MODEL's preset or --spec FILE), checked by the core; and its name."""
    if model is not None and spec is not None:
        fail("calibrate: give MODEL or --spec FILE, not both")
    if spec is not None:
        text = read_spec(spec)
        try:
            _core.parse_spec(text)
        except _core.SpecError as e:
            fail(spec_error(spec, text, str(e)))
        note_stale_derivations("ssdtwin calibrate", spec, text)
        return text, str(spec)
    from ..studies.calibrate import CM6_MODEL

    name = model or CM6_MODEL
    presets = dict(_core.presets())
    if name not in presets:
        fail(f"calibrate: no preset '{name}' (`ssdtwin models` lists them; a spec of your own: --spec FILE)")
    return presets[name], name


def _corners(
    text: str,
    origin: str,
    model: Optional[str],
    spec: Optional[Path],
    datasheet: Optional[str],
    measured: Optional[Path],
    sets: Optional[str],
) -> tuple[dict[str, Any], bool]:
    """The corners to fit (figure, source, sets, shape), and whether they are the CM6-R's
    brief figures (`--write` then rewrites the CM6 family's presets too)."""
    from ..studies import corners as C
    from ..studies.calibrate import CM6_CORNERS, CM6_MODEL

    parsed = _core.parse_spec(text, origin)
    corners = C.from_spec(parsed, origin)
    # The CM6-R fitted on the brief (its own [corners], or the built-in four when a spec has
    # none): `--write` rewrites its family, which shares its NAND and firmware.
    legacy = spec is None and (model or CM6_MODEL) == CM6_MODEL and datasheet is None and measured is None
    if legacy and not corners:
        corners = dict(CM6_CORNERS)
    if datasheet is not None and measured is not None:
        fail("calibrate: give --datasheet or --measured, not both")
    spec_sets = [n for n, c in corners.items() if c.sets]
    given: list[str] = []  # the figures from --datasheet or --measured
    if datasheet is not None:
        given = list(C.parse_pairs(datasheet, "--datasheet"))
        corners = C.apply_datasheet(corners, datasheet)
    if measured is not None:
        for name, m in C.read_measured(measured, corners).items():
            base = corners.get(name)
            corners[name] = replace(m, sets=base.sets if base else None)
            given.append(name)
    from_outside = datasheet is not None or measured is not None
    corners = C.apply_sets(corners, sets, _core.CALIBRATABLE, default=from_outside and not spec_sets)
    named = C.parse_pairs(sets, "--sets") if sets is not None else {}
    unfitted = [n for n in C.NAMES if n in given and corners[n].sets is None and n not in named]
    if spec_sets and unfitted:
        # The spec's `sets` replace the defaults for every corner: a figure given on the
        # command line for a corner the spec does not fit is a prediction. Say so.
        fit = ",".join(f"{n}={C.DEFAULT_SETS[n]}" for n in unfitted)
        say(
            f"ssdtwin calibrate: note: {', '.join(unfitted)}: predictions, not fitted: the [corners] of {origin} name the parameter "
            f"of {', '.join(spec_sets)} only, and a spec's `sets` replace the defaults (docs/calibration.md); to fit them: --sets {fit}"
        )
    if not corners:
        fail(f"calibrate: {origin} has no [corners] to fit; give the figures with --datasheet or --measured (docs/calibration.md)")
    if not any(c.sets for c in corners.values()):
        fail(f"calibrate: no figure sets a [timing] parameter (every corner of {origin} is a prediction); name one with --sets NAME=PARAM")
    C.check_physical(corners, parsed["timing"])
    C.check_blocks(((c.origin, c.label, c.shape[0]) for c in corners.values()), parsed)
    return corners, legacy


def _print_jobs(directory: Path, text: str, origin: str, others: tuple[Any, ...], write: bool, fmt: str, again: str) -> None:
    """Write the jobs; `again` is how the command named the spec (`--spec mine.toml `, MODEL),
    for the --measured command the note ends with."""
    from ..studies import corners as C
    from ..studies.calibrate import CM6_CORNERS, CM6_MODEL
    from ..studies.measured import printed_jobs

    if any(o is not None for o in others) or write:
        fail("--print-jobs writes the jobs and exits: give it alone (with MODEL or --spec for the corners' job shapes)")
    if directory.exists() and not directory.is_dir():
        fail(f"--print-jobs {directory}: exists and is not a folder")
    if not directory.parent.is_dir():
        fail(f"--print-jobs {directory}: no such folder {directory.parent}")
    corners = C.from_spec(_core.parse_spec(text, origin), origin)
    if not corners and origin == CM6_MODEL:
        corners = dict(CM6_CORNERS)
    for name in C.NAMES:  # the default shape for a corner the spec does not publish
        corners.setdefault(name, C.Corner(name, 0.0, ""))
    files = [str(p) for p in C.print_jobs(directory, corners, after=printed_jobs(7), spec=again)]
    if fmt == "json":
        emit_json({"files": files})
    else:
        for p in files:
            typer.echo(p)
    say(
        f"run them on the drive (edit filename={C.DEVICE} first: the write jobs destroy its data): sh {directory / 'run.sh'}; "
        f"then: ssdtwin calibrate {again}--measured {directory / 'results'}/ --out FILE; "
        f"and to check the fitted twin on the jobs it was not fitted to: ssdtwin validate --spec FILE --measured {directory / 'results'}/"
    )


def _check_outputs(out: Optional[Path], write: bool, spec: Optional[Path]) -> None:
    """Refuse before the fit what could not be written after it, and what it must not
    replace: a file in a drive image (its spec.toml is the image's own, scaled spec: the
    image would not open again), or an existing file that is not a spec (a fio result, a
    job: a typo in --out)."""
    if out is not None:
        if out.is_dir():
            fail(f"--out {out}: is a folder; give the spec file to write")
        if not out.parent.is_dir():
            fail(f"--out {out}: no such folder {out.parent}")
        image = next((d for d in out.resolve().parents if (d / "ssdtwin.toml").is_file() and (d / "spec.toml").is_file()), None)
        if image is not None:
            fail(
                f"--out {out}: inside the drive image {image} (its spec.toml is the image's own scaled spec, and the image "
                "would not open with another); write the fitted spec elsewhere"
            )
        if out.exists() or out.is_symlink():
            if not out.is_file():
                fail(f"--out {out}: exists and is not a regular file; give the spec file to write")
            try:
                old = out.read_text(encoding="utf-8")
                _core.parse_spec(old)
            except (_core.SpecError, OSError, UnicodeDecodeError) as e:
                why = spec_error(out, old, str(e)).split(": ", 1)[1] if isinstance(e, _core.SpecError) else e.__class__.__name__
                fail(
                    f"--out {out}: exists and is not a drive spec ({why}); it is replaced only by a spec: "
                    "give a new file, or remove it first"
                )
    if write and spec is not None:
        fail("--write rewrites a preset (MODEL); for a spec of your own use --out FILE")


def _scale(text: str, spec_toml: str) -> int:
    try:
        n = parse_scale(text)
    except ValueError as e:
        fail(f"--scale: {e}")
    rounded = scale_rounding(None, n, spec_toml=spec_toml)  # builds the drive: a bad scale fails here
    if rounded:
        say(f"ssdtwin calibrate: note: --scale 1/{n} {rounded}")
    return n


def _pct(tol: float) -> str:
    """Percentages with enough decimals to show --tol itself (2 for the default 0.3 %)."""
    return f"{{:+.{max(2, 1 - math.floor(math.log10(tol * 100)))}%}}"


def _table(res: Calibration) -> None:
    from ..studies.corners import figure_text

    pct = _pct(res["tol"])
    typer.echo(f"{'figure':<28} {'target':>16} {'twin':>18} {'error':>9}  {'parameter':<26} value")
    for r in res["figures"]:
        if r["kind"] == "predicted":
            param, value = "(predicted)", ""
        elif r["identified"]:
            param, value = str(r["sets"]), _value(r["value"])
        else:
            param, value = str(r["sets"]), f"not identified (kept {_value(r['kept'])})"
        typer.echo(
            f"{r['label']:<28} {figure_text(r['target']):>11} {r['unit']:<4} {r['twin']:>13,.1f} {r['unit']:<4} "
            f"{pct.format(r['error']):>9}  {param:<26} {value}"
        )


def _value(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else f"{v:,}"


def _fail_outside(res: Calibration, tol: float, out: Optional[Path], write: bool) -> None:
    from ..studies.calibrate import why_not
    from ..studies.corners import figure_text

    pct = _pct(tol)
    failed = [r for r in res["figures"] if r["kind"] == "calibrated" and not r["within_tol"]]
    outside = [
        f"{r['label']} {r['twin']:,.1f} {r['unit']} vs {figure_text(r['target'])} ({pct.format(r['error'])})"
        + ("" if abs(r["error"]) > tol else ", within --tol")
        + (f", and {why_not(r)}" if why_not(r) else "")
        for r in failed
    ]
    if outside:
        # "outside --tol" when a figure is; a figure within it that does not identify its
        # parameter fails as well, and says so (the line must not contradict its numbers).
        lead = f"outside --tol {pct.format(tol).lstrip('+')}" if any(abs(r["error"]) > tol for r in failed) else "not identified"
        not_written = (f"; {out} not written" if out else "") + ("; presets not written" if write else "")
        fail(f"{lead}: {'; '.join(outside)}{_fitted_and_kept(res)}{not_written}")


def _fitted_and_kept(res: Calibration) -> str:
    """Which parameters the fit moved and which keep the spec's value (their figure's fit
    left them), when any does: an error naming a parameter that binds must not read as if
    every parameter had been fitted."""
    kept = res.get("kept") or []
    if not kept:
        return ""
    fitted = [str(r["sets"]) for r in res["figures"] if r.get("sets") and r["sets"] not in kept]
    return f"; kept at the spec's value: {', '.join(kept)}; fitted: {', '.join(fitted) or 'none'}"


def _note_stale_sources(out: Path, res: Calibration) -> None:
    """A spec derived from a preset keeps the preset's [CALIBRATED] sources on the parameters
    this fit did not make (the CM6-R's t_read_ns in a spec whose random read now fits
    ctrl_max_iops): they name another drive's figure. Say which."""
    stale = [p for p, e in res["timing"].items() if e["source"].startswith("[CALIBRATED]") and p not in res["fitted"]]
    if stale:
        say(
            f"ssdtwin calibrate: note: {out}: {', '.join(f'timing.{p}' for p in stale)} {'keeps' if len(stale) == 1 else 'keep'} "
            "a [CALIBRATED] source this fit did not make (the spec's, naming the figure it was fitted to then): give it a source "
            "of its own, or fit it (--sets)"
        )


def _write_atomically(path: Path, text: str) -> None:
    """Write `path` whole or not at all, with the permissions it had (a new file: as the
    umask makes them; mkstemp's 0600 made every fitted spec and rewritten preset private)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_preset(model: str, res: Calibration) -> str:
    from ..studies.calibrate import fitted_spec, preset_path

    path = preset_path(model)
    _write_atomically(path, fitted_spec(path.read_text(encoding="utf-8"), res, str(path)))
    return str(path)
