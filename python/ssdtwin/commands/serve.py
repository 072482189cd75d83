"""`ssdtwin serve`: a drive image's namespaces over NBD, in real time (docs/nbd.md), and
`ssdtwin bench nbd`.

The server is Rust (crates/ssdtwin-serve over the NBD protocol of crates/ssdtwin-nbd); this
module parses the command line, prints the export URIs, turns SIGTERM into a clean stop and
prints the session summary. The read-only ``nvme`` commands read a served image's live
state through ``ssdtwin.live``; the NBD benchmark is ``ssdtwin.studies.nbd``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import FrameType
from typing import Any, Optional

import typer

from .. import _core
from .. import stack as stacklib
from .. import waf as wafm
from ..core_types import ServeInfo, StackFile, StoppedSummary, VendorLog, WafMeasurement
from ..drive import Drive
from ..nvmefmt import si_bytes
from .common import (
    MAX_BENCH_SECONDS,
    HungUp,
    Interrupt,
    Terminated,
    check_fmt,
    emit_json,
    fail,
    interrupt_note,
    say,
    sigterm_cleans_up,
)


def _check_hostport(flag: str, text: str) -> None:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        fail(f"{flag} '{text}': use HOST:PORT, e.g. 127.0.0.1:10809")


def serve_cmd(
    path: Path = typer.Argument(..., metavar="DIR", help="drive image to serve, or a stack image (its volume)"),
    listen: list[str] = typer.Option([], "--listen", "-l", help="TCP HOST:PORT (repeatable; port 0 picks one)"),
    unix: list[Path] = typer.Option([], "--unix", "-u", help="unix socket PATH (repeatable)"),
    metrics: Optional[str] = typer.Option(None, "--metrics", help="HOST:PORT for Prometheus text on GET /metrics"),
    pace: str = typer.Option("model", "--pace", help="model: reply at the model's completion time; off: as fast as possible"),
    spin_us: int = typer.Option(0, "--spin-us", help="busy-wait this long before a paced reply is due (precision vs CPU)"),
    max_connections: int = typer.Option(256, "--max-connections", help="connections served at once; more are refused with a message"),
    max_inflight: str = typer.Option(
        "256MiB", "--max-inflight", help="request and reply bytes in flight over all connections (backpressure beyond)"
    ),
    handshake_timeout: float = typer.Option(
        10.0, "--handshake-timeout", help="seconds a client has to finish the handshake (0: no limit; at most 86400)"
    ),
    send_timeout: float = typer.Option(
        60.0, "--send-timeout", help="seconds a client may leave a reply unread before it is disconnected (0: never; at most 86400)"
    ),
    tls: str = typer.Option("off", "--tls", help="off, on (offered) or require (NBD STARTTLS, as nbdkit --tls)"),
    tls_certificates: Optional[Path] = typer.Option(
        None, "--tls-certificates", help="directory with server-cert.pem, server-key.pem (and ca-cert.pem)"
    ),
    tls_verify_peer: bool = typer.Option(False, "--tls-verify-peer", help="require client certificates signed by ca-cert.pem"),
    unix_group: Optional[str] = typer.Option(
        None, "--unix-group", help="give unix sockets to this group, mode 0660 (default: 0600, owner only)"
    ),
    idle_gc: bool = typer.Option(True, "--idle-gc/--no-idle-gc", help="background GC in idle gaps (as ssdtwin fio's)"),
    fmt: str = typer.Option("normal", "-o", "--output-format", help="normal or json (the session summary as JSON on stdout)"),
) -> None:
    """Serve the attached namespaces over NBD (exports ns1, ns2 …), or a stack image's volume
    (export `stack`), until Ctrl-C or SIGTERM."""
    check_fmt(fmt)
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
    # The same address twice failed as "address already in use (another server?)", and the
    # same unix socket twice served on one of them and left the other orphaned.
    for flag, given in (("--listen", list(listen)), ("--unix", [os.path.abspath(u) for u in unix])):
        twice = next((a for i, a in enumerate(given) if a in given[:i] and not a.endswith(":0")), None)
        if twice is not None:
            fail(f"{flag} {twice} given twice")
    if metrics is not None and metrics in listen and not metrics.endswith(":0"):
        fail(f"--metrics {metrics} is also a --listen address: give the metrics a port of their own")
    if not 1 <= max_connections <= 1 << 20:
        # Past 2**64 it was a traceback (OverflowError). Each connection holds a descriptor,
        # and Linux caps a process's at fs.nr_open (1048576 by default).
        fail(f"--max-connections {max_connections}: must be 1 to 1048576 (each connection holds a file descriptor)")
    try:
        inflight = _core.parse_size(max_inflight)
    except ValueError as e:
        fail(f"--max-inflight: {e}")
    if inflight < 1 << 20:
        fail(f"--max-inflight {max_inflight}: must be at least 1 MiB")
    for flag, v in (("--handshake-timeout", handshake_timeout), ("--send-timeout", send_timeout)):
        # inf was a traceback (the core's ValueError) and 1e300 a panic (no Duration holds it).
        if not 0 <= v <= 86400:
            fail(f"{flag} {v}: must be 0 (no limit) to 86400 seconds (a day)")
    if tls not in ("off", "on", "require"):
        fail(f"--tls '{tls}': must be off, on or require")
    if tls != "off" and tls_certificates is None:
        fail(f"--tls {tls} needs --tls-certificates DIR (server-cert.pem, server-key.pem)")
    if tls_verify_peer and tls == "off":
        # It served every client in plain text, certificate or not.
        fail("--tls-verify-peer needs --tls on or require (with --tls off no client certificate is asked for)")
    # Every address is tried before the image is opened: a server that cannot start must
    # leave the image exactly as it was (no journal, no data files).
    for flag, addr in [("--listen", a) for a in listen] + ([("--metrics", metrics)] if metrics else []):
        why = _bind_error(addr)
        if why:
            fail(f"{flag} {addr}: {why}")
    for u in unix:
        if not u.parent.is_dir():
            fail(f"--unix {u}: no such directory {u.parent}")
    stack = _open_stack(path, pace) if stacklib.is_stack(path) else None  # a host stack (docs/host.md, Serving a stack)
    served = Path(stack[0]["drive"]) if stack else path

    stopping = False

    def on_signal(signum: int, frame: Optional[FrameType]) -> None:
        # The first SIGTERM or Ctrl-C stops the server; later ones are ignored until the
        # summary is out. A second SIGTERM during the stop used to make the CLI say it was
        # "stopped by SIGTERM before serving; the image is unchanged" after a committed
        # session, and one after it killed the process before it printed its summary.
        nonlocal stopping
        if stopping:
            return
        stopping = True
        if signum == signal.SIGINT:
            Interrupt.on_sigint(signum, frame)  # records the Ctrl-C (exit 130) and raises
        if signum == signal.SIGHUP:
            # The terminal hung up: its default action killed the server without a commit
            # (the journal recovered the drive, but a served stack was then refused as
            # changed under it).
            raise HungUp()
        raise Terminated()

    old_term = signal.signal(signal.SIGTERM, on_signal)
    # An ignored SIGHUP (nohup) stays ignored.
    old_hup = signal.getsignal(signal.SIGHUP)
    if old_hup is not signal.SIG_IGN:
        signal.signal(signal.SIGHUP, on_signal)
    # An ignored SIGINT (a background job of a shell without job control) stays ignored.
    old_int = signal.getsignal(signal.SIGINT)
    if old_int is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, on_signal)

    def ready(info: ServeInfo) -> None:
        rec = info.get("recovery")
        if rec:
            say(f"ssdtwin serve: {path}: {rec['detail']}")
        for w in info.get("warnings", []):
            say(f"ssdtwin serve: warning: {w}")
        say(f"ssdtwin serve: {path} (pid {info['pid']}), pace {info['pace']}; exports:")
        for u in info["uris"]:
            say(f"  {u}")
        if info.get("metrics"):
            say(f"  metrics: http://{info['metrics']}/metrics")
        say("Ctrl-C or SIGTERM stops it (the state is committed on the way out).")

    try:
        before = _committed_log(served)  # the session's WAF is measured from here
        try:
            summary = _core.serve(
                os.fspath(served),
                tcp=list(listen),
                unix=[os.fspath(u) for u in unix],
                metrics=metrics,
                pace=pace,
                spin_us=spin_us,
                ready=ready,
                max_connections=max_connections,
                max_inflight_bytes=inflight,
                handshake_timeout_s=handshake_timeout,
                send_timeout_s=send_timeout,
                tls=tls,
                tls_certificates=None if tls_certificates is None else os.fspath(tls_certificates),
                tls_verify_peer=tls_verify_peer,
                unix_group=unix_group,
                stack=None if stack is None else stack[1]["stack"],
                stack_nsid=1 if stack is None else int(stack[0]["namespace"]),
                idle_gc=idle_gc,
            )
        except _core.SsdtwinError as e:
            fail(_name_the_address(str(e), listen))
        stopping = True  # the server has stopped (on a signal): later ones wait for the summary
        # The stack's state is saved before anything is printed: a stderr nobody reads any
        # more (a closed pipe, a hung-up terminal) failed the summary and left the drive
        # committed and the stack unsaved, refused from then on as changed under it.
        saved = None if stack is None else _save_stack(path, stack[0], stack[1], summary)
        waf = _session_waf(served, before)
        if fmt == "json":
            emit_json(summary_json(summary, waf, None if saved is None else saved[1]))
        else:
            _say_if_heard(summary_text(summary, waf))
            if saved is not None:
                _say_if_heard(saved[0])
        if summary.get("stopped_by") == "KeyboardInterrupt":
            # Ctrl-C stopped the server cleanly; the CLI still exits 130 (docs/cli.md).
            interrupt_note(f"{path} was committed on the way out (generation {summary['generation']})")
    finally:
        signal.signal(signal.SIGTERM, old_term)
        if old_hup is not signal.SIG_IGN:
            signal.signal(signal.SIGHUP, old_hup)
        if old_int is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, old_int)


def _say_if_heard(msg: str) -> None:
    """say(), after the server has committed: when stderr has gone (its reader closed the
    pipe, the terminal hung up), what the session did is in the image, so the rest of the
    way out (the exit status, 130 after a Ctrl-C) goes on without its messages."""
    try:
        say(msg)
    except OSError:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115  (later messages and the exit's flush go nowhere; kept open)


def _open_stack(path: Path, pace: str) -> tuple[StackFile, stacklib.StackImageState]:
    """A stack image to serve: (stack.toml, state.json), after the checks `ssdtwin fio` makes
    (its drive is there and has not changed underneath it)."""
    if pace != "model":
        fail(f"--pace {pace}: a stack is served with --pace model only (its destages run on the model's time)")
    try:
        config, state = stacklib.load(path)
        stacklib.open_drive(path, config, state, writable=False).close()
    except stacklib.StackError as e:
        fail(*[str(a) for a in e.args])
    return config, state


def _save_stack(path: Path, config: StackFile, state: stacklib.StackImageState, summary: StoppedSummary) -> tuple[str, dict[str, Any]]:
    """The drive is committed (the server did it); now the stack's state, with the drive's
    identity and this session's drive bytes (docs/host.md, "Crash semantics"). Returns the
    summary line and the stack's counters (as `ssdtwin stack DIR --show -o json`)."""
    if "stack" not in summary:
        fail(f"{path}: the server returned no stack state; the stack keeps its last committed state")
    with Drive.open(Path(config["drive"]), writable=False) as d:
        ident = stacklib.identity(d)
        after = d.vendor_log()
        attached = sum(n.bytes for n in d.namespaces() if n.attached)
    totals = stacklib.add_totals(state, summary["host_write_bytes"], summary["nand_write_bytes"], after, attached)
    new: stacklib.StackImageState = {"drive_identity": ident, "drive_totals": totals, "stack": summary.pop("stack")}
    stacklib.save_state(path, new)
    c = stacklib.counters(config, new)

    def f(v: Optional[float]) -> str:
        return "-" if v is None else f"{v:.3f}"

    line = (
        f"  stack {path}: {config['policy']} on {config['media']}, host {si_bytes(c['host_write_bytes'])} -> drive "
        f"{si_bytes(c['stack_drive_write_bytes'])}; tier WAF {f(c['tier_waf'])}, drive {wafm.text(wafm.from_keys(c, 'drive_waf'))}, "
        f"end-to-end WAF {f(c['end_to_end_waf'])} (all the stack's runs; ssdtwin stack {path} --show)"
    )
    return line, dict(c)


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


