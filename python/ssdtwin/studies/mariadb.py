"""The doublewrite study with a real database: MariaDB (Debian's mariadb-server) and sysbench
on ext4 file systems on namespaces of a served twin (``ssdtwin serve``, mounted with nbdfuse
and fuse2fs), for each doublewrite placement, with the NAND write amplification read from the
vendor log (docs/models.md, "The doublewrite study with a real MariaDB").

MariaDB keeps its doublewrite buffer in the system tablespace (``ibdata1``: two extents of
64 pages, 2 MiB), so ``innodb_data_home_dir`` moves it: in the datadir's file system
(``shared``), or on a file system of its own on a second namespace: a NAND namespace
(``nand``, a control) or the DRAM namespace (``dram``). Undo logs go to undo tablespaces in
the datadir (``innodb_undo_tablespaces``) so that the system tablespace holds little else.

Every process the study starts (the server, nbdfuse with nbdkit, fuse2fs, mariadbd,
sysbench) is its child and is stopped on the way out, failure or not; the images stay in
the work directory and each gets the full FTL check.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from .. import waf as wafm
from ..core_types import VendorLog
from ..drive import Drive
from ..live import live_state
from .doublewrite import MODEL, carve

TOOLS = (
    "mariadbd",
    "mariadb-install-db",
    "mariadb",
    "mariadb-admin",
    "sysbench",
    "nbdfuse",
    "nbdkit",
    "fuse2fs",
    "fusermount3",
    "mkfs.ext4",
)
PLACEMENTS = ("shared", "nand", "dram")
STATUS = ("Innodb_data_written", "Innodb_dblwr_pages_written", "Innodb_pages_written", "Innodb_os_log_written", "Innodb_data_fsyncs")


class StackError(RuntimeError):
    """A step of the stack failed: the message names the step and carries its output."""


def missing() -> Optional[str]:
    """Why the study cannot run here (a tool or FUSE missing), or None."""
    for t in TOOLS:
        if shutil.which(t) is None:
            return f"`{t}` is not installed (apt-get install mariadb-server sysbench nbdkit libnbd-bin fuse3 fuse2fs e2fsprogs)"
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist (no FUSE in this kernel or container)"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not accessible to this user"
    return None


@dataclass
class Config:
    scale: int = 256
    seed: int = 1
    threads: int = 16
    tables: int = 4
    table_size: int = 100_000
    run_s: int = 60
    buffer_pool: str = "32M"
    pace: str = "model"
    fill: bool = False  # True: the data namespace written in full first (GC from the start; see docs/models.md §10.5)


def _run(argv: list[str], what: str, timeout: float = 600) -> str:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-5:]
        raise StackError(f"{what}: `{' '.join(argv)}` exited {p.returncode}: {' / '.join(tail)}")
    return str(p.stdout)


def _wait(cond: Callable[[], bool], what: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> None:
    t0 = time.monotonic()
    while not cond():
        if proc.poll() is not None:
            err = log.read_text(errors="replace").strip()[-500:]
            raise StackError(f"{what}: exited {proc.returncode} before it was ready ({log}): {err}")
        if time.monotonic() - t0 > timeout:
            raise StackError(f"{what}: not ready within {timeout:.0f} s")
        time.sleep(0.05)


def _stop(p: subprocess.Popen[bytes], sig: int = signal.SIGTERM, timeout: float = 60) -> None:
    if p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _unmount(mnt: Path) -> None:
    """fusermount3 -u, retried while busy (the FUSE server above may still be letting go)."""
    for _ in range(200):
        if not os.path.ismount(mnt):
            return
        if subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True).returncode == 0:
            return
        time.sleep(0.1)
    subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)


@contextlib.contextmanager
def _child(
    argv: list[str], log: Path, ready: Callable[[], bool], what: str, stop: Callable[[subprocess.Popen[bytes]], None]
) -> Iterator[None]:
    """A child process whose stderr goes to `log` (a pipe nobody reads would fill and stop it)."""
    with open(log, "wb") as err:
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err)
    try:
        _wait(ready, what, p, log)
        yield
    finally:
        stop(p)


@contextlib.contextmanager
def served(image: Path, sock: Path, pace: str) -> Iterator[None]:
    """`ssdtwin serve` on a unix socket; its summary is in serve.log next to the socket."""
    argv = [sys.executable, "-m", "ssdtwin", "serve", str(image), "--unix", str(sock), "--pace", pace]
    with _child(argv, sock.parent / "serve.log", sock.exists, "ssdtwin serve", _stop):
        yield


@contextlib.contextmanager
def mounted(sock: Path, export: str, base: Path, mkfs_args: tuple[str, ...]) -> Iterator[Path]:
    """nbdfuse (through nbdkit's blocksize filter) and fuse2fs: an ext4 file system on one
    namespace. The filter turns the sub-sector writes e2fsprogs makes to its superblock
    (it rewrites only the bytes that changed) into read-modify-writes of whole 512 B
    sectors; without it libnbd refuses them and every fsync on the file system fails."""
    disk_dir, fs = base / f"{export}-disk", base / f"{export}-fs"
    disk_dir.mkdir(parents=True, exist_ok=True)
    fs.mkdir(exist_ok=True)
    disk = disk_dir / "disk"
    nbd = ["nbdkit", "-s", "--exit-with-parent", "--filter=blocksize", "nbd", f"socket={sock}", f"export={export}"]
    nbdfuse = ["nbdfuse", str(disk), "--command", *nbd, "minblock=512", "maxdata=32M"]

    def unmount_and_stop(mnt: Path) -> Callable[[subprocess.Popen[bytes]], None]:
        def stop(p: subprocess.Popen[bytes]) -> None:
            _unmount(mnt)
            _stop(p)

        return stop

    with _child(nbdfuse, base / f"nbdfuse-{export}.log", disk.exists, f"nbdfuse {export}", unmount_and_stop(disk_dir)):
        _run(["mkfs.ext4", "-q", "-F", *mkfs_args, str(disk)], f"mkfs.ext4 on {export}")
        fuse2fs = ["fuse2fs", str(disk), str(fs), "-f"]
        with _child(fuse2fs, base / f"fuse2fs-{export}.log", lambda: os.path.ismount(fs), f"fuse2fs {export}", unmount_and_stop(fs)):
            yield fs


def my_cnf(work: Path, datadir: Path, sysdir: Path, cfg: Config) -> Path:
    """The server's configuration: the talk's durability settings, a buffer pool much
    smaller than the tables (I/O bound), and the system tablespace in `sysdir`."""
    text = f"""[mysqld]
user=root
datadir={datadir}
socket={work / "mysqld.sock"}
pid-file={work / "mysqld.pid"}
log-error={work / "mysqld.err"}
skip-networking
innodb_data_home_dir={sysdir}
innodb_data_file_path=ibdata1:12M:autoextend
innodb_undo_tablespaces=3
innodb_undo_directory={datadir}
innodb_log_group_home_dir={datadir}
innodb_log_file_size=96M
innodb_buffer_pool_size={cfg.buffer_pool}
innodb_flush_method=O_DIRECT
innodb_flush_log_at_trx_commit=1
innodb_doublewrite=ON
innodb_file_per_table=ON
"""
    path = work / "my.cnf"
    path.write_text(text)
    return path


def _status(sock: Path) -> dict[str, int]:
    names = ",".join(f"'{n}'" for n in STATUS)
    out = _run(["mariadb", "-S", str(sock), "-uroot", "-N", "-e", f"show global status where variable_name in ({names})"], "mariadb status")
    return {k: int(v) for k, v in (line.split("\t") for line in out.strip().splitlines())}


@contextlib.contextmanager
def database(cnf: Path, work: Path) -> Iterator[Path]:
    sock = work / "mysqld.sock"
    install = ["mariadb-install-db", f"--defaults-file={cnf}", "--auth-root-authentication-method=normal", "--skip-test-db"]
    _run(install, "mariadb-install-db")

    def up() -> bool:
        ping = ["mariadb", "-S", str(sock), "-uroot", "-e", "select 1"]
        return sock.exists() and subprocess.run(ping, capture_output=True).returncode == 0

    def down(p: subprocess.Popen[bytes]) -> None:
        subprocess.run(["mariadb-admin", "-S", str(sock), "-uroot", "shutdown"], capture_output=True, timeout=300)
        _stop(p, timeout=300)

    with _child(["mariadbd", f"--defaults-file={cnf}"], work / "mariadbd.log", up, "mariadbd", down):
        yield sock


def sysbench(sock: Path, cfg: Config, verb: str, extra: tuple[str, ...] = ()) -> str:
    argv = [
        "sysbench",
        "oltp_write_only",
        f"--mysql-socket={sock}",
        "--mysql-user=root",
        f"--tables={cfg.tables}",
        f"--table-size={cfg.table_size}",
        f"--threads={cfg.threads}",
        *extra,
        verb,
    ]
    return _run(argv, f"sysbench {verb}", timeout=3600)


def _tps(out: str) -> float:
    for line in out.splitlines():
        if line.strip().startswith("transactions:"):
            return float(line.split("(")[1].split()[0])
    raise StackError(f"sysbench run printed no transactions line: {out[-300:]}")


def prepare_image(image: Path, placement: str, cfg: Config) -> int:
    """The drive of one placement: namespaces (nvme-cli sequence), and, with `fill`, the data
    namespace written sequentially then randomly in fast-forward so that GC is in its steady
    state when the database starts (the file system is then made without discarding).
    Returns how many namespaces are attached."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement '{placement}': choose {', '.join(PLACEMENTS)}")
    d = Drive.create(image, MODEL, scale=cfg.scale, seed=cfg.seed)
    try:
        carve(d, None if placement == "shared" else placement)
        if cfg.fill:
            d.precondition(1, "seq", 131072, loops=1, seed=cfg.seed)
            d.precondition(1, "rand", 16384, loops=1, seed=cfg.seed + 1)
        d.commit()
        return len([n for n in d.namespaces() if n.attached])
    finally:
        d.close()


