"""`ssdtwin sweep` and the sweep file (docs/sweep.md).

* The grid expansion, by property: tests/test_sweep_grid.py.
* End to end on tiny points (1/454): the CLI in this machine's process and on a Ray cluster
  started here with `ray start --head` on 127.0.0.1 give identical Parquet tables; a point
  whose drive cannot hold its namespace is a recorded failure; --resume runs only new points
  and keeps the old rows; Ctrl-C exits 130 keeping the points done.
* Bad input: one line naming the key or the address, exit 1.

The Ray cluster is started once, by the one test that needs it (pytest-xdist would start a
session fixture once per worker), and stopped by its process group.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ssdtwin.sweep import config
from twin import CM6, check_image, free_port, run_cli

TINY = f"""\
title = "tiny"
seed = 7
[point]
preset = "{CM6}"
scale = "1/454"
vars = {{ RUNTIME = "100ms", RAMP = "20ms" }}
[grid]
namespace_tb = [3.84, 3.2, 5.0]
job = ["cm6-rand-write", "cm6-rand-read"]
[[plot]]
x = "namespace_tb"
y = "iops"
[[plot]]
x = "namespace_tb"
y = "waf"
"""


def sweep_doc(axes: dict[str, Any]) -> dict[str, Any]:
    return {"point": {"preset": CM6, "job": "cm6-rand-write", "vars": {"RUNTIME": "1s", "RAMP": "0s"}}, "grid": axes}


# --------------------------------------------------------------------------- bad input


def bad(tmp_path: Path, text: str, *extra: str) -> str:
    f = tmp_path / "sweep.toml"
    f.write_text(text)
    r = run_cli("sweep", f, "--out", tmp_path / "out", "--in-process", *extra, check=False)
    assert r.returncode == 1, r
    assert len(r.stderr_lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "out" / "points").exists()
    return r.stderr_lines[0]


@pytest.mark.parametrize(
    "text, expected",
    [
        (TINY.replace("[grid]", "[grdi]"), "unknown key 'grdi'"),
        (TINY.replace('scale = "1/454"', 'scale = "1/454"\nnamespace = 3'), "point: unknown key 'namespace'"),
        (TINY.replace("[3.84, 3.2, 5.0]", "[]"), "grid.namespace_tb: an empty list"),
        (TINY.split("[grid]")[0] + "[grid]\n", "grid: empty"),
        (TINY.replace("[grid]", '[grid]\nstack = ["iu-fill"]'), "stack: not a sweep axis in this version (host stacks:"),
        (TINY.replace(CM6, "no-such-drive"), "preset 'no-such-drive': no such preset"),
        # A TOML number may have digit separators; a string is no number (int() took 4_54).
        (TINY.replace('"1/454"', '"1/4_54"'), "scale '1/4_54': use 1/N"),
        # Past the drive's smallest scale: every point failed, after Ray had started (exit 0).
        (
            TINY.replace('"1/454"', '"1/1024"'),
            "scale: 1/1024: too small: 1820 blocks per plane leave 2.4 data superblocks at 1/1024 (need at least 4: N <= 528); "
            f"{CM6} is built at 1/1 to 1/528",
        ),
        (TINY.replace('"cm6-rand-read"', '"missing.fio"'), "job missing.fio: No such file or directory"),
        (TINY.replace('RUNTIME = "100ms", ', ""), "uses ${RUNTIME}, which the point's vars do not set"),
        (TINY.replace('"100ms"', '"1 hour"'), "bad-time"),
        (TINY.replace("[[plot]]", "[[plot]]\nz = 1"), "unknown key 'plot[0].z'"),
        (TINY.replace('y = "iops"', 'y = "speed"'), "plot[0].y 'speed': an output column"),
        (TINY.replace('x = "namespace_tb"\ny = "iops"', 'y = "iops"'), "plot[0].x missing: a column the sweep varies (namespace_tb, job)"),
        # Drawn to one file (the second over the first) and listed twice in the summary.
        (TINY.replace('y = "waf"', 'y = "iops"\ntitle = "again"'), "plot[1]: the same figure as plot[0] (iops-vs-namespace_tb.png"),
        ("[point\n", "not valid TOML"),
        # tomlkit names no line for a key given twice in a table (it does at the top level).
        (TINY.replace("[[plot]]", 'job = ["cm6-rand-read"]\n[[plot]]', 1), 'not valid TOML: Key "job" already exists. at line 10'),
        ("seed = 1\nseed = 2\n", 'not valid TOML: Key "seed" already exists. at line 2'),
        # Past the engine's run limit: it simulated 200 days (hours of CPU) before refusing.
        (
            TINY.replace('scale = "1/454"', 'scale = "1/454"\nruntime = "150d"\nramp_time = "60d"'),
            "ramp_time 60d, runtime 150d: ramp_time + runtime at most 200 days",
        ),
        # 8 clones cannot share a cap of 3 (each ran at least 1 I/O per second: 8 in all).
        (TINY.replace('scale = "1/454"', 'scale = "1/454"\nrate_iops = 3'), "rate_iops 3: below 8, one I/O per second for each direction"),
    ],
    ids=[
        "unknown-top",
        "unknown-axis",
        "empty-axis",
        "empty-grid",
        "stack",
        "preset",
        "scale-digit-separator",
        "scale-too-small",
        "job-file",
        "unset-var",
        "job-error",
        "plot-key",
        "plot-y",
        "plot-x-missing",
        "plot-twice",
        "toml",
        "duplicate-key-in-table",
        "duplicate-key-at-top",
        "run-length",
        "rate-below-clones",
    ],
)
def test_a_bad_sweep_file_is_one_line_naming_the_key(tmp_path: Path, text: str, expected: str) -> None:
    line = bad(tmp_path, text)
    assert line.startswith("ssdtwin sweep: error: ")
    if expected == "bad-time":  # fio's own message, with the point
        assert "point 0" in line and "runtime" in line, line
    else:
        assert expected in line, line
    assert "sweep.toml" in line


@pytest.mark.parametrize(
    "file, folder",
    [("points", False), ("plots", False), ("cache", False), ("cache/images", False), ("results.parquet", True)],
)
def test_an_out_folder_whose_names_the_sweep_needs_hold_something_else_is_refused_first(tmp_path: Path, file: str, folder: bool) -> None:
    """A file where the sweep keeps a folder (or a folder where it writes its table): a file
    `cache` failed every point and exited 0; `points`, `plots` or a folder `results.parquet`
    stopped the sweep after every point had run."""
    out = tmp_path / "out"
    (out / file).parent.mkdir(parents=True, exist_ok=True)
    if folder:
        (out / file).mkdir()
        (out / file / "mine").write_text("kept")
    else:
        (out / file).write_text("kept")
    f = tmp_path / "sweep.toml"
    f.write_text(TINY)
    r = run_cli("sweep", f, "--out", out, "--in-process", check=False)
    assert r.returncode == 1 and len(r.stderr_lines) == 1, r.stderr
    what = "is a folder (the sweep writes its table there)" if folder else "is not a folder (the sweep keeps its "
    assert r.stderr_lines[0].startswith(f"ssdtwin sweep: error: --out {out}: {out / file} {what}"), r.stderr
    assert "points:" not in r.stderr and not list(out.glob("points/*.json"))  # nothing ran
    assert (out / file / "mine" if folder else out / file).read_text() == "kept"


def test_the_images_go_to_the_out_folder_whatever_the_workers_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A relative --out was handed to the workers as it was: on a Ray cluster they built the
    images under the folder `ray start` ran in, not in OUT/cache."""
    from ssdtwin.sweep.runner import Executor, run_sweep

    seen: list[Path] = []

    class Recording(Executor):
        def run(self, points: Any, cache: Path, finished: Any) -> None:
            seen.append(cache)

    monkeypatch.chdir(tmp_path)
    sweep = config.from_dict(sweep_doc({"namespace_tb": [3.2]}))
    run_sweep(sweep, Path("out"), Recording)
    assert seen == [tmp_path / "out" / "cache"]
    run_sweep(sweep, Path("again"), Recording, cache=Path("images"))
    assert seen[1] == tmp_path / "images"


