"""`ssdtwin serve`: a drive image's namespaces over NBD, in real time (docs/nbd.md).

The server is Rust (crates/ssdtwin-serve over the NBD protocol of crates/ssdtwin-nbd); this module parses the command line,
prints the export URIs, turns SIGTERM into a clean stop and prints the session summary.
It also reads the server's ``live.json`` for the read-only ``nvme`` commands while the
image is being served, and runs ``ssdtwin bench nbd`` (ssdtwin against nbdkit's memory
plugin with the real fio).
"""

from __future__ import annotations

import contextlib
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
from pathlib import Path
from types import FrameType
from typing import Any, Iterator, Optional

import typer

from . import _core

LIVE = "live.json"


class Terminated(BaseException):
    """Raised by the SIGTERM handler; the server loop notices it and stops cleanly."""


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _check_hostport(flag: str, text: str) -> None:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        from .cli import fail

        fail(f"{flag} '{text}': use HOST:PORT, e.g. 127.0.0.1:10809")


def serve_cmd(
    path: Path = typer.Argument(..., metavar="DIR", help="drive image to serve"),
    listen: list[str] = typer.Option([], "--listen", "-l", help="TCP HOST:PORT (repeatable; port 0 picks one)"),
    unix: list[Path] = typer.Option([], "--unix", "-u", help="unix socket PATH (repeatable)"),
    metrics: Optional[str] = typer.Option(None, "--metrics", help="HOST:PORT for Prometheus text on GET /metrics"),
    pace: str = typer.Option("model", "--pace", help="model: reply at the model's completion time; off: as fast as possible"),
    spin_us: int = typer.Option(0, "--spin-us", help="busy-wait this long before a paced reply is due (precision vs CPU)"),
    max_connections: int = typer.Option(256, "--max-connections", help="connections served at once; more are refused with a message"),
    max_inflight: str = typer.Option("256MiB", "--max-inflight", help="request and reply bytes in flight over all connections (backpressure beyond)"),
    handshake_timeout: float = typer.Option(10.0, "--handshake-timeout", help="seconds a client has to finish the handshake (0: no limit)"),
    send_timeout: float = typer.Option(60.0, "--send-timeout", help="seconds a client may leave a reply unread before it is disconnected (0: never)"),
    tls: str = typer.Option("off", "--tls", help="off, on (offered) or require (NBD STARTTLS, as nbdkit --tls)"),
    tls_certificates: Optional[Path] = typer.Option(None, "--tls-certificates", help="directory with server-cert.pem, server-key.pem (and ca-cert.pem)"),
    tls_verify_peer: bool = typer.Option(False, "--tls-verify-peer", help="require client certificates signed by ca-cert.pem"),
    unix_group: Optional[str] = typer.Option(None, "--unix-group", help="give unix sockets to this group, mode 0660 (default: 0600, owner only)"),
) -> None:
    """Serve the attached namespaces over NBD (exports ns1, ns2 …) until Ctrl-C or SIGTERM."""
    from .cli import fail

    if not listen and not unix:
        fail("give --listen HOST:PORT and/or --unix PATH")
    if pace not in ("model", "off"):
        fail(f"--pace '{pace}': must be model or off")
    if not 0 <= spin_us <= 1_000_000:
        fail(f"--spin-us {spin_us}: must be 0..1000000 (microseconds)")
    for a in listen:
        _check_hostport("--listen", a)
    if metrics is not None:
        _check_hostport("--metrics", metrics)
    if max_connections < 1:
        fail(f"--max-connections {max_connections}: must be at least 1")
    try:
        inflight = _core.parse_size(max_inflight)
    except ValueError as e:
        fail(f"--max-inflight: {e}")
    if inflight < 1 << 20:
        fail(f"--max-inflight {max_inflight}: must be at least 1 MiB")
    for flag, v in (("--handshake-timeout", handshake_timeout), ("--send-timeout", send_timeout)):
        if not v >= 0:
            fail(f"{flag} {v}: must be a number of seconds, 0 or more")
    if tls not in ("off", "on", "require"):
        fail(f"--tls '{tls}': must be off, on or require")
    if tls != "off" and tls_certificates is None:
        fail(f"--tls {tls} needs --tls-certificates DIR (server-cert.pem, server-key.pem)")
    # Every address is tried before the image is opened: a server that cannot start must
    # leave the image exactly as it was (no journal, no data files).
    for flag, addr in [("--listen", a) for a in listen] + ([("--metrics", metrics)] if metrics else []):
        why = _bind_error(addr)
        if why:
            fail(f"{flag} {addr}: {why}")
    for u in unix:
        if not u.parent.is_dir():
            fail(f"--unix {u}: no such directory {u.parent}")

    def on_term(signum: int, frame: Optional[FrameType]) -> None:
        raise Terminated()

    old = signal.signal(signal.SIGTERM, on_term)

    def ready(info: dict[str, Any]) -> None:
        rec = info.get("recovery")
        if rec:
            _say(f"ssdtwin serve: {path}: {rec['detail']}")
        for w in info.get("warnings", []):
            _say(f"ssdtwin serve: warning: {w}")
        _say(f"ssdtwin serve: {path} (pid {info['pid']}), pace {info['pace']}; exports:")
        for u in info["uris"]:
            _say(f"  {u}")
        if info.get("metrics"):
            _say(f"  metrics: http://{info['metrics']}/metrics")
        _say("Ctrl-C or SIGTERM stops it (the state is committed on the way out).")

    try:
        summary = _core.serve(os.fspath(path), tcp=list(listen), unix=[os.fspath(u) for u in unix],
                              metrics=metrics, pace=pace, spin_us=spin_us, ready=ready,
                              max_connections=max_connections, max_inflight_bytes=inflight,
                              handshake_timeout_s=handshake_timeout, send_timeout_s=send_timeout, tls=tls,
                              tls_certificates=None if tls_certificates is None else os.fspath(tls_certificates),
                              tls_verify_peer=tls_verify_peer, unix_group=unix_group)
    except _core.SsdtwinError as e:
        fail(_name_the_address(str(e), listen))
    finally:
        signal.signal(signal.SIGTERM, old)
    _say(summary_text(summary))
    if summary.get("stopped_by") == "KeyboardInterrupt":
        from .cli import interrupt_note

        # Ctrl-C stopped the server cleanly; the CLI still exits 130 (docs/cli.md).
        interrupt_note(f"{path} was committed on the way out (generation {summary['generation']})")