def _vendor(image: Path, after: float) -> VendorLog:
    st = live_state(image, newer_than=after, wait_s=5.0)
    if st is None:
        raise StackError(f"{image}: no fresh live.json from the server")
    return st.view.vendor_log()


def run_placement(work: Path, placement: str, cfg: Config, log: Callable[[str], None] = print) -> dict[str, Any]:
    """One placement end to end; the image stays in `work/placement/img`, checked."""
    base = work / placement
    if base.exists():
        shutil.rmtree(base)
    base.mkdir(parents=True)
    image = base / "img"
    t0 = time.perf_counter()
    nns = prepare_image(image, placement, cfg)
    sock = base / "nbd.sock"
    mkfs = ("-E", "nodiscard") if cfg.fill else ()
    row: dict[str, Any] = {"study": "mariadb", "placement": placement, "scale": cfg.scale, "threads": cfg.threads, "run_s": cfg.run_s}

    def step(what: str) -> None:
        log(f"  {placement}: {what} ({time.perf_counter() - t0:.0f} s)")

    step(f"image {image} ready, serving")
    with served(image, sock, cfg.pace), contextlib.ExitStack() as stack:
        fs1 = stack.enter_context(mounted(sock, "ns1", base, mkfs))
        datadir = fs1 / "mysql"
        datadir.mkdir()
        # The system tablespace (with the doublewrite buffer) on its own file system, or not.
        sysdir = stack.enter_context(mounted(sock, "ns2", base, ())) if nns == 2 else datadir
        cnf = my_cnf(base, datadir, sysdir, cfg)
        step("file systems mounted, installing the database")
        with database(cnf, base) as dbsock:
            _run(["mariadb", "-S", str(dbsock), "-uroot", "-e", "create database sbtest"], "create database")
            step("sysbench prepare")
            sysbench(dbsock, cfg, "prepare")
            s0, v0 = _status(dbsock), _vendor(image, time.time())
            step(f"sysbench run, {cfg.run_s} s")
            out = sysbench(dbsock, cfg, "run", (f"--time={cfg.run_s}",))
            s1, v1 = _status(dbsock), _vendor(image, time.time())
            step("stopping")
        row["ibdata1_path"] = str(sysdir / "ibdata1")
        row["ibdata1_bytes"] = (sysdir / "ibdata1").stat().st_size
    d = Drive.open(image, writable=False)
    try:
        d.check()
        ns_bytes = sum(n.bytes for n in d.namespaces() if n.attached)
    finally:
        d.close()
    host = v1["host_write_bytes"] - v0["host_write_bytes"]
    nand = v1["nand_write_bytes"] - v0["nand_write_bytes"]
    # The drive's WAF over the sysbench run only when it spans a GC cycle or a namespace
    # pass (docs/models.md, "Measuring WAF"); waf_window_raw is the run's ratio.
    m = wafm.measure(v0, v1, "timed", ns_bytes)
    row.update(
        tps=_tps(out),
        host_bytes=host,
        nand_bytes=nand,
        waf=m["waf"],
        waf_window_raw=m["waf_window_raw"],
        **wafm.keys(m),
        host_program_bytes=v1["nand_write_host_bytes"] - v0["nand_write_host_bytes"],
        gc_bytes=v1["nand_write_gc_bytes"] - v0["nand_write_gc_bytes"],
        buffer_merges=v1["buffer_merges"] - v0["buffer_merges"],
        **{k.lower(): s1[k] - s0[k] for k in STATUS},
        wall_s=time.perf_counter() - t0,
    )
    log(describe(row))
    return row