def test_a_failed_point_has_the_same_row_in_this_process_and_on_a_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scale too small for the drive is the point's failure; its message named the scale
    `--scale 1/1024` when the point ran in the CLI's process (which names the option so)
    and `scale=1024` on a Ray worker: the same point, two rows."""
    from ssdtwin import drive
    from ssdtwin.sweep.point import run_point

    doc = sweep_doc({"scale": ["1/454"]})
    doc["point"]["precondition"] = "none"
    (p,) = config.from_dict(doc).points
    # A sweep file refuses such a scale now (below); a point made otherwise (an older
    # version's, by hand) still fails the same way wherever it runs.
    p = dataclasses.replace(p, params={**p.params, "scale": 1024})
    rows = []
    for name in ("--scale", "scale"):  # the CLI's process, a worker's
        monkeypatch.setattr(drive, "SCALE_NAME", name)
        rows.append(run_point(p, str(tmp_path / name))["row"])
        assert name == drive.SCALE_NAME
    assert rows[0] == rows[1], rows
    assert rows[0]["status"] == "failed" and rows[0]["error"].startswith("scale=1024: too small: "), rows[0]


@pytest.mark.parametrize("kind", ["sweep", "job"])
@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "directory"])
def test_a_sweep_or_job_file_that_is_not_a_regular_file_is_one_line(tmp_path: Path, kind: str, special: str) -> None:
    """A FIFO blocked the sweep before it began (and /dev/zero would have been read until
    memory ran out): only a regular file is read, as `ssdtwin fio` and `advise` read theirs."""
    path = Path(special) if special.startswith("/") else tmp_path / special
    if special == "fifo":
        os.mkfifo(path)
    elif special == "directory":
        path.mkdir()
    f = tmp_path / "sweep.toml"
    if kind == "sweep":
        f = path
    else:
        f.write_text(TINY.replace('"cm6-rand-read"', f'"{path}"'))
    r = run_cli("sweep", f, "--out", tmp_path / "out", "--in-process", check=False, process=True, timeout=60)
    assert r.returncode == 1 and len(r.stderr_lines) == 1, r.stderr
    what = {"fifo": "a FIFO", "/dev/zero": "a character device", "directory": "a directory"}[special]
    line = r.stderr_lines[0]
    assert line.startswith("ssdtwin sweep: error: ") and line.endswith(f"{path}: not a regular file ({what})"), line


def test_a_sweep_without_pyarrow_is_one_line_before_any_point_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # pyarrow comes with ssdtwin[sweep], not with ssdtwin: without it every point ran, then
    # writing the table was a ModuleNotFoundError traceback.
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    line = bad(tmp_path, TINY)
    assert line == "ssdtwin sweep: error: pyarrow is not installed (the table is Parquet): pip install 'ssdtwin[sweep]'"
    assert not (tmp_path / "out" / "cache").exists()


def test_a_local_ray_of_more_cpus_than_cores_is_refused_before_it_starts(tmp_path: Path) -> None:
    # A point per CPU: --num-cpus 4096 on a 2-core machine started a Ray that would run up to
    # 4096 points at once, each a process with its drive in memory.
    cores = os.cpu_count() or 1
    line = bad(tmp_path, TINY, "--ray", "--num-cpus", str(cores + 1))
    assert line == f"ssdtwin sweep: error: --num-cpus {cores + 1}: at most this machine's {cores} cores (a local Ray runs a point per CPU)"


def test_an_unreachable_ray_address_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "sweep.toml"
    f.write_text(TINY)
    t0 = time.monotonic()
    # A process of its own: Ray, once imported, keeps state in the process that imported it.
    r = run_cli("sweep", f, "--out", tmp_path / "out", "--address", f"127.0.0.1:{free_port()}", check=False, process=True)
    assert r.returncode == 1 and r.stderr_lines == [r.stderr_lines[0]], r.stderr
    assert "no Ray cluster reachable there" in r.stderr and "--address 127.0.0.1:" in r.stderr
    assert time.monotonic() - t0 < 60
    assert not (tmp_path / "out").exists()  # it used to be left with points/ and .lock


@pytest.mark.parametrize("failure", [KeyboardInterrupt, RuntimeError])
@pytest.mark.parametrize("before", ["nothing", "empty", "points"])
def test_an_executor_that_cannot_start_leaves_out_as_it_was(tmp_path: Path, failure: type[BaseException], before: str) -> None:
    """Ray refused (or Ctrl-C while it starts): OUT, its parents, points/ and .lock are
    removed if this run made them, and what was there before is kept."""
    from ssdtwin.sweep.runner import run_sweep

    f = tmp_path / "sweep.toml"
    f.write_text(TINY)
    out = tmp_path / "a" / "out"
    if before != "nothing":
        out.mkdir(parents=True)
    if before == "points":
        (out / "points").mkdir()
        (out / "points" / "old.json").write_text("{}")
    snapshot = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))

    def refuse() -> Any:
        raise failure("no Ray")

    with pytest.raises(failure):
        run_sweep(config.load(f), out, refuse, resume=before == "points")
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == snapshot


def test_a_cluster_that_wants_a_token_is_one_line_saying_so(monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """`ray start` (Ray 2.60) asks drivers for a token: without RAY_AUTH_MODE=token the
    sweep printed Ray's core warning once a second for 20 s, then "Failed to connect to Ray
    cluster", which does not say why. A stand-in for Ray that refuses as Ray does (the
    warning on file descriptor 2, then ConnectionError) keeps the test to a second."""
    import types

    from ssdtwin.sweep.runner import RayExecutor, SweepError

    def init(**kwargs: Any) -> None:
        warning = "[W gcs_client.cc:210] Failed to get cluster ID from GCS server: Unauthenticated: RPC error: InvalidAuthToken\n"
        os.write(2, warning.encode())
        raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6391")

    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(init=init))
    with socket.create_server(("127.0.0.1", 0)) as listening:
        address = f"127.0.0.1:{listening.getsockname()[1]}"
        with pytest.raises(SweepError) as e:
            RayExecutor(address=address)
    assert str(e.value).startswith(f"--address {address}: the cluster wants Ray's token authentication (Failed to connect"), e.value
    assert "RAY_AUTH_MODE=token" in str(e.value)
    assert "gcs_client" not in capfd.readouterr().err  # kept aside, not printed
    os.write(2, b"after\n")
    assert capfd.readouterr().err == "after\n"  # file descriptor 2 is the terminal's again


# --------------------------------------------------------------------------- end to end


@pytest.fixture(scope="module")
def tiny_in_process(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny sweep run in this process, point after point (the reference); made once per
    test run, also under pytest-xdist (its workers share the base folder's parent)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # this run's folder either way
    d = root / "sweep-inproc"
    with open(root / "sweep-inproc.lock", "w") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        if not (d / "out" / "results.parquet").is_file():
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir()
            (d / "sweep.toml").write_text(TINY)
            r = run_cli("sweep", d / "sweep.toml", "--out", d / "out", "--in-process")
            assert "6 points: 6 run, 0 kept from before, 2 failed" in r.stdout, r.stdout
            failures = [line for line in r.stderr_lines if ": failed: " in line]  # the progress line of each
            assert len(failures) == 2 and all("namespace 5.0 TB: larger than the drive" in line for line in failures), r.stderr
            # 100 ms windows span no GC cycle: `waf` is null in every row, and the figure of it says so.
            assert f"plot: {d / 'out' / 'plots' / 'waf-vs-namespace_tb.png'} (empty: waf is null in every row" in r.stdout, r.stdout
            # The run's folder is shared by the workers, out of reach of conftest's check of
            # each worker's shared images: the cached images are checked here, once, as made.
            for manifest in sorted((d / "out" / "cache").rglob("ssdtwin.toml")):
                check_image(manifest.parent)
    return d / "out"


def test_the_docs_sweep_plots_columns_short_windows_fill(tiny_in_process: Path) -> None:
    """docs/sweeps/cm6-namespaces.toml (the README's and docs/sweep.md's sweep) measures 1 s
    windows, too short for a GC cycle, as the tiny sweep's are: each of its figures is of a
    column the tiny sweep's random-write rows fill (it once plotted `waf`, drawn empty)."""
    docs = config.load(Path(__file__).resolve().parents[1] / "docs" / "sweeps" / "cm6-namespaces.toml")
    df = read(tiny_in_process).to_pandas()
    written = df[(df.job == "cm6-rand-write") & (df.status == "ok")]
    for plot in docs.plots:
        assert written[plot.y].notna().all(), f"docs/sweeps/cm6-namespaces.toml plots {plot.y}, null over short windows"