def _committed_log(path: Path) -> Optional[tuple[VendorLog, int]]:
    """The image's committed vendor log and the bytes of its attached namespaces (read-only),
    or None when it cannot be read (the server then says why it cannot serve it)."""
    try:
        with Drive.open(path, writable=False) as d:
            return d.vendor_log(), sum(n.bytes for n in d.namespaces() if n.attached)
    except (_core.SsdtwinError, OSError, ValueError):
        return None


def _session_waf(path: Path, before: Optional[tuple[VendorLog, int]]) -> Optional[WafMeasurement]:
    """The drive's WAF over the session (waf.py), from the committed logs either side of it:
    timed writes (the server runs the model); None when a log cannot be read."""
    after = _committed_log(path)
    if before is None or after is None:
        return None
    return wafm.measure(before[0], after[0], "timed", after[1])


def summary_text(s: StoppedSummary, waf: Optional[WafMeasurement] = None) -> str:
    """The session summary; ``waf``, the session's WAF measurement, says whether its ratio is
    the drive's WAF. Without it, the summary's own measurement (the server's, over the attached
    namespaces) is used; a summary from before that has only its ratio, printed as the
    session's ratio."""
    if waf is None:
        waf = s.get("waf_measurement")
    why = {"KeyboardInterrupt": "Ctrl-C", "Terminated": "SIGTERM", "HungUp": "SIGHUP"}.get(
        s.get("stopped_by", ""), s.get("stopped_by", "?")
    )
    lines = [
        f"ssdtwin serve: stopped by {why} after {s['seconds']:.1f} s; committed generation {s['generation']}",
        f"  {s['reads']} reads ({si_bytes(s['read_bytes'])}), {s['writes']} writes ({si_bytes(s['write_bytes'])}), "
        f"{s['trims']} trims, {s['write_zeroes']} write-zeroes, {s['flushes']} flushes, "
        f"{s.get('block_status', 0)} block-status, {errors_text(s)}; {s['connections']} connections",
        f"  host {si_bytes(s['host_write_bytes'])} -> NAND {si_bytes(s['nand_write_bytes'])} written{buffer_text(s)}, "
        + (wafm.text(waf) if waf is not None else "session ratio " + (f"{s['waf']:.3f}" if s["host_write_bytes"] else "-"))
        + f"; background GC moved {s['idle_gc_moved_ius']} IUs",
    ]
    rows = s.get("namespaces", [])
    if len(rows) > 1:  # one row is the line above
        lines += [
            f"    {r['export']}: {r['reads']} reads ({si_bytes(r['read_bytes'])}), {r['writes']} writes "
            f"({si_bytes(r['write_bytes'])}), {r['trims']} trims ({si_bytes(r['trim_bytes'])}), "
            f"{r['write_zeroes']} write-zeroes ({si_bytes(r['write_zeroes_bytes'])})"
            for r in rows
        ]
    if s["pace"] == "model":
        # Every reply the model gave a time: the reads, writes, trims and write-zeroes that
        # succeeded. Flush and block-status replies go out when done; errors at once.
        timed = s["replies_paced"]
        late = s["replies_late"]
        pct = f" ({late / timed:.2%})" if timed else ""
        lines.append(
            f"  model-timed replies {timed} (reads, writes, trims, write-zeroes), late {late}{pct} (host slower than the model), "
            f"mean lateness {s['late_ns_mean'] / 1000:.1f} us, worst {s['late_ns_max'] / 1000:.1f} us"
        )
        lat = [
            f"{op} {v:.1f} us"
            for op, v in (("read", s.get("read_latency_mean_us")), ("write", s.get("write_latency_mean_us")))
            if v is not None
        ]
        if lat:
            lines.append(f"  mean model latency (arrival to the model's completion): {', '.join(lat)}")
    return "\n".join(lines)


