"""sweep.toml: the schema, its validation and the expansion into points (docs/sweep.md).

A sweep is ``[point]`` (values every point shares), ``[grid]`` (axes crossed with each other,
in the order written) and ``[[cases]]`` (explicit combinations, each crossed with the grid),
plus ``[[plot]]`` tables. Every problem is a :class:`SweepConfigError` whose message is one
line naming the file and the key. A point is identified by its parameters, never by its
position: its id and its seeds hash the sweep seed with the parameters, so adding points to a
sweep leaves the existing ones (and their rows) as they were.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import math
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Optional, Union

from .. import _core
from ..drive import parse_scale
from ..fio.contract import JobSpec
from .columns import OUTPUT_COLUMNS

__all__ = [
    "AXES",
    "Point",
    "Plot",
    "Sweep",
    "SweepConfigError",
    "derive_seed",
    "expand",
    "load",
    "loads",
]

JOBS = resources.files("ssdtwin") / "jobs"
PRECONDITIONS = ("none", "seq", "rand")
NAMESPACE_KEYS = ("namespace_tb", "namespace_fraction", "extra_op")
# Axes reserved for the host stacks (docs/host.md) and the cluster model (docs/models.md §11), which exist
# but are not sweep axes yet: the schema names them so that a sweep written for a later
# version fails with a clear line today, saying where that study runs now.
RESERVED = {
    "stack": "host stacks: one `ssdtwin stack` image per configuration, then `ssdtwin fio` on each (docs/host.md)",
    "cluster": "replicated volumes are swept by `ssdtwin cluster sweep` (docs/models.md, section 11)",
}
AXES = (
    "preset",
    "scale",
    *NAMESPACE_KEYS,
    "precondition",
    "job",
    "vars",
    "runtime",
    "ramp_time",
    "rate_iops",
    *RESERVED,
)
TOP_KEYS = ("title", "seed", "point", "grid", "cases", "plot")
PLOT_KEYS = ("x", "y", "title")
DEFAULT_SCALE = 64
# The most points a sweep holds (cases x the grid's combinations), counted before they are
# made: a grid of two 100,000-value ranges is 10^10 points, which expanding alone would
# take hours and all the memory to find out.
MAX_POINTS = 100_000
VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
VAR_USE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class SweepConfigError(ValueError):
    """A bad sweep.toml (or sweep built in code): one line naming the key."""


@dataclass(frozen=True)
class Plot:
    x: str
    y: str
    title: Optional[str] = None


@dataclass(frozen=True)
class Point:
    """One task of a sweep: a drive state (the image) and a job run on it."""

    params: dict[str, Any]  # canonical: defaults filled, every value of a JSON type
    job_name: str
    job_text: str
    point_id: str
    seed: int  # the fio run seed (jobs with randrepeat=0), from the sweep seed and params
    image_key: str  # points with the same key share one preconditioned image
    image_seed: int

    def label(self) -> str:
        """The parameters as one line, for messages (``namespace_tb=3.2 job=cm6-rand-write``)."""
        parts: list[str] = []
        for k, v in self.params.items():
            if k == "vars":
                parts.extend(f"{n}={x}" for n, x in v.items())
            elif v is not None:
                parts.append(f"{k}={v}")
        return " ".join(parts)


@dataclass
class Sweep:
    seed: int
    points: list[Point]
    plots: list[Plot] = field(default_factory=list)
    title: Optional[str] = None
    source: str = "<sweep>"
    swept: list[str] = field(default_factory=list)  # columns that vary between points


def canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False)


def derive_seed(sweep_seed: int, kind: str, params: Mapping[str, Any]) -> int:
    """A 63-bit seed from the sweep seed and parameters (never from a position)."""
    h = hashlib.sha256(f"{kind}\0{sweep_seed}\0{canonical(params)}".encode()).digest()
    return int.from_bytes(h[:8], "big") >> 1


# ------------------------------------------------------------------------------ loading


def load(path: Union[str, Path]) -> Sweep:
    """Read and expand a sweep.toml; job files are relative to its folder."""
    p = Path(path)
    try:
        _regular(p)
        text = p.read_text()
    except OSError as e:
        raise SweepConfigError(f"{p}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise SweepConfigError(f"{p}: not a text file") from None
    return loads(text, name=str(p), base=p.parent)


def _regular(path: Path) -> None:
    """Only a regular file is read: a FIFO blocked the sweep before it began, and a device
    such as /dev/zero would be read until memory ran out (as `ssdtwin fio` checks its job
    files). An OSError whose strerror says what the file is."""
    from ..fio.parser import file_kind

    mode = path.stat().st_mode
    if not stat.S_ISREG(mode):
        raise OSError(0, f"not a regular file ({file_kind(mode)})")


def loads(text: str, name: str = "<sweep>", base: Optional[Path] = None) -> Sweep:
    import tomlkit
    from tomlkit.exceptions import KeyAlreadyPresent, TOMLKitError

    try:
        doc = tomlkit.parse(text).unwrap()
    except TOMLKitError as e:
        where = f" at line {_line_of_duplicate(text)}" if isinstance(e, KeyAlreadyPresent) else ""
        raise SweepConfigError(f"{name}: not valid TOML: {' '.join(str(e).split())}{where}") from None
    return from_dict(doc, name=name, base=base or Path.cwd())


def _line_of_duplicate(text: str) -> int:
    """The line of a key given twice in a table: tomlkit's KeyAlreadyPresent names no line
    (it does for a key at the top level, raised as a ParseError). It is the first line at
    which the text read so far has the duplicate (only on that error: a sweep file is short)."""
    import tomlkit
    from tomlkit.exceptions import KeyAlreadyPresent, TOMLKitError

    lines = text.splitlines(keepends=True)
    for k in range(1, len(lines) + 1):
        try:
            tomlkit.parse("".join(lines[:k]))
        except KeyAlreadyPresent:
            return k
        except TOMLKitError:
            continue  # cut inside a multi-line value
    return len(lines)


def from_dict(doc: Mapping[str, Any], name: str = "<sweep>", base: Optional[Path] = None) -> Sweep:
    """A sweep from the TOML's tables (also how `ssdtwin advise` builds its sweeps)."""
    base = base or Path.cwd()
    if not isinstance(doc, Mapping):  # a list's items were "unknown key"s (none: an AttributeError)
        raise SweepConfigError(f"{name}: a sweep is a table of its keys (a dict), not a {type(doc).__name__}")
    _no_unknown(doc, TOP_KEYS, name, "")
    seed = doc.get("seed", 1)
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 1 << 63:
        raise SweepConfigError(f"{name}: seed: an integer from 0 to 2^63-1 (got {seed!r})")
    title = doc.get("title")
    if title is not None and not isinstance(title, str):
        raise SweepConfigError(f"{name}: title: a string")
    fixed = _table(doc, "point", name)
    grid = _table(doc, "grid", name, absent=None)
    cases = doc.get("cases", [{}])
    if not isinstance(cases, list) or not all(isinstance(c, Mapping) for c in cases):
        raise SweepConfigError(f"{name}: cases: an array of tables ([[cases]])")
    if not cases:
        raise SweepConfigError(f"{name}: cases: an empty list (give at least one [[cases]] table, or leave it out)")
    _axes_keys(fixed, f"{name}: point")
    for i, c in enumerate(cases):
        _axes_keys(c, f"{name}: cases[{i}]")
    axes = _grid_axes(grid, name) if grid is not None else {}
    _check_size(axes, len(cases), name)
    for i, c in enumerate(cases):
        case_vars = c.get("vars")
        clash = sorted(set(c) & set(axes) - {"vars"}) or sorted(
            set(case_vars if isinstance(case_vars, Mapping) else ()) & set(axes.get("vars", {}))
        )
        if clash:
            raise SweepConfigError(f"{name}: cases[{i}].{clash[0]} is also a grid axis: set it in one place")
    combos = expand(axes)
    points: list[Point] = []
    seen: dict[str, int] = {}
    jobs: dict[str, tuple[str, str]] = {}
    job_ids: dict[str, str] = {}  # job as written -> the built-in's name or the file's resolved path
    parsed: dict[str, Optional[int]] = {}
    for case in cases:
        for combo in combos:
            try:
                raw = _merge(fixed, case, combo)
            except SweepConfigError as e:
                raise SweepConfigError(f"{name}: {e}") from None
            where = f"{name}: point {len(points)} ({_describe(raw)})"
            params = _normalize(raw, where)
            job_name, job_text = _job(params["job"], base, where, jobs, job_ids)
            _check_vars(job_text, params["vars"], job_name, where)
            least = _check_job(job_text, params["vars"], job_name, where, parsed, base)
            rate = params["rate_iops"]
            if rate is not None and least is not None and rate < least:
                raise SweepConfigError(f"{where}: rate_iops {rate}: {rate_too_low(least)}")
            p = _point(params, seed, job_name, job_text)
            # The job as the file it names: `jobs/x.fio` and `./jobs/x.fio` are one job (the
            # point id keeps the name as written, so the ids of existing sweeps stay).
            same = canonical({**params, "job": job_ids[params["job"]]})
            if same in seen:
                raise SweepConfigError(f"{where}: the same point as point {seen[same]} (the sweep lists it twice)")
            seen[same] = len(points)
            points.append(p)
    swept = _swept(points)
    plots = _plots(doc.get("plot", []), name, swept)
    return Sweep(seed=seed, points=points, plots=plots, title=title, source=name, swept=swept)