def _name_the_address(msg: str, listen: list[str]) -> str:
    """A listener that cannot bind is reported with its address, whether or not the
    server's own message names it (which --listen failed is found by binding each)."""
    if not msg.startswith("bind TCP listener") or any(a in msg for a in listen):
        return msg
    detail = msg.split(": ", 1)[-1]
    culprits = [a for a in listen if _bind_error(a)] or listen
    return f"--listen {', '.join(culprits)}: {detail}"


def _bind_error(hostport: str) -> Optional[str]:
    """Why HOST:PORT cannot be listened on (e.g. "Address already in use"), or None."""
    host, _, port = hostport.rpartition(":")
    host = host.strip("[]")
    try:
        infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        return f"cannot resolve '{host}': {e.strerror}"
    except (OSError, ValueError) as e:
        return str(e)
    for family, kind, proto, _, addr in infos:
        try:
            with socket.socket(family, kind, proto) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
                s.bind(addr)
        except OSError as e:
            return e.strerror or str(e)
    return None


def summary_text(s: dict[str, Any]) -> str:
    from .nvmefmt import si_bytes

    why = {"KeyboardInterrupt": "Ctrl-C", "Terminated": "SIGTERM"}.get(s.get("stopped_by", ""), s.get("stopped_by", "?"))
    lines = [
        f"ssdtwin serve: stopped by {why} after {s['seconds']:.1f} s; committed generation {s['generation']}",
        f"  {s['reads']} reads ({si_bytes(s['read_bytes'])}), {s['writes']} writes ({si_bytes(s['write_bytes'])}), "
        f"{s['trims']} trims, {s['write_zeroes']} write-zeroes, {s['flushes']} flushes, {errors_text(s)}; "
        f"{s['connections']} connections",
        f"  host {si_bytes(s['host_write_bytes'])} -> NAND {si_bytes(s['nand_write_bytes'])} written, WAF "
        + (f"{s['waf']:.3f}" if s["host_write_bytes"] else "-")
        + f"; background GC moved {s['idle_gc_moved_ius']} IUs",
    ]
    if s["pace"] == "model":
        paced = s["replies_paced"]
        late = s["replies_late"]
        pct = f" ({late / paced:.2%})" if paced else ""
        lines.append(
            f"  paced replies {paced}, late {late}{pct} (host slower than the model), "
            f"mean lateness {s['late_ns_mean'] / 1000:.1f} us, worst {s['late_ns_max'] / 1000:.1f} us"
        )
    return "\n".join(lines)


