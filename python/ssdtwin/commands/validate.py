"""``ssdtwin validate``: every published figure beside the twin's (studies/validate.py,
docs/validation.md), or, with ``--spec`` and ``--measured``, a twin of your own drive beside
your drive's fio JSON (studies/measured.py, docs/calibration.md)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from .. import _core
from ..drive import parse_scale
from .common import OutputFmt, Seed, available_cpus, check_fmt, emit_json, fail, note_stale_derivations, read_spec, spec_error

if TYPE_CHECKING:  # the studies are imported when the command runs
    from ..studies.validate import Log, Settings


def validate_cmd(
    quick: bool = typer.Option(False, "--quick", help="smaller drives (1/256) and windows a fifth as long: a check of the machinery (CI)"),
    scale: Optional[str] = typer.Option(None, "--scale", help="1/N of every drive (default 1/64; --quick 1/256)"),
    seed: int = Seed(1, "seed of the drives"),
    only: Optional[str] = typer.Option(None, "--only", help="comma-separated groups (default: all; docs/validation.md lists them)"),
    write_doc: Optional[Path] = typer.Option(None, "--write-doc", help="also write the table as Markdown there (docs/validation.md)"),
    check_targets: bool = typer.Option(
        False, "--check", help="exit 1 unless every calibrated figure is within 5 % and 85 % of the predicted ones within 15 %"
    ),
    jobs: int = typer.Option(
        0, "--jobs", "-j", min=0, max=256, help="groups at once, each in a process of its own (0: one per CPU); the figures are the same"
    ),
    spec: Optional[Path] = typer.Option(
        None,
        "--spec",
        help="a drive spec TOML of your own (`calibrate --out`), held to --measured instead of the presets to the published figures",
    ),
    measured: Optional[Path] = typer.Option(
        None, "--measured", help="with --spec: a folder of your drive's fio JSON (the `calibrate --print-jobs` jobs)"
    ),
    fmt: str = OutputFmt,
) -> None:
    """Every published figure beside the twin's: published, twin, error, calibrated or predicted (docs/validation.md)."""
    from ..studies import validate as v

    check_fmt(fmt)
    try:
        n = parse_scale(scale) if scale else (256 if quick else 64)
    except ValueError as e:
        fail(f"--scale: {e}")
    settings = v.Settings(scale=n, seed=seed, quick=quick)

    def log(m: str) -> None:
        print(m, file=sys.stderr if fmt == "json" else sys.stdout)

    if spec is not None or measured is not None:
        res = _own_drive(settings, spec, measured, only, write_doc, log)
    else:
        groups = [g.strip() for g in only.split(",")] if only else list(v.GROUPS)
        unknown = [g for g in groups if g not in v.GROUPS]
        if unknown:
            fail(f"--only: unknown group {', '.join(unknown)}; choose from {', '.join(v.GROUPS)}")
        res = v.validate(settings, groups, log=log, jobs=jobs or available_cpus())
    s = res["summary"]
    systems = f"{s['systems']} system" + ("" if s["systems"] == 1 else "s")
    log(
        f"{s['figures']} figures over {systems}: calibrated {s['calibrated_within_5pct']}/{s['calibrated']} within 5 %, "
        f"predicted {s['predicted_within_15pct']}/{s['predicted']} within 15 % ({res['wall_s']:.0f} s, scale 1/{n})"
    )
    if write_doc is not None:
        argv = " ".join(["ssdtwin validate"] + sys.argv[2:]) if sys.argv[1:2] == ["validate"] else "ssdtwin validate"
        write_doc.write_text(v.markdown(res, argv))
        print(f"wrote {write_doc}", file=sys.stderr)
    if fmt == "json":
        emit_json(res)
    missed = v.targets_met(res)
    if check_targets and missed:
        fail("accuracy targets missed: " + "; ".join(missed))


def _own_drive(
    settings: Settings, spec: Optional[Path], measured: Optional[Path], only: Optional[str], write_doc: Optional[Path], log: Log
) -> dict[str, Any]:
    """`--spec FILE --measured DIR`: the figures of DIR beside a twin of FILE."""
    import time

    from ..studies import validate as v
    from ..studies.corners import CornerError
    from ..studies.measured import measured_group

    if spec is None or measured is None:
        given, missing = ("--spec", "--measured DIR") if measured is None else ("--measured", "--spec FILE")
        fail(f"{given} needs {missing}: a spec of your own is held to your drive's fio JSON (the presets' published figures need neither)")
    if only is not None or write_doc is not None:
        fail(f"{'--only' if only is not None else '--write-doc'}: not with --spec (the figures are your drive's, one group)")
    text = read_spec(spec)
    try:
        _core.parse_spec(text)
    except _core.SpecError as e:
        fail(spec_error(spec, text, str(e)))
    note_stale_derivations("ssdtwin validate", spec, text)
    t0 = time.perf_counter()
    try:
        figures = measured_group(settings, text, spec.stem, measured, log)
    except CornerError as e:
        fail(str(e))
    return v.summarise(figures, settings, time.perf_counter() - t0)