def _table(doc: Mapping[str, Any], key: str, name: str, absent: Any = "empty") -> Any:
    v = doc.get(key)
    if v is None:
        return {} if absent == "empty" else absent
    if not isinstance(v, Mapping):
        raise SweepConfigError(f"{name}: {key}: a table ([{key}])")
    return v


def _no_unknown(d: Mapping[str, Any], allowed: Sequence[str], name: str, where: str) -> None:
    for k in d:
        if k not in allowed:
            at = f"{where}.{k}" if where else k
            raise SweepConfigError(f"{name}: unknown key '{at}' (allowed: {', '.join(allowed)})")


def _axes_keys(d: Mapping[str, Any], where: str) -> None:
    for k in d:
        if k in RESERVED:
            raise SweepConfigError(f"{where}.{k}: not a sweep axis in this version ({RESERVED[k]})")
        if k not in AXES:
            raise SweepConfigError(f"{where}: unknown key '{k}' (allowed: {', '.join(a for a in AXES if a not in RESERVED)})")


def _grid_axes(grid: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The grid's axes as lists (``{from, to, count}`` expanded), vars as a table of lists."""
    if not grid:
        raise SweepConfigError(f"{name}: grid: empty (give at least one axis, or leave [grid] out)")
    _axes_keys(grid, f"{name}: grid")
    out: dict[str, Any] = {}
    for k, v in grid.items():
        if k == "vars":
            if not isinstance(v, Mapping) or not v:
                raise SweepConfigError(f"{name}: grid.vars: a table of lists ([grid.vars] NAME = [...])")
            out["vars"] = {n: _values(x, f"{name}: grid.vars.{n}") for n, x in v.items()}
        else:
            out[k] = _values(v, f"{name}: grid.{k}")
    return out


def _values(v: Any, where: str) -> list[Any]:
    if isinstance(v, Mapping):
        return _range(v, where)
    if not isinstance(v, list):
        raise SweepConfigError(f"{where}: a list of values, or {{ from = A, to = B, count = N }}")
    if not v:
        raise SweepConfigError(f"{where}: an empty list (a grid axis needs at least one value)")
    return list(v)


def _range(v: Mapping[str, Any], where: str) -> list[float]:
    _no_unknown(v, ("from", "to", "count"), where.split(": ")[0], where.split(": ", 1)[-1])
    try:
        a, b, n = float(v["from"]), float(v["to"]), v["count"]
    except KeyError as e:
        raise SweepConfigError(f"{where}: a range needs from, to and count (missing {e.args[0]})") from None
    except (TypeError, ValueError):
        raise SweepConfigError(f"{where}: from and to must be numbers") from None
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 100_000:
        raise SweepConfigError(f"{where}.count: an integer from 1 to 100000 (got {n!r})")
    if not (math.isfinite(a) and math.isfinite(b)):
        raise SweepConfigError(f"{where}: from and to must be finite")
    if n == 1:
        return [a]
    # Rounded to 10 significant digits: the values (and so the point ids) do not depend on
    # how the floating-point steps fell.
    return [float(f"{a + (b - a) * i / (n - 1):.10g}") for i in range(n)]


def _check_size(axes: Mapping[str, Any], cases: int, name: str) -> None:
    lengths = {k: len(v) for k, v in axes.items() if k != "vars"}
    lengths.update({f"vars.{n}": len(xs) for n, xs in axes.get("vars", {}).items()})
    total = cases * math.prod(lengths.values())
    if total > MAX_POINTS:
        sizes = " x ".join(f"{n} {k}" for k, n in lengths.items())
        of = f"{cases} cases x {sizes}" if cases > 1 else sizes
        raise SweepConfigError(f"{name}: grid: {total:,} points ({of}); a sweep holds at most {MAX_POINTS:,}")


def expand(axes: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every combination of the axes (a vars table counts one axis per name), the first
    axis varying slowest, each axis in the order its values were written."""
    names: list[tuple[str, Optional[str]]] = []
    lists: list[list[Any]] = []
    for k, v in axes.items():
        if k == "vars":
            for n, xs in v.items():
                names.append(("vars", n))
                lists.append(list(xs))
        else:
            names.append((k, None))
            lists.append(list(v))
    out = []
    for values in itertools.product(*lists):
        combo: dict[str, Any] = {}
        for (k, n), x in zip(names, values):
            if n is None:
                combo[k] = x
            else:
                combo.setdefault("vars", {})[n] = x
        out.append(combo)
    return out


def _merge(*layers: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for layer in layers:
        for k, v in layer.items():
            if k == "vars":
                if not isinstance(v, Mapping):
                    raise SweepConfigError(f'vars: a table of NAME = value, as vars = {{ RUNTIME = "10s" }} (got {v!r})')
                out["vars"] = {**out.get("vars", {}), **v}
            else:
                out[k] = v
    return out


def _describe(raw: Mapping[str, Any]) -> str:
    parts = [f"{k}={v}" for k, v in raw.items() if k != "vars"]
    parts += [f"{n}={x}" for n, x in raw.get("vars", {}).items()]
    return " ".join(parts)


def _number(v: Any, where: str, key: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise SweepConfigError(f"{where}: {key}: a number (got {v!r})")
    return float(v)


def _normalize(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The point's parameters, checked, with every default filled in (canonical form)."""
    preset = raw.get("preset")
    if preset is None:
        raise SweepConfigError(f"{where}: no preset (set preset in [point], [grid] or [[cases]])")
    names = preset_names()
    if preset not in names:
        raise SweepConfigError(f"{where}: preset '{preset}': no such preset (ssdtwin models lists: {', '.join(names)})")
    scale_v = raw.get("scale", DEFAULT_SCALE)
    if isinstance(scale_v, bool) or not isinstance(scale_v, (int, str)):
        raise SweepConfigError(f'{where}: scale: 1/N as a string ("1/64") or N as an integer (got {scale_v!r})')
    try:
        scale = parse_scale(scale_v)
    except ValueError as e:
        raise SweepConfigError(f"{where}: scale: {e}") from None
    problem = scale_problem(preset, scale)
    if problem:
        raise SweepConfigError(f"{where}: scale: {problem}")
    ns = [k for k in NAMESPACE_KEYS if raw.get(k) is not None]
    if len(ns) > 1:
        raise SweepConfigError(f"{where}: {ns[0]} and {ns[1]} both set: a point has one namespace size")
    params: dict[str, Any] = {"preset": preset, "scale": scale}
    for k in NAMESPACE_KEYS:
        params[k] = _number(raw[k], where, k) if k in ns else None
    if params["namespace_tb"] is not None and not params["namespace_tb"] > 0:
        raise SweepConfigError(f"{where}: namespace_tb: above 0 (TB at full scale)")
    if params["namespace_fraction"] is not None and not 0 < params["namespace_fraction"] <= 1:
        raise SweepConfigError(f"{where}: namespace_fraction: above 0 and at most 1 (of the drive's capacity)")
    if params["extra_op"] is not None and not params["extra_op"] >= 0:
        raise SweepConfigError(f"{where}: extra_op: 0 or more (namespace = capacity / (1 + extra_op))")
    pre = raw.get("precondition", "rand")
    if pre not in PRECONDITIONS:
        raise SweepConfigError(f"{where}: precondition '{pre}': one of {', '.join(PRECONDITIONS)}")
    params["precondition"] = pre
    job = raw.get("job")
    if not isinstance(job, str) or not job:
        raise SweepConfigError(f"{where}: job: a job file (path relative to the sweep file) or a built-in job name")
    params["job"] = job
    params["vars"] = _vars(raw.get("vars", {}), where)
    for k in ("runtime", "ramp_time"):
        params[k] = _duration(raw.get(k), where, k)
    _check_run_length(params["runtime"], params["ramp_time"], where)
    rate = raw.get("rate_iops")
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, int) or not 1 <= rate <= 0xFFFF_FFFF):
        raise SweepConfigError(f"{where}: rate_iops: an integer from 1 to 4294967295 (the drive's total IOPS cap)")
    params["rate_iops"] = rate
    return params