def describe(r: dict[str, Any]) -> str:
    dblwr = r["innodb_dblwr_pages_written"] * 16384
    return (
        f"{r['placement']:<6} {wafm.text(wafm.from_keys(r))}  host {r['host_bytes'] / 1e6:,.0f} MB -> NAND {r['nand_bytes'] / 1e6:,.0f} MB"
        f" (host programs {r['host_program_bytes'] / 1e6:,.0f} MB, GC {r['gc_bytes'] / 1e6:,.0f} MB)"
        f"  sysbench {r['tps']:,.0f} tps ({r['threads']} threads, {r['run_s']} s)"
        f"  InnoDB: pages {r['innodb_pages_written'] * 16384 / 1e6:,.0f} MB, doublewrite {dblwr / 1e6:,.0f} MB,"
        f" redo {r['innodb_os_log_written'] / 1e6:,.0f} MB  [{r['wall_s']:.0f} s wall]"
    )


def mariadb_study(
    work: Path, cfg: Config, placements: tuple[str, ...] = ("shared", "dram"), log: Callable[[str], None] = print
) -> list[dict[str, Any]]:
    """Each placement in turn (one server, one database at a time)."""
    why = missing()
    if why:
        raise StackError(why)
    return [run_placement(work, p, cfg, log) for p in placements]