def read(out: Path) -> Any:
    import pyarrow.parquet as pq

    return pq.read_table(out / "results.parquet")


def test_the_table_has_a_row_per_point_and_the_physics_of_op(tiny_in_process: Path) -> None:
    df = read(tiny_in_process).to_pandas()
    assert len(df) == 6 and (df.status == "ok").sum() == 4
    bad_rows = df[df.namespace_tb == 5.0]
    assert (bad_rows.status == "failed").all() and bad_rows.iops.isna().all()
    assert bad_rows.error.str.contains("larger than the drive").all()
    w = df[(df.job == "cm6-rand-write") & (df.status == "ok")].set_index("namespace_tb")
    # A smaller namespace leaves more spare NAND: more OP, lower WAF, more random-write IOPS.
    assert w.op[3.2] > w.op[3.84] and w.steady_waf[3.2] < w.steady_waf[3.84]
    assert w.iops[3.2] > w.iops[3.84]
    r = df[(df.job == "cm6-rand-read") & (df.status == "ok")]
    assert (r.write_iops == 0).all() and (r.read_iops > 0).all() and r.waf.isna().all()
    assert (tiny_in_process / "plots" / "iops-vs-namespace_tb.png").stat().st_size > 1000
    assert len(list((tiny_in_process / "points").glob("*.json"))) == 6
    # two drive states, two images: the 5.0 TB one was refused before anything was built
    assert len(list((tiny_in_process / "cache" / "images").glob("*.json"))) == 2


