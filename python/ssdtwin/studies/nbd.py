"""`ssdtwin bench nbd`: the real fio (nbd engine) against ``ssdtwin serve --pace off``,
``nbdkit memory`` and ``nbdkit file`` (a sparse file on the same disk as the image) on the
same machine, in one run (docs/performance.md)."""

from __future__ import annotations

import contextlib
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
from typing import Any, Callable

from .. import _core
from ..drive import Drive


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 60) -> None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with status {proc.returncode} before listening")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout:.0f} s")


@contextlib.contextmanager
def _process(argv: list[str], port: int, what: str) -> Iterator[subprocess.Popen[bytes]]:
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_port(port, p, what)
        yield p
    finally:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _stop_fio(p: subprocess.Popen[bytes], grace_s: float = 30) -> None:
    """SIGTERM, on which fio ends its jobs and waits for them; SIGKILL if it has not ended."""
    if p.poll() is not None:
        return
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def fio_nbd(uri: str, rw: str, bs: str, size: str, jobs: int, iodepth: int, seconds: float, out: Path) -> dict[str, Any]:
    """Run the real fio's nbd engine; returns fio's JSON."""
    argv = [
        "fio",
        "--name=bench",
        "--ioengine=nbd",
        f"--uri={uri}",
        f"--rw={rw}",
        f"--bs={bs}",
        f"--size={size}",
        f"--numjobs={jobs}",
        f"--iodepth={iodepth}",
        "--group_reporting",
        "--output-format=json",
        f"--output={out}",
    ]
    if seconds > 0:
        # In milliseconds: fio reads a fractional "--runtime=0.3" as 30 ms ("1.0" as 1 s).
        argv += ["--time_based", f"--runtime={max(1, round(seconds * 1000))}ms"]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, stderr = p.communicate(timeout=seconds + 600)
    except BaseException:
        # Ctrl-C, SIGTERM, a run that never ends: fio is told to stop its jobs, which run in
        # sessions of their own. A SIGKILL to fio alone (subprocess.run's) left them blocked on
        # the NBD server for good.
        _stop_fio(p)
        raise
    if p.returncode:
        raise subprocess.CalledProcessError(p.returncode, argv, None, stderr)
    try:
        result: dict[str, Any] = json.loads(out.read_text())
    except (OSError, ValueError) as e:
        said = stderr.decode(errors="replace").strip().splitlines()
        raise RuntimeError(f"fio ({rw} on {uri}) left no JSON result in {out.name}" + (f": {said[-1]}" if said else f" ({e})")) from None
    return result


# The drive `bench_nbd` serves: a CM6-R at 1/454 (an 8.46 GB namespace).
BENCH_MODEL, BENCH_SCALE = "kioxia-cm6-r-3.84t", 454
PREFILL_BLOCK_BYTES = 1 << 20


def nbd_size_range(model: str = BENCH_MODEL, scale: int = BENCH_SCALE) -> tuple[int, int]:
    """The region sizes fio can work on: the prefill's block up to the namespace."""
    d = Drive.in_memory(model, scale=scale)
    try:
        return PREFILL_BLOCK_BYTES, d.namespaces()[0].bytes
    finally:
        d.close()