def _vars(v: Any, where: str) -> dict[str, str]:
    if not isinstance(v, Mapping):
        raise SweepConfigError(f"{where}: vars: a table of NAME = value")
    out = {}
    for n, x in v.items():
        if not VAR_NAME.match(n):
            raise SweepConfigError(f"{where}: vars.{n}: a variable name is letters, digits and _ (fio's ${{NAME}})")
        if isinstance(x, bool) or not isinstance(x, (str, int, float)):
            raise SweepConfigError(f"{where}: vars.{n}: a string or a number (got {x!r})")
        out[n] = x if isinstance(x, str) else repr(x) if isinstance(x, float) else str(x)
    return dict(sorted(out.items()))


def _check_run_length(runtime: Optional[str], ramp_time: Optional[str], where: str) -> None:
    """ramp_time + runtime within the engine's run limit (200 days): a point past it
    simulated 200 days (hours of CPU) before the engine refused it."""
    from ..fio.limits import MAX_RUN_DAYS, MAX_RUN_US
    from ..fio.units import parse_time_us

    us = sum(parse_time_us(t, default_unit="s") for t in (runtime, ramp_time) if t is not None)
    if us > MAX_RUN_US:
        given = ", ".join(f"{k} {t}" for k, t in (("ramp_time", ramp_time), ("runtime", runtime)) if t is not None)
        raise SweepConfigError(f"{where}: {given}: ramp_time + runtime at most {MAX_RUN_DAYS} days (the engine's run limit)")