def test_resume_runs_only_new_points_and_keeps_the_rows(tiny_in_process: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(tiny_in_process, out)
    before = read(out).to_pandas()
    toml = tmp_path / "sweep.toml"
    toml.write_text(TINY.replace("[3.84, 3.2, 5.0]", "[3.84, 3.52, 3.2, 5.0]"))
    r = run_cli("sweep", toml, "--out", out, "--in-process", "--resume")
    # 4 kept; 3.52 TB twice (new), 5.0 TB twice (failed before, tried again)
    assert "8 points: 4 run, 4 kept from before, 2 failed" in r.stdout, r.stdout
    after = read(out).to_pandas()
    assert len(after) == 8
    old = before[before.status == "ok"].set_index("point_id")
    new = after.set_index("point_id").loc[old.index]
    assert new.equals(old)  # the same rows, bit for bit
    assert after.namespace_tb.tolist() == [3.84, 3.84, 3.52, 3.52, 3.2, 3.2, 5.0, 5.0]  # the sweep's order


@pytest.mark.parametrize(("sig", "rc", "line"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "stopped by SIGTERM")])
def test_ctrl_c_keeps_the_points_done_and_resume_finishes(tmp_path: Path, sig: int, rc: int, line: str) -> None:
    """SIGTERM stops a sweep as Ctrl-C does (it killed the process: no table, no line, the
    image in the making left half built in the cache)."""
    toml = tmp_path / "sweep.toml"
    toml.write_text(
        TINY.replace("[3.84, 3.2, 5.0]", "[3.84, 3.6, 3.4, 3.2, 3.0, 2.8]")
        .replace('job = ["cm6-rand-write", "cm6-rand-read"]', 'job = ["cm6-rand-write"]')
        .replace("[point]\n", '[point]\nprecondition = "none"\n')
        .replace('"100ms"', '"400ms"')
    )
    out = tmp_path / "out"
    from twin import SSDTWIN

    p = subprocess.Popen(
        [*SSDTWIN, "sweep", str(toml), "--out", str(out), "--in-process"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    t0 = time.monotonic()
    while not (out / "points").is_dir() or not any((out / "points").glob("*.json")):
        assert p.poll() is None and time.monotonic() - t0 < 120, p.communicate()
        time.sleep(0.05)
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    assert p.returncode == rc, err
    assert err.strip().splitlines()[-1].startswith(f"ssdtwin sweep: {line}; ") and "--resume continues" in err
    kept = {f.name: f.read_text() for f in (out / "points").glob("*.json")}
    assert 1 <= len(kept) < 6
    assert len(read(out)) == len(kept)  # the table of the points done so far
    assert not list((out / "cache" / "images").glob("*.tmp"))
    r = run_cli("sweep", toml, "--out", out, "--in-process", "--resume")
    assert f"6 points: {6 - len(kept)} run, {len(kept)} kept from before, 0 failed" in r.stdout
    assert all((out / "points" / n).read_text() == t for n, t in kept.items())


@pytest.fixture
def ray_cluster() -> Iterator[str]:
    """A one-node Ray cluster on 127.0.0.1 (`ray start --head --block` in its own process
    group, loopback only, no token), stopped by that group at the end."""
    pytest.importorskip("ray")
    found = shutil.which("ray", path=os.path.dirname(sys.executable))
    ray_cmd = [found] if found else [sys.executable, "-m", "ray.scripts.scripts"]  # the `ray` command's module
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="ray-")  # short: Ray's unix socket paths must fit 107 bytes
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    with open(Path(tmp) / "start.log", "w+") as log:
        p = subprocess.Popen(
            [*ray_cmd, "start", "--head", f"--port={port}", "--num-cpus=2", "--node-ip-address=127.0.0.1", "--include-dashboard=false",
             "--disable-usage-stats", f"--temp-dir={tmp}", "--block"],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )  # fmt: skip
        try:
            t0 = time.monotonic()
            while "Ray runtime started" not in (Path(tmp) / "start.log").read_text():
                assert p.poll() is None, (Path(tmp) / "start.log").read_text()
                assert time.monotonic() - t0 < 180, "ray start took more than 180 s"
                time.sleep(0.2)
            yield f"127.0.0.1:{port}"
        finally:
            stop_group(p)
            shutil.rmtree(tmp, ignore_errors=True)


def stop_group(p: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group `ray start` leads (raylet, GCS, workers), SIGKILL to
    what is left after 5 s (a throwaway cluster: its folder goes too); only the processes
    this test started."""
    os.killpg(p.pid, signal.SIGTERM)
    t0 = time.monotonic()
    while time.monotonic() - t0 < 5:
        if p.poll() is not None:
            try:
                os.killpg(p.pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, signal.SIGKILL)
    p.wait()


def test_a_ray_cluster_gives_the_same_table_as_this_process(tiny_in_process: Path, ray_cluster: str, tmp_path: Path) -> None:
    toml = tmp_path / "sweep.toml"
    toml.write_text(TINY)
    env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    r = run_cli("sweep", toml, "--out", tmp_path / "out", "--address", ray_cluster, "-o", "json", env=env, timeout=600)
    summary = r.json()
    assert summary["where"].startswith(f"Ray cluster {ray_cluster} (1 node, 2 CPUs)")
    assert summary["run"] == 6 and len(summary["failed"]) == 2
    on_ray, here = read(tmp_path / "out"), read(tiny_in_process)
    assert on_ray.num_rows == 6 and on_ray.equals(here), (on_ray.to_pandas(), here.to_pandas())

    # The points ran in Ray's worker processes (the in-process run used one process).
    def pids(out: Path) -> set[int]:
        return {json.loads(f.read_text())["pid"] for f in (out / "points").glob("*.json")}

    assert len(pids(tiny_in_process)) == 1 and not pids(tmp_path / "out") & pids(tiny_in_process)
    host, port = ray_cluster.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5):
        pass  # the cluster outlives the sweep (the sweep only disconnects)


def test_sigterm_under_ray_stops_the_sweep_as_ctrl_c_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ray.init installs a SIGTERM handler of its own (sys.exit(15)): a sweep on Ray stopped
    by SIGTERM exited 1 or 15 after Ray's stack dump, without its line. Ray is replaced by an
    executor that installs that handler, runs one point and is sent SIGTERM. The image a
    killed worker was building is removed; one another sweep is building (its lock held) is not."""
    from ssdtwin.sweep import runner

    closed: list[bool] = []
    images = tmp_path / "out" / "cache" / "images"

    class RayLike(runner.Executor):
        where = "a Ray stand-in"

        def __init__(self, **kwargs: Any) -> None:
            signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(15))  # what ray.init does

        def run(self, points: Any, cache: Path, finished: Any) -> None:
            finished(points[0], runner.run_point(points[0], str(cache)))
            (images / "killed.tmp").mkdir()  # a worker killed while it built an image
            (images / "building.tmp").mkdir()
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)  # the handler runs here
            raise AssertionError("SIGTERM did not stop the sweep")

        def close(self) -> None:
            closed.append(True)

    monkeypatch.setattr(runner, "RayExecutor", RayLike)
    (tmp_path / "sweep.toml").write_text(TINY.replace('job = ["cm6-rand-write", "cm6-rand-read"]', 'job = ["cm6-rand-write"]'))
    out = tmp_path / "out"
    before = signal.getsignal(signal.SIGTERM)
    images.mkdir(parents=True)
    try:
        with open(images / "building.lock", "a") as building:
            fcntl.flock(building.fileno(), fcntl.LOCK_EX)
            r = run_cli("sweep", tmp_path / "sweep.toml", "--out", out, check=False)
    finally:
        signal.signal(signal.SIGTERM, before)
    line = f"ssdtwin sweep: stopped by SIGTERM; 1 of 3 points done and kept in {out}; --resume continues"
    assert (r.returncode, r.stderr_lines[-1]) == (143, line)
    assert closed == [True] and len(read(out)) == 1
    assert not (images / "killed.tmp").exists() and (images / "building.tmp").is_dir()