def bench_nbd(
    seconds: float = 10,
    jobs: int = 4,
    iodepth: int = 32,
    size: str = "1g",
    model: str = BENCH_MODEL,
    scale: int = BENCH_SCALE,
    rounds: int = 1,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """4 KiB random read and write IOPS from the real fio (nbd engine) against
    ``ssdtwin serve --pace off``, ``nbdkit memory`` and ``nbdkit file`` (a sparse file of
    the namespace's size next to the image, so on the same disk), on the same machine in
    one run. Every server gets the same prefill (1 MiB writes over the region)."""
    for tool in ("fio", "nbdkit"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} is not installed; ssdtwin bench nbd runs the real fio against nbdkit memory and nbdkit file")
    res: dict[str, Any] = {
        "seconds": seconds,
        "jobs": jobs,
        "iodepth": iodepth,
        "size": size,
        "model": model,
        "scale": f"1/{scale}",
        "cpus": os.cpu_count(),
        "rounds": [],
    }
    # fio reads sizes its own way ("1GB" is 2^30 bytes, "1GiB" 10^9, kb_base=1024): it gets
    # the bytes ssdtwin read (docs/cli.md, "Sizes"), the amount --size was checked as.
    size = str(_core.parse_size(size))
    with tempfile.TemporaryDirectory(prefix="ssdtwin-bench-nbd-") as tmp:
        img = Path(tmp) / "img"
        d = Drive.create(img, model, scale=scale, seed=1)
        ns_bytes = d.namespaces()[0].bytes
        d.close()
        flat = Path(tmp) / "flat.img"
        with flat.open("wb") as f:
            f.truncate(ns_bytes)
        p1, p2, p3 = _free_port(), _free_port(), _free_port()
        serve = [sys.executable, "-m", "ssdtwin", "serve", str(img), "--listen", f"127.0.0.1:{p1}", "--pace", "off"]
        nbdkit = ["nbdkit", "-f", "-i", "127.0.0.1", "-p", str(p2), "memory", str(ns_bytes)]
        nbdkit_file = ["nbdkit", "-f", "-i", "127.0.0.1", "-p", str(p3), "file", str(flat)]
        targets = {
            "ssdtwin": f"nbd://127.0.0.1:{p1}/ns1",
            "nbdkit-memory": f"nbd://127.0.0.1:{p2}/",
            "nbdkit-file": f"nbd://127.0.0.1:{p3}/",
        }
        with contextlib.ExitStack() as servers:
            servers.enter_context(_process(serve, p1, "ssdtwin serve"))
            servers.enter_context(_process(nbdkit, p2, "nbdkit memory"))
            servers.enter_context(_process(nbdkit_file, p3, "nbdkit file"))
            for name, uri in targets.items():
                # Prefill the region so reads read data, not holes.
                fio_nbd(uri, "write", str(PREFILL_BLOCK_BYTES), size, 1, 8, 0, Path(tmp) / f"fill-{name}.json")
            for r in range(rounds):
                row: dict[str, Any] = {}
                for rw in ("randread", "randwrite"):
                    for name, uri in targets.items():
                        j = fio_nbd(uri, rw, "4k", size, jobs, iodepth, seconds, Path(tmp) / f"{name}-{rw}-{r}.json")
                        d_ = "read" if rw == "randread" else "write"
                        st = j["jobs"][0][d_]
                        row[f"{name}_{rw}_iops"] = st["iops"]
                        row[f"{name}_{rw}_lat_us"] = st["lat_ns"]["mean"] / 1000
                        row[f"{name}_{rw}_runtime_ms"] = st["runtime"]  # fio's own, to check the run's length
                        log(
                            f"round {r + 1}: {name:<14} {rw:<9} {st['iops']:>10,.0f} IOPS  "
                            f"mean latency {st['lat_ns']['mean'] / 1000:7.1f} us"
                        )
                res["rounds"].append(row)
    for rw in ("randread", "randwrite"):
        for name in targets:
            iops = [row[f"{name}_{rw}_iops"] for row in res["rounds"]]
            res[f"{name.replace('-', '_')}_{rw}_iops"] = sum(iops) / len(iops)
        ours = res[f"ssdtwin_{rw}_iops"]
        mem, flat_ = res[f"nbdkit_memory_{rw}_iops"], res[f"nbdkit_file_{rw}_iops"]
        log(
            f"{rw:<9}: ssdtwin {ours:,.0f} IOPS, nbdkit memory {mem:,.0f} IOPS (ratio {ours / mem:.2f}), "
            f"nbdkit file {flat_:,.0f} IOPS (ratio {ours / flat_:.2f})"
        )
    return res