STOPPED_BY = {"KeyboardInterrupt": "SIGINT", "Terminated": "SIGTERM", "HungUp": "SIGHUP"}


def summary_json(s: StoppedSummary, waf: Optional[WafMeasurement], stack: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """`-o json`: the session summary as the binding returns it, with the signal that stopped
    the server (`stopped_by`), the session's WAF measurement from the committed logs either
    side of it (as the text's third line) and a served stack's counters. `waf` is the
    session's NAND/host ratio, null when the host wrote nothing (0.0 in the binding)."""
    out: dict[str, Any] = dict(s)
    out.pop("stack", None)
    out["stopped_by"] = STOPPED_BY.get(s.get("stopped_by", ""), s.get("stopped_by"))
    if waf is not None:
        out["waf_measurement"] = waf
    if not out.get("host_write_bytes"):
        out["waf"] = None
    if stack is not None:
        out["stack"] = stack
    return out


def buffer_text(s: StoppedSummary) -> str:
    """What the drive's write buffer did with the session's bytes, after "NAND N written": a
    short session's writes wait in the power-loss-protected buffer (NAND 0 B) until later
    writes push them out; a flush or the commit at exit leaves them there (docs/models.md §2)."""
    d = int(s.get("buffered_change_bytes", 0))
    if d > 0:
        return f" (+{si_bytes(d)} held in the power-loss-protected write buffer: durable, programmed to NAND as later writes push it out)"
    if d < 0:
        return f" (the write buffer holds {si_bytes(-d)} less than when the server started)"
    return ""


def errors_text(s: StoppedSummary) -> str:
    """Every reply that carried an error: the server's own refusals (a write to a read-only
    export, a request past the end) as well as the drive's (a write-protected namespace)."""
    n = int(s.get("error_replies", s["errors"]))
    text = f"{n} error repl{'y' if n == 1 else 'ies'}"
    if s.get("protocol_errors"):
        text += f", {s['protocol_errors']} connections dropped for protocol errors"
    return text


def bench_nbd_cmd(
    seconds: float = typer.Option(10.0, "--seconds", help="fio runtime per workload and server"),
    numjobs: int = typer.Option(4, "--numjobs"),
    iodepth: int = typer.Option(32, "--iodepth"),
    size: str = typer.Option("1g", "--size", help="region fio works on (prefilled first)"),
    rounds: int = typer.Option(1, "--rounds", help="repeat the four runs, alternating servers"),
    fmt: str = typer.Option("normal", "-o", "--output-format", help="normal or json"),
) -> None:
    """NBD serving speed: the real fio (nbd engine, 4 KiB random read and write) against
    `ssdtwin serve --pace off`, `nbdkit memory` and `nbdkit file` (on the same disk), in the
    same run on this machine."""
    from ..studies.nbd import bench_nbd, nbd_size_range

    check_fmt(fmt)
    if not seconds > 0 or numjobs < 1 or iodepth < 1 or rounds < 1:
        fail("--seconds, --numjobs, --iodepth and --rounds must be positive")
    if not seconds <= MAX_BENCH_SECONDS:  # inf was a traceback (a timestamp too large)
        fail(f"--seconds {seconds}: at most {MAX_BENCH_SECONDS} (a day per run)")
    try:
        size_bytes = _core.parse_size(size)
    except ValueError as e:
        fail(f"--size: {e}")
    # fio's size=0 is the whole device (a prefill of the whole namespace), under the prefill's
    # 1 MiB block fio fails, and past the namespace fio works on less than asked.
    low, top = nbd_size_range()
    if not low <= size_bytes <= top:
        fail(f"--size {size}: must be 1MiB to the served namespace's {top} bytes ({si_bytes(top)})")
    log = (lambda m: print(m, file=sys.stderr)) if fmt == "json" else typer.echo
    try:
        # SIGTERM as Ctrl-C: it killed the command alone, leaving its `ssdtwin serve` running
        # and the served image and nbdkit's file (GBs) in the temporary folder.
        with sigterm_cleans_up():
            res = bench_nbd(seconds, numjobs, iodepth, size, rounds=rounds, log=log)
    except subprocess.CalledProcessError as e:
        said = (e.stderr or b"").decode(errors="replace").strip().splitlines()
        fail(f"fio exited with status {e.returncode}" + (f": {said[-1]}" if said else ""))
    except RuntimeError as e:
        fail(str(e))
    if fmt == "json":
        emit_json(res)