def _duration(v: Any, where: str, key: str) -> Optional[str]:
    from ..fio.units import parse_time_us

    if v is None:
        return None
    text = str(v) if isinstance(v, int) and not isinstance(v, bool) else v
    if not isinstance(text, str):
        raise SweepConfigError(f'{where}: {key}: a time such as "10s" or "500ms"')
    try:
        us = parse_time_us(text, default_unit="s")
    except ValueError as e:
        raise SweepConfigError(f"{where}: {key} '{text}': {e}") from None
    if key == "runtime" and us <= 0:
        raise SweepConfigError(f"{where}: runtime: above 0")
    return text


def _job(job: str, base: Path, where: str, cache: dict[str, tuple[str, str]], ids: Optional[dict[str, str]] = None) -> tuple[str, str]:
    """(name, text) of a job: a built-in (python/ssdtwin/jobs/NAME.fio) or a file. ``ids``
    gets what the job is: ``builtin:NAME`` or the file's resolved path."""
    if job in cache:
        return cache[job]
    builtin = JOBS / (job if job.endswith(".fio") else f"{job}.fio")
    path = base / job
    if "/" not in job and builtin.is_file() and not path.is_file():
        text = builtin.read_text()
        if ids is not None:
            ids[job] = f"builtin:{builtin.name}"
    else:
        if ids is not None:
            ids[job] = str(path.resolve())
        try:
            _regular(path)
            text = path.read_text()
        except OSError as e:
            builtins = ", ".join(sorted(p.name[:-4] for p in JOBS.iterdir() if p.name.endswith(".fio")))
            nor = f" (nor a built-in job: {builtins})" if isinstance(e, FileNotFoundError) else ""
            raise SweepConfigError(f"{where}: job {job}: {e.strerror or e}{nor}") from None
        except UnicodeDecodeError:
            raise SweepConfigError(f"{where}: job {job}: not a text file") from None
    cache[job] = (job, text)
    return cache[job]