def errors_text(s: dict[str, Any]) -> str:
    """Every reply that carried an error: the server's own refusals (a write to a read-only
    export, a request past the end) as well as the drive's (a write-protected namespace)."""
    n = int(s.get("error_replies", s["errors"]))
    text = f"{n} error repl{'y' if n == 1 else 'ies'}"
    if s.get("protocol_errors"):
        text += f", {s['protocol_errors']} connections dropped for protocol errors"
    return text


# --------------------------------------------------------------------------- live.json


def lock_holder(path: Path) -> Optional[int]:
    """The pid of the process holding the image lock, or None if nobody holds it."""
    lock = path / "LOCK"
    try:
        with open(lock) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return None  # released when the file closes
            except BlockingIOError:
                pass
            text = f.read().strip()
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return None  # not an image (or not readable): the open that follows says what is wrong
    return int(text) if text.isdigit() else -1


def live_state(path: Path, max_age_s: float = 10.0, newer_than: Optional[float] = None, wait_s: float = 3.0) -> Optional[dict[str, Any]]:
    """The snapshot a running ``ssdtwin serve`` keeps in ``DIR/live.json``, if the image is
    locked by that server and the snapshot is fresh; else None (use the committed state).
    With ``newer_than`` (a ``time.time()``), wait up to ``wait_s`` for a snapshot taken
    after it (the server writes one a second)."""
    deadline = time.monotonic() + wait_s
    while True:
        pid = lock_holder(path)
        if pid is None:
            return None
        try:
            data = json.loads((path / LIVE).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            data = None
        ok = (
            isinstance(data, dict)
            and data.get("format") == "ssdtwin-live"
            and data.get("serving") is True
            and data.get("pid") == pid
            and time.time() * 1000 - data.get("time_unix_ms", 0) <= max_age_s * 1000
        )
        if not ok:
            return None
        assert data is not None
        if newer_than is None or data["time_unix_ms"] >= newer_than * 1000:
            return dict(data)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)


def live_note(path: Path, data: dict[str, Any]) -> None:
    age = max(0.0, time.time() - data["time_unix_ms"] / 1000)
    _say(f"ssdtwin: {path} is being served (pid {data['pid']}); showing the server's live state of {age:.1f} s ago")


# --------------------------------------------------------------------------- benchmark


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