@pytest.mark.parametrize("cmd", ["sweep", "advise"])
def test_ctrl_c_while_ray_starts_says_only_what_is_true(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cmd: str) -> None:
    """A Ctrl-C while Ray starts: advise said "the sweeps done so far are in DIR" of a DIR
    that did not exist, sweep that the points done were kept in an OUT it then left with
    points/ and .lock. Ray's start is replaced by the Ctrl-C."""
    from ssdtwin.commands.common import Interrupt
    from ssdtwin.sweep import runner

    def ctrl_c(**kwargs: Any) -> Any:
        Interrupt.on_sigint(signal.SIGINT, None)  # what the CLI's handler does on Ctrl-C

    monkeypatch.setattr(runner, "RayExecutor", ctrl_c)
    out = tmp_path / "out"
    if cmd == "sweep":
        (tmp_path / "sweep.toml").write_text(TINY)
        r = run_cli("sweep", tmp_path / "sweep.toml", "--out", out, check=False)
        note = f"no point run; {out} is as it was"
    else:
        (tmp_path / "w.fio").write_text("[w]\nrw=randwrite\nbs=4k\n")
        r = run_cli("advise", tmp_path / "w.fio", "--target-iops", "1k", "--drives", CM6, "--out", out, check=False)
        note = "no sweep run; nothing kept"
    assert (r.returncode, r.stderr_lines) == (130, [f"ssdtwin {cmd}: interrupted; {note}"])
    assert not out.exists()


@pytest.mark.parametrize("other", ["./jobs/w.fio", "jobs/../jobs/w.fio", "link.fio", "ABS"])
def test_one_job_file_named_two_ways_is_one_point(tmp_path: Path, other: str) -> None:
    """`jobs/w.fio` and `./jobs/w.fio` (or a symlink to it, or its absolute path) are the
    same file: the sweep lists the point twice, as with the same name twice. They were two
    points, run twice, with two ids."""
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "w.fio").write_text("[w]\nrw=randwrite\nbs=4k\n")
    (tmp_path / "link.fio").symlink_to(tmp_path / "jobs" / "w.fio")
    other = str(tmp_path / "jobs" / "w.fio") if other == "ABS" else other
    f = tmp_path / "sweep.toml"
    f.write_text(f'[point]\npreset = "{CM6}"\nscale = "1/454"\n[[cases]]\njob = "jobs/w.fio"\n[[cases]]\njob = "{other}"\n')
    with pytest.raises(config.SweepConfigError, match=r"point 1 \(.*\): the same point as point 0 \(the sweep lists it twice\)$"):
        config.load(f)


def test_a_built_in_job_named_two_ways_is_one_point(tmp_path: Path) -> None:
    f = tmp_path / "sweep.toml"
    point = f'[point]\npreset = "{CM6}"\nscale = "1/454"\nvars = {{ RUNTIME = "1s", RAMP = "0s" }}\n'
    f.write_text(point + '[grid]\njob = ["cm6-rand-write", "cm6-rand-write.fio"]\n')
    with pytest.raises(config.SweepConfigError, match=r"the same point as point 0 \(the sweep lists it twice\)$"):
        config.load(f)


def test_from_dict_of_something_not_a_table_is_a_sweep_config_error() -> None:
    # Was "unknown key '{'point': ...}'", or for an empty list AttributeError: 'list' object has no attribute 'get'.
    with pytest.raises(config.SweepConfigError, match=r"^<sweep>: a sweep is a table of its keys \(a dict\), not a list$"):
        config.from_dict([{"point": {"preset": CM6}}])  # type: ignore[arg-type]