def _check_vars(text: str, vars: Mapping[str, str], job: str, where: str) -> None:
    # fio replaces an unset ${NAME} by nothing; a sweep refuses it (a typo would otherwise
    # run a different job), and never reads the environment (points must not depend on it).
    for line in text.splitlines():
        body = re.split(r"[;#]", line, maxsplit=1)[0]
        for n in VAR_USE.findall(body):
            if n not in vars:
                raise SweepConfigError(f"{where}: job {job} uses ${{{n}}}, which the point's vars do not set")


def _check_job(text: str, vars: Mapping[str, str], job: str, where: str, done: dict[str, Optional[int]], base: Path) -> Optional[int]:
    """Parse each job (with each set of vars) once, before any point runs: a job file fio
    would refuse is the sweep's error, not a failure recorded for every point. Returns the
    smallest rate_iops the job can be capped at (None when its clones are not known before
    a drive is: point.py refuses such a cap when the point runs)."""
    from ..fio import FioJobError, parse_string

    key = canonical([text, vars])
    if key in done:
        return done[key]
    try:
        run = parse_string(text, name=job, env=vars, cwd=base)
    except FioJobError as e:
        raise SweepConfigError(f"{where}: {e.lines()[0]}") from None
    except ValueError as e:
        raise SweepConfigError(f"{where}: job {job}: {e}") from None
    try:  # any namespace large enough for the job: the directions and mixes do not depend on it
        done[key] = min_rate_iops(run.to_engine(1 << 50, 4096))
    except (FioJobError, ValueError):
        done[key] = None
    return done[key]