def fio_nbd(uri: str, rw: str, bs: str, size: str, jobs: int, iodepth: int, seconds: float, out: Path) -> dict[str, Any]:
    """Run the real fio's nbd engine; returns fio's JSON."""
    argv = ["fio", "--name=bench", "--ioengine=nbd", f"--uri={uri}", f"--rw={rw}", f"--bs={bs}", f"--size={size}",
            f"--numjobs={jobs}", f"--iodepth={iodepth}", "--group_reporting", "--output-format=json", f"--output={out}"]
    if seconds > 0:
        argv += ["--time_based", f"--runtime={seconds}"]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=seconds + 600)
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def bench_nbd(seconds: float = 10, jobs: int = 4, iodepth: int = 32, size: str = "1g",
              model: str = "kioxia-cm6-r-3.84t", scale: int = 454, rounds: int = 1,
              log: Any = print) -> dict[str, Any]:
    """4 KiB random read and write IOPS from the real fio (nbd engine) against
    ``ssdtwin serve --pace off`` and ``nbdkit memory``, on the same machine in one run."""
    for tool in ("fio", "nbdkit"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} is not installed; ssdtwin bench nbd runs the real fio against nbdkit memory")
    from .drive import Drive

    res: dict[str, Any] = {"seconds": seconds, "jobs": jobs, "iodepth": iodepth, "size": size, "model": model,
                           "scale": f"1/{scale}", "cpus": os.cpu_count(), "rounds": []}
    with tempfile.TemporaryDirectory(prefix="ssdtwin-bench-nbd-") as tmp:
        img = Path(tmp) / "img"
        d = Drive.create(img, model, scale=scale, seed=1)
        ns_bytes = d.namespaces()[0].bytes
        d.close()
        p1, p2 = _free_port(), _free_port()
        serve = [sys.executable, "-m", "ssdtwin.cli", "serve", str(img), "--listen", f"127.0.0.1:{p1}", "--pace", "off"]
        nbdkit = ["nbdkit", "-f", "-i", "127.0.0.1", "-p", str(p2), "memory", str(ns_bytes)]
        targets = {"ssdtwin": f"nbd://127.0.0.1:{p1}/ns1", "nbdkit-memory": f"nbd://127.0.0.1:{p2}/"}
        with _process(serve, p1, "ssdtwin serve"), _process(nbdkit, p2, "nbdkit"):
            for name, uri in targets.items():
                # Prefill the region so reads read data, not holes.
                fio_nbd(uri, "write", "1m", size, 1, 8, 0, Path(tmp) / f"fill-{name}.json")
            for r in range(rounds):
                row: dict[str, Any] = {}
                for rw in ("randread", "randwrite"):
                    for name, uri in targets.items():
                        j = fio_nbd(uri, rw, "4k", size, jobs, iodepth, seconds, Path(tmp) / f"{name}-{rw}-{r}.json")
                        d_ = "read" if rw == "randread" else "write"
                        st = j["jobs"][0][d_]
                        row[f"{name}_{rw}_iops"] = st["iops"]
                        row[f"{name}_{rw}_lat_us"] = st["lat_ns"]["mean"] / 1000
                        log(f"round {r + 1}: {name:<14} {rw:<9} {st['iops']:>10,.0f} IOPS  mean latency {st['lat_ns']['mean'] / 1000:7.1f} us")
                res["rounds"].append(row)
    for rw in ("randread", "randwrite"):
        a = [row[f"ssdtwin_{rw}_iops"] for row in res["rounds"]]
        b = [row[f"nbdkit-memory_{rw}_iops"] for row in res["rounds"]]
        res[f"ssdtwin_{rw}_iops"] = sum(a) / len(a)
        res[f"nbdkit_memory_{rw}_iops"] = sum(b) / len(b)
        log(f"{rw:<9}: ssdtwin {res[f'ssdtwin_{rw}_iops']:,.0f} IOPS, nbdkit memory {res[f'nbdkit_memory_{rw}_iops']:,.0f} IOPS "
            f"(ratio {res[f'ssdtwin_{rw}_iops'] / res[f'nbdkit_memory_{rw}_iops']:.2f})")
    return res


def bench_nbd_cmd(
    seconds: float = typer.Option(10.0, "--seconds", help="fio runtime per workload and server"),
    numjobs: int = typer.Option(4, "--numjobs"),
    iodepth: int = typer.Option(32, "--iodepth"),
    size: str = typer.Option("1g", "--size", help="region fio works on (prefilled first)"),
    rounds: int = typer.Option(1, "--rounds", help="repeat the four runs, alternating servers"),
    fmt: str = typer.Option("normal", "-o", "--output-format", help="normal or json"),
) -> None:
    """NBD serving speed: the real fio (nbd engine, 4 KiB random read and write) against
    `ssdtwin serve --pace off` and `nbdkit memory`, in the same run on this machine."""
    from .cli import check_fmt, emit_json, fail

    check_fmt(fmt)
    if not seconds > 0 or numjobs < 1 or iodepth < 1 or rounds < 1:
        fail("--seconds, --numjobs, --iodepth and --rounds must be positive")
    try:
        _core.parse_size(size)
    except ValueError as e:
        fail(f"--size: {e}")
    log = (lambda m: print(m, file=sys.stderr)) if fmt == "json" else typer.echo
    try:
        res = bench_nbd(seconds, numjobs, iodepth, size, rounds=rounds, log=log)
    except subprocess.CalledProcessError as e:
        said = (e.stderr or b"").decode(errors="replace").strip().splitlines()
        fail(f"fio exited with status {e.returncode}" + (f": {said[-1]}" if said else ""))
    except RuntimeError as e:
        fail(str(e))
    if fmt == "json":
        emit_json(res)