def test_a_plot_cut_short_leaves_no_partial_file_under_its_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ctrl-C (or a full disk) while a figure is written leaves the figure of an earlier
    run as it was, and no partial PNG under the name (plots.py once called savefig on the
    final path: a truncated PNG took its place)."""
    from matplotlib.figure import Figure

    from ssdtwin.sweep import plots

    doc = {**sweep_doc({"namespace_tb": [3.2, 3.84]}), "plot": [{"x": "namespace_tb", "y": "iops"}]}
    sweep = config.from_dict(doc)
    rows = [{"status": "ok", "namespace_tb": tb, "iops": 1000.0 * tb} for tb in (3.2, 3.84)]
    folder = tmp_path / "plots"
    [path] = plots.draw(sweep, rows, folder)
    assert path == folder / "iops-vs-namespace_tb.png" and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    before = path.read_bytes()

    def cut_short(self: Figure, fname: Any, *args: Any, **kwargs: Any) -> None:
        Path(fname).write_bytes(b"\x89PNG\r\n\x1a\n partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(Figure, "savefig", cut_short)
    with pytest.raises(KeyboardInterrupt):
        plots.draw(sweep, [{**r, "iops": 2 * r["iops"]} for r in rows], folder)
    assert path.read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) == [path.name]


class PanicException(BaseException):
    """What pyo3 raises for a Rust panic (pyo3_runtime.PanicException: a BaseException)."""


def test_a_panic_of_the_core_is_the_points_failure_and_ctrl_c_still_stops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A panic in one point stopped a sweep run in process with a traceback (on a Ray worker
    it was a failed row whose error was Ray's traceback): it is that point's failure, in
    one line, and the other points run. A Ctrl-C in a point still stops the sweep."""
    from ssdtwin.sweep import point
    from ssdtwin.sweep.runner import InProcess, run_sweep

    real = point._run

    def panics_at_3_2(p: config.Point, cache: Path) -> dict[str, Any]:
        if p.params["namespace_tb"] == 3.2:
            raise PanicException("called `Option::unwrap()` on a `None` value")
        return real(p, cache)

    monkeypatch.setattr(point, "_run", panics_at_3_2)
    doc = sweep_doc({"namespace_tb": [3.84, 3.2, 3.0]})
    doc["point"].update(scale="1/454", precondition="none", vars={"RUNTIME": "20ms", "RAMP": "0s"})
    res = run_sweep(config.from_dict(doc), tmp_path / "out", InProcess)
    assert [r["status"] for r in res.rows] == ["ok", "failed", "ok"]
    assert res.rows[1]["error"] == "the core panicked (a bug of ssdtwin, please report it): called `Option::unwrap()` on a `None` value"

    def build_panics(p: config.Point, cache: Path) -> dict[str, Any]:
        raise PanicException("index out of bounds")

    monkeypatch.setattr(point, "ensure_image", build_panics)  # the task that builds an image on Ray
    first = config.from_dict(doc).points[0]
    assert point.prepare(first, str(tmp_path)) == "the core panicked (a bug of ssdtwin, please report it): index out of bounds"

    def ctrl_c(p: config.Point, cache: Path) -> dict[str, Any]:
        raise KeyboardInterrupt

    monkeypatch.setattr(point, "_run", ctrl_c)
    monkeypatch.setattr(point, "ensure_image", ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        point.run_point(first, str(tmp_path))
    with pytest.raises(KeyboardInterrupt):
        point.prepare(first, str(tmp_path))


# A sweep on a local Ray whose task for one point kills its worker (a worker out of memory,
# a segfault) and for another raises past the point's own error handling. The task function is
# defined in __main__, so Ray ships it to the workers by value.
RAY_FAULTS = """\
import os, sys
from ssdtwin.sweep import runner
from ssdtwin.sweep.point import run_point


class Crash(BaseException):
    pass


def _run_after(point, cache, prep_error):
    tb = point.params["namespace_tb"]
    if tb == 3.2:
        os._exit(3)
    if tb == 3.0:
        raise Crash("in the worker")
    return run_point(point, cache)


runner._run_after = _run_after
from ssdtwin.commands.entry import main

sys.argv[0] = "ssdtwin"
main()
"""


def test_a_ray_worker_that_fails_is_its_points_one_line_and_json_stays_pure(tmp_path: Path) -> None:
    """Ray's driver printed its raylet's reports of a dead worker ("(raylet) A worker died
    or was killed ...", "Task _run_after failed. There are 2 retries remaining ...") on
    stdout, inside `-o json`; and a task that raised had as its error Ray's traceback of the
    worker (``ray::_run_after() (pid=..., ip=...) File ...``, in terminal colours)."""
    doc = sweep_doc({"namespace_tb": [3.84, 3.2, 3.0]})
    doc["point"].update(scale="1/454", precondition="none", vars={"RUNTIME": "20ms", "RAMP": "0s"})
    import tomlkit

    (tmp_path / "sweep.toml").write_text(tomlkit.dumps(doc))
    (tmp_path / "faults.py").write_text(RAY_FAULTS)
    args = ["sweep", str(tmp_path / "sweep.toml"), "--out", str(tmp_path / "out"), "--num-cpus", "1", "-o", "json"]
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    p = subprocess.run([sys.executable, str(tmp_path / "faults.py"), *args], capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)  # nothing but the JSON
    errors = {f["params"]["namespace_tb"]: f["error"] for f in summary["failed"]}
    assert errors == {
        3.2: "Ray task failed: The worker died unexpectedly while executing this task. "
        "Check python-core-worker-*.log files for more information.",
        3.0: "Ray task failed: Crash: in the worker",
    }, errors
    assert "Traceback" not in p.stderr and "A worker died" in p.stderr  # Ray's report, on stderr
    df = read(tmp_path / "out").to_pandas().set_index("namespace_tb")
    assert df.status.to_dict() == {3.84: "ok", 3.2: "failed", 3.0: "failed"} and df.error[3.0] == errors[3.0]


@pytest.mark.parametrize("cmd", ["sweep", "advise"])
def test_a_second_ctrl_c_does_not_cut_the_clean_up_short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cmd: str) -> None:
    """An impatient second Ctrl-C while Ray shut down (a second or two) left a sweep without
    its table, and advise's temporary folder (its images: gigabytes at 1/64) behind. Ray is
    replaced by an executor that runs one point, is stopped by Ctrl-C, and is sent a second
    one while it closes."""
    import tempfile

    from ssdtwin.sweep import runner

    closed: list[bool] = []

    class RayLike(runner.Executor):
        where = "a Ray stand-in"

        def __init__(self, **kwargs: Any) -> None:
            pass

        def run(self, points: Any, cache: Path, finished: Any) -> None:
            finished(points[0], runner.run_point(points[0], str(cache)))
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(30)  # the handler runs here
            raise AssertionError("Ctrl-C did not stop the sweep")

        def close(self) -> None:
            os.kill(os.getpid(), signal.SIGINT)  # the second, while Ray shuts down
            time.sleep(0.2)
            closed.append(True)

    monkeypatch.setattr(runner, "RayExecutor", RayLike)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    out = tmp_path / "out"
    if cmd == "sweep":
        (tmp_path / "sweep.toml").write_text(TINY.replace('job = ["cm6-rand-write", "cm6-rand-read"]', 'job = ["cm6-rand-write"]'))
        r = run_cli("sweep", tmp_path / "sweep.toml", "--out", out, check=False)
        line = f"ssdtwin sweep: interrupted; 1 of 3 points done and kept in {out}; --resume continues"
    else:
        (tmp_path / "w.fio").write_text("[w]\nrw=randwrite\nbs=4k\n")
        args = ("--target-iops", "1k", "--drives", CM6, "--extra-op", "0,0.2", "--scale", "1/454", "--runtime", "20ms", "--ramp", "0s")
        r = run_cli("advise", tmp_path / "w.fio", *args, "--precondition", "none", check=False)
        line = "ssdtwin advise: interrupted; nothing kept"
    assert (r.returncode, r.stderr_lines[-1]) == (130, line), r.stderr
    assert closed == [True]
    if cmd == "sweep":
        assert len(read(out)) == 1  # the table of the point done
    assert list((tmp_path / "tmp").iterdir()) == []  # advise's temporary folder is gone