def mixed_clone(s: JobSpec) -> bool:
    """The clone both reads and writes (a cap of its own for each direction)."""
    return {"read", "write"} <= set(s["directions"]) and 0 < s["rwmixread"] < 100


def min_rate_iops(specs: Sequence[JobSpec]) -> int:
    """The smallest total rate_iops the clones can share: one I/O per second for each
    direction of each clone (fio's rate_iops=0 is no cap)."""
    return sum(1 + mixed_clone(s) for s in specs)


def rate_too_low(least: int) -> str:
    return f"below {least}, one I/O per second for each direction of each of the job's clones (fio's rate_iops=0 is no cap)"


def min_rate_iops_of(job_text: str, vars: Mapping[str, str], job: str, base: Path) -> Optional[int]:
    """The smallest rate_iops a job file can be capped at (`ssdtwin advise` sizes its caps)."""
    return _check_job(job_text, vars, job, job, {}, base)


def _point(params: dict[str, Any], seed: int, job_name: str, job_text: str) -> Point:
    image = {k: params[k] for k in ("preset", "scale", "precondition")}
    image["namespace"] = namespace_key(params)
    job_sha = hashlib.sha256(job_text.encode()).hexdigest()
    pid = hashlib.sha256(f"point\0{seed}\0{canonical(params)}\0{job_sha}".encode()).hexdigest()[:16]
    image_seed = derive_seed(seed, "image", image)
    key = hashlib.sha256(f"image\0{image_seed}\0{canonical(image)}".encode()).hexdigest()[:16]
    return Point(
        params=params,
        job_name=job_name,
        job_text=job_text,
        point_id=pid,
        seed=derive_seed(seed, "run", params),
        image_key=key,
        image_seed=image_seed,
    )


def namespace_key(params: Mapping[str, Any]) -> str:
    """The namespace as a fraction of the drive's capacity, to 12 significant digits
    (3.20 TB and extra_op 0.2 are the same drive state and share an image)."""
    frac = namespace_fraction(params)
    return "whole" if frac is None else f"{frac:.12g}"


@functools.cache
def capacity_bytes(preset: str) -> int:
    """The preset's user capacity at full scale (a point's namespace is a fraction of it)."""
    return int(_core.preset(preset)["capacity"]["tnvmcap_bytes"]["value"])


def _unbuildable(preset: str, scale: int) -> Optional[str]:
    """The core's reason the preset has no drive at 1/``scale`` (None: it has one). A drive
    in memory is made lazily: this takes about a millisecond at any scale."""
    try:
        _core.Drive.in_memory(preset=preset, scale=scale).close()
    except _core.SpecError as e:
        return str(e)
    return None


@functools.cache
def scale_problem(preset: str, scale: int) -> Optional[str]:
    """Why ``preset`` cannot be built at 1/``scale``, with the scales it can be built at; None
    when it can. A scale past the drive's was every point's failure after Ray had started
    (exit 0), though it is known from the file alone."""
    why = _unbuildable(preset, scale)
    if why is None:
        return None
    lo, hi = 1, scale  # 1/lo builds (every preset does at full scale), 1/hi does not
    if _unbuildable(preset, lo) is not None:
        return why
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if _unbuildable(preset, mid) is None else (lo, mid)
    reason = why.removeprefix(f"scale 1/{scale}: ")
    return f"1/{scale}: {reason}; {preset} is built at 1/1 to 1/{lo}"


@functools.lru_cache(maxsize=1)
def preset_names() -> tuple[str, ...]:
    return tuple(n for n, _ in _core.presets())


def namespace_fraction(params: Mapping[str, Any]) -> Optional[float]:
    """The fraction of the capacity the point's namespace takes; None: the factory namespace.
    Above 1 when the drive cannot hold it (refused when the point runs: a recorded failure)."""
    if params.get("namespace_fraction") is not None:
        f = float(params["namespace_fraction"])
        return None if f == 1.0 else f
    if params.get("extra_op") is not None:
        x = float(params["extra_op"])
        return None if x == 0 else 1 / (1 + x)
    tb = params.get("namespace_tb")
    if tb is None:
        return None
    full = capacity_bytes(params["preset"])
    # The drive's marketed size (3.84 for a 3.84 TB drive) is its whole capacity; only that
    # size (3.836 and 3.845 TB were taken for it too: 3.845 is larger than the drive).
    if tb == round(full / 1e10) / 100:
        return None
    return float(tb * 1e12 / full)


def _swept(points: Sequence[Point]) -> list[str]:
    """Table columns whose value differs between points (vars as var_NAME)."""
    cols: dict[str, set[str]] = {}
    names = {n for q in points for n in q.params["vars"]}  # once: per point it made loading quadratic
    for p in points:
        for k, v in p.params.items():
            if k == "vars":
                continue
            cols.setdefault(k, set()).add(canonical(v))
        for n in names:
            cols.setdefault(f"var_{n}", set()).add(canonical(p.params["vars"].get(n)))
    return [k for k, vs in cols.items() if len(vs) > 1]


def _plots(raw: Any, name: str, swept: Sequence[str]) -> list[Plot]:
    if not isinstance(raw, list) or not all(isinstance(p, Mapping) for p in raw):
        raise SweepConfigError(f"{name}: plot: an array of tables ([[plot]] x = ..., y = ...)")
    out = []
    files: dict[str, int] = {}
    for i, p in enumerate(raw):
        _no_unknown(p, PLOT_KEYS, name, f"plot[{i}]")
        x, y = p.get("x"), p.get("y")
        if x not in swept:
            got = "missing" if x is None else f"'{x}'"
            raise SweepConfigError(
                f"{name}: plot[{i}].x {got}: a column the sweep varies ({', '.join(swept) or 'none: the sweep has one point'})"
            )
        if y not in OUTPUT_COLUMNS:
            got = "missing" if y is None else f"'{y}'"
            raise SweepConfigError(f"{name}: plot[{i}].y {got}: an output column ({', '.join(OUTPUT_COLUMNS)})")
        title = p.get("title")
        if title is not None and not isinstance(title, str):
            raise SweepConfigError(f"{name}: plot[{i}].title: a string")
        # One file per (y, x): a second table of the same pair was drawn over the first's
        # file, and the summary listed that file twice.
        file = plot_file_name(str(x), str(y))
        if file in files:
            raise SweepConfigError(f"{name}: plot[{i}]: the same figure as plot[{files[file]}] ({file}: y {y} against x {x})")
        files[file] = i
        out.append(Plot(x=str(x), y=str(y), title=title))
    return out


def plot_file_name(x: str, y: str) -> str:
    """The file a [[plot]] is drawn to, in OUT/plots."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{y}-vs-{x}") + ".png"