def test_a_plot_against_a_variable_is_in_the_order_of_its_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A variable's values are strings ("16"): a queue-depth sweep was drawn with its x in the
    strings' order (1, 16, 2, 32, 4, 8), a zigzag. Numbers are drawn as numbers, other strings
    in the order the file wrote them."""
    from matplotlib.axes import Axes

    from ssdtwin.sweep import plots

    (tmp_path / "qd.fio").write_text("[j]\nrw=randread\niodepth=${QD}\nruntime=${T}\ntime_based\n")
    doc = {
        "point": {"preset": CM6, "job": "qd.fio"},
        "grid": {"vars": {"QD": [1, 2, 4, 8, 16, 32], "T": ["2s", "10s", "1s"]}},
        "plot": [{"x": "var_QD", "y": "iops"}, {"x": "var_T", "y": "iops"}],
    }
    sweep = config.from_dict(doc, base=tmp_path)
    rows = [{"status": "ok", **{f"var_{n}": v for n, v in p.params["vars"].items()}, "iops": 1.0} for p in sweep.points]
    drawn: list[list[float]] = []
    ticks: list[list[str]] = []
    real_plot, real_ticks = Axes.plot, Axes.set_xticks

    def plot(self: Axes, xs: list[float], *args: Any, **kwargs: Any) -> Any:
        drawn.append(list(xs))
        return real_plot(self, xs, *args, **kwargs)

    def set_xticks(self: Axes, where: Any, labels: Any = None, **kwargs: Any) -> Any:
        ticks.append(list(labels or []))
        return real_ticks(self, where, labels, **kwargs)

    monkeypatch.setattr(Axes, "plot", plot)
    monkeypatch.setattr(Axes, "set_xticks", set_xticks)
    plots.draw(sweep, rows, tmp_path / "plots")
    assert drawn[:3] == [[1.0, 2.0, 4.0, 8.0, 16.0, 32.0]] * 3  # a line per runtime
    assert drawn[3:] == [[0.0, 1.0, 2.0]] * 6 and ticks == [["2s", "10s", "1s"]]  # a line per queue depth


def test_a_title_or_value_with_dollars_is_drawn_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """matplotlib reads text between two $ as TeX: a title with an unknown command stopped the
    sweep, once every point had run, with a ValueError traceback (and "$5 to $6" was drawn as
    math). The titles, legends and category labels are the file's text as written."""
    from matplotlib.axes import Axes

    from ssdtwin.sweep import plots

    (tmp_path / "j$x$.fio").write_text("[j]\nrw=randread\nruntime=1s\n")
    doc = {
        "title": r"$\foo$ at $5 to $6",
        "point": {"preset": CM6},
        "grid": {"job": ["j$x$.fio", "cm6-rand-read"], "namespace_tb": [3.2, 3.84]},
        "plot": [{"x": "namespace_tb", "y": "iops"}, {"x": "job", "y": "iops", "title": r"$\bar$"}],
    }
    sweep = config.from_dict({**doc, "point": {**doc["point"], "vars": {"RUNTIME": "1s", "RAMP": "0s"}}}, base=tmp_path)
    rows = [{"status": "ok", "job": p.params["job"], "namespace_tb": p.params["namespace_tb"], "iops": 1.0} for p in sweep.points]
    shown: list[str] = []
    real_title, real_plot, real_ticks = Axes.set_title, Axes.plot, Axes.set_xticks

    def set_title(self: Axes, label: str, *args: Any, **kwargs: Any) -> Any:
        shown.append(label)
        return real_title(self, label, *args, **kwargs)

    def plot(self: Axes, *args: Any, **kwargs: Any) -> Any:
        shown.append(kwargs.get("label") or "")
        return real_plot(self, *args, **kwargs)

    def set_xticks(self: Axes, where: Any, labels: Any = None, **kwargs: Any) -> Any:
        shown.extend(labels or [])
        return real_ticks(self, where, labels, **kwargs)

    monkeypatch.setattr(Axes, "set_title", set_title)
    monkeypatch.setattr(Axes, "plot", plot)
    monkeypatch.setattr(Axes, "set_xticks", set_xticks)
    paths = plots.draw(sweep, rows, tmp_path / "plots")  # the drawing: a ValueError of mathtext
    assert [p.name for p in paths] == ["iops-vs-namespace_tb.png", "iops-vs-job.png"]
    assert r"iops vs namespace_tb (\$\foo\$ at \$5 to \$6)" in shown and r"\$\bar\$" in shown
    assert r"job=j\$x\$.fio" in shown and r"j\$x\$.fio" in shown  # the legend, the category


def test_ray_waits_on_a_bounded_window_so_a_large_sweeps_overhead_is_linear() -> None:
    """ray.wait over every task not yet finished, once per finished task, was quadratic in
    the number of points (20,000 trivial tasks: 43.2 s, against 11.9 s in a bounded window;
    docs/performance.md). Ray is replaced by a stand-in whose tasks end at once: the tasks
    in flight stay within the window, and the refs ray.wait is given add up to a linear
    count; each point ends once."""
    from types import SimpleNamespace

    from ssdtwin.sweep import runner

    n = 2000
    flight: set[int] = set()
    most = [0]
    waited: list[int] = []

    class Ref:  # hashable by identity, as Ray's refs are by id
        def __init__(self, point: Any) -> None:
            self.point = point

    class Task:
        def __init__(self, is_point: bool) -> None:
            self.is_point = is_point

        def options(self, **kwargs: Any) -> Task:
            return self

        def remote(self, *args: Any) -> Any:
            ref = Ref(args[0])
            if self.is_point:
                flight.add(id(ref))
                most[0] = max(most[0], len(flight))
            return ref

    class FakeRay:
        def remote(self, fn: Any) -> Task:
            return Task(fn is runner._run_after)

        def wait(self, refs: list[Any], num_returns: int, timeout: float) -> tuple[list[Any], list[Any]]:
            waited.append(len(refs))
            return refs[:num_returns], refs[num_returns:]

        def get(self, ref: Any) -> dict[str, Any]:
            flight.discard(id(ref))
            return {"row": {"status": "ok", "point_id": ref.point.point_id}, "wall_s": 0.0}

        def cancel(self, ref: Any, force: bool) -> None:
            pass

    ex = object.__new__(runner.RayExecutor)
    ex.ray, ex.cpus = FakeRay(), 2
    points = [SimpleNamespace(image_key=f"k{i % 3}", point_id=f"p{i}") for i in range(n)]
    ended: list[str] = []
    ex.run(points, Path("/nonexistent"), lambda p, res: ended.append(res["row"]["point_id"]))  # type: ignore[arg-type]
    assert sorted(ended) == sorted(p.point_id for p in points)
    window = runner.in_flight_window(2)
    assert most[0] <= window < n
    assert len(waited) <= 2 * n and sum(waited) <= 2 * window * n, (len(waited), sum(waited))


def test_a_resume_with_every_point_done_says_so_and_where_the_table_is(tiny_in_process: Path, tmp_path: Path) -> None:
    """A --resume of a finished sweep said "4 points (4 done before) on nothing to run" and
    "0.0 s wall on nothing to run"."""
    out = tmp_path / "out"
    shutil.copytree(tiny_in_process, out)
    toml = tmp_path / "sweep.toml"
    toml.write_text(TINY.replace("[3.84, 3.2, 5.0]", "[3.84, 3.2]"))  # the four points done (5.0 TB failed)
    r = run_cli("sweep", toml, "--out", out, "--in-process", "--resume")
    assert "on nothing to run" not in r.stdout + r.stderr, (r.stdout, r.stderr)
    line = f"ssdtwin sweep: all 4 points were done before (kept in {out / 'points'}); nothing to run; the table: {out / 'results.parquet'}"
    assert line in r.stderr_lines, r.stderr
    assert "4 points: 0 run, 4 kept from before, 0 failed; every point was done before, nothing run" in r.stdout, r.stdout
    assert f"results: {out / 'results.parquet'} (4 rows)" in r.stdout, r.stdout
    assert len(read(out)) == 4


@pytest.mark.parametrize(
    "how, why",
    [
        ("version", "made by ssdtwin 0.0.9"),
        ("core_build", "made by another build of ssdtwin "),
        ("preset_digest", f"made from another definition of preset {CM6}"),
        ("unrecorded", "made before rows recorded the core build and the preset's parameters"),
    ],
    ids=["version", "core_build", "preset_digest", "unrecorded"],
)
def test_resume_runs_again_the_rows_another_build_or_preset_made(tiny_in_process: Path, tmp_path: Path, how: str, why: str) -> None:
    """--resume kept any row its version matched (another version's was refused), while the
    images beside it were checked against the core's build and the preset's values too: a
    row of another build or preset definition went into the table as this one's. A row now
    carries the image cache's identity; --resume runs the rows whose identity differs again,
    with one note saying how many and why, and keeps the others."""
    from ssdtwin import _core
    from ssdtwin.sweep.point import core_build

    out = tmp_path / "out"
    shutil.copytree(tiny_in_process, out)
    oks = sorted(p for p in (out / "points").glob("*.json") if json.loads(p.read_text())["row"]["status"] == "ok")
    assert len(oks) == 4
    for f in oks[:3]:
        rec = json.loads(f.read_text())
        _damage_row(rec["row"], how)
        f.write_text(json.dumps(rec))
    toml = tmp_path / "sweep.toml"
    toml.write_text(TINY)
    r = run_cli("sweep", toml, "--out", out, "--in-process", "--resume", "-o", "json")
    notes = [line for line in r.stderr_lines if "--resume:" in line]
    head = f"ssdtwin sweep: note: --resume: 3 of the 4 points kept run again, their rows {why}"
    assert len(notes) == 1 and notes[0].startswith(head), r.stderr
    assert notes[0].endswith(f"(this is ssdtwin {_core.__version__}, core {core_build()})"), notes
    assert (r.json()["run"], r.json()["resumed"]) == (5, 1), r.stdout  # 3 stale and 2 failed run again; 1 kept
    rows = read(out).to_pandas()
    reference = read(tiny_in_process).to_pandas()
    assert rows["iops"].fillna(-1).tolist() == reference["iops"].fillna(-1).tolist()
    assert set(rows["core_build"]) == {core_build()} and rows["preset_digest"].notna().all()
    # Resumed again: every row is current, nothing is run again for its identity.
    r = run_cli("sweep", toml, "--out", out, "--in-process", "--resume")
    assert not [line for line in r.stderr_lines if "--resume:" in line], r.stderr


def _damage_row(row: dict[str, Any], how: str) -> None:
    if how == "version":
        row["ssdtwin_version"] = "0.0.9"
    elif how in ("core_build", "preset_digest"):
        row[how] = "0123456789abcdef"
    else:  # a row from before rows recorded the build and the preset
        row.pop("core_build", None), row.pop("preset_digest", None)


ONE_READ = (
    TINY.split("[[plot]]")[0].replace("[3.84, 3.2, 5.0]", "[3.2]").replace('["cm6-rand-write", "cm6-rand-read"]', '["cm6-rand-read"]')
)


def _damage(meta: Path, how: str) -> None:
    rec = json.loads(meta.read_text())
    if how == "version":
        rec["ssdtwin_version"] = "0.0.9"
    elif how in ("core_build", "preset_digest"):
        rec[how] = "0123456789abcdef"
    elif how == "unrecorded":  # made before the cache recorded the build and the preset
        del rec["core_build"], rec["preset_digest"]
    elif how == "truncated":
        meta.write_text(meta.read_text()[:40])
        return
    elif how == "no-image":
        shutil.rmtree(meta.with_suffix(""))
        return
    meta.write_text(json.dumps(rec))


@pytest.mark.parametrize(
    "how, why",
    [
        ("version", "made by ssdtwin 0.0.9, this is ssdtwin "),
        ("core_build", "made by another build of ssdtwin "),
        ("preset_digest", f"made from another definition of preset {CM6} (its parameter values have changed since)"),
        ("unrecorded", "made before cached images recorded the core build and the preset's parameters"),
        ("truncated", "its record "),
        ("no-image", "its image "),
    ],
    ids=["version", "core_build", "preset_digest", "unrecorded", "truncated", "no-image"],
)
def test_a_cached_image_another_build_or_preset_made_is_rebuilt_with_a_note(
    tiny_in_process: Path, tmp_path: Path, how: str, why: str
) -> None:
    """advise --cache (and a sweep's cache) took any image under the point's key for current:
    one made by another ssdtwin version or build, or from another definition of the preset,
    was served as this one's. Such an image (or one whose record is cut short or whose image
    is gone) is said stale in one line and built again; the row is the one a fresh image gives."""
    from ssdtwin.sweep import runner
    from ssdtwin.sweep.point import image_identity

    (tmp_path / "one.toml").write_text(ONE_READ)
    sweep = config.load(tmp_path / "one.toml")
    (p,) = sweep.points
    cache = tmp_path / "cache"
    shutil.copytree(tiny_in_process / "cache", cache)
    meta = cache / "images" / f"{p.image_key}.json"
    reference = json.loads(meta.read_text())
    _damage(meta, how)
    notes: list[str] = []
    res = runner.run_sweep(sweep, tmp_path / "out", runner.InProcess, cache=cache, on_note=notes.append)
    assert len(notes) == 1 and notes[0].startswith(f"cached image {p.image_key} ({CM6} at 1/454) is stale: {why}"), notes
    assert notes[0].endswith("; building it again"), notes
    rebuilt = json.loads(meta.read_text())
    assert {k: rebuilt[k] for k in image_identity(p)} == image_identity(p)
    assert rebuilt["steady_waf"] == reference["steady_waf"] and rebuilt["data_pool_bytes"] == reference["data_pool_bytes"]
    (row,) = res.rows
    kept = {r["row"]["point_id"]: r["row"] for r in map(json.loads, map(Path.read_text, (tiny_in_process / "points").glob("*.json")))}
    assert row["status"] == "ok" and row["iops"] == kept[p.point_id]["iops"], (row, kept[p.point_id])
    check_image(meta.with_suffix(""))
    # A current image is used as it is: no note, not built again.
    notes.clear()
    stamp = meta.stat().st_mtime_ns
    runner.run_sweep(sweep, tmp_path / "again", runner.InProcess, cache=cache, on_note=notes.append)
    assert notes == [] and meta.stat().st_mtime_ns == stamp
