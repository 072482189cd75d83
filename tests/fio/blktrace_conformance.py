"""blktrace replay against real fio 3.33 (docs/fio.md §2.10): one blktrace binary through
``fio --ioengine=null --read_iolog=TRACE --replay_redirect=/dev/null`` and through
``ssdtwin fio`` with the same replay options, compared on what fio issues.

fio writes no iolog while it replays one ("read iolog overrides write_iolog"), so the
real side comes from fio's debug log: ``--debug=blktrace`` prints every I/O it keeps with
its delay (``store ddir=1, off=…, len=…, delay=…``; ``store discard``, ``store flush``),
``--debug=io`` every I/O it issues (``iolog: get`` then ``prep: … ddir=``), ``--debug=mem``
one ``io_u alloc`` line per queue slot twice over (the depth it probed). The twin side is
the engine's own record of what it issued, and the replay records it was given.

``python tests/fio/blktrace_conformance.py`` prints the comparison for a few generated
traces (``make fio-conformance`` runs it); tests/fio/test_blktrace_conformance.py asserts it.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: tracefiles

import tracefiles as tf  # noqa: E402
from ssdtwin.drive import Drive  # noqa: E402
from ssdtwin.fio import parse_string  # noqa: E402

CM6 = "kioxia-cm6-r-3.84t"
DDIRS = ("read", "write", "trim")
IO = tuple[str, int, int]  # ddir, offset, length
# A paced I/O: ddir, offset, length, delay (ns) after the previous issue, extra (ns) after that.
PACED = tuple[str, int, int, int, int]


@dataclass
class Replayed:
    """One side's replay: the I/Os in issue order with their pacing, totals per direction,
    the flushes kept, the queue depth."""

    ios: list[IO]
    paced: list[PACED]
    totals: dict[str, tuple[int, int]]
    syncs: int
    depth: int
    notes: list[str] = field(default_factory=list)

    def issued_bytes(self) -> dict[str, int]:
        return {d: sum(n for dd, _, n in self.ios if dd == d) for d in DDIRS}


def _fold(stores: list[tuple[str, int, int, int]]) -> list[PACED]:
    """fio's kept I/Os with their delays (us), the flushes' delays folded into the next
    I/O's as the twin's engine waits them: the first flush's after the previous issue, the
    rest and the I/O's own after that."""
    out: list[PACED] = []
    first, more = None, 0
    for kind, off, n, delay_us in stores:
        if kind == "sync":
            if first is None:
                first = delay_us
            else:
                more += delay_us
            continue
        if first is None:
            out.append((kind, off, n, delay_us * 1000, 0))
        else:
            out.append((kind, off, n, first * 1000, (more + delay_us) * 1000))
        first, more = None, 0
    return out


def real_fio(fio: str, trace: Path, options: dict[str, str], workdir: Path) -> Replayed:
    """``trace`` replayed by fio with the null engine onto /dev/null."""
    args = [fio, "--name=r", "--ioengine=null", f"--read_iolog={trace}", "--replay_redirect=/dev/null"]
    args += [f"--{k}={v}" for k, v in options.items()] + ["--debug=io,blktrace,mem", "--output-format=json"]
    proc = subprocess.run(args, cwd=workdir, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"fio: exit {proc.returncode}: {proc.stderr.strip()[:400]}")
    text = proc.stdout
    ios: list[IO] = []
    stores: list[tuple[str, int, int, int]] = []
    got = False
    for line in text.splitlines():
        if "iolog: get " in line:
            got = True
        elif got and (m := re.search(r"prep: io_u \S+: off=(0x[0-9a-f]+),len=(0x[0-9a-f]+),ddir=(\d+)", line)):
            got = False
            ddir = int(m[3])
            ios.append((DDIRS[ddir] if ddir < 3 else "sync", int(m[1], 16), int(m[2], 16)))
        elif m := re.search(r"store ddir=(\d+), off=(\d+), len=(\d+), delay=(\d+)", line):
            stores.append((DDIRS[int(m[1])], int(m[2]), int(m[3]), int(m[4])))
        elif m := re.search(r"store discard, off=(\d+), len=(\d+), delay=(\d+)", line):
            stores.append(("trim", int(m[1]), int(m[2]), int(m[3])))
        elif m := re.search(r"store flush delay=(\d+)", line):
            stores.append(("sync", 0, 0, int(m[1])))
    doc, _ = json.JSONDecoder().raw_decode(text[text.index("\n{\n") + 1 :])
    job = doc["jobs"][0]
    totals = {d: (int(job[d]["total_ios"]), int(job[d]["io_bytes"])) for d in DDIRS}
    depth = text.count("io_u alloc") // 2  # backend.c init_io_u and init_io_u_buffers, per slot
    notes = [line for line in proc.stderr.splitlines() if line.startswith("blktrace:")]
    syncs = sum(1 for d, *_ in ios if d == "sync")
    return Replayed([x for x in ios if x[0] != "sync"], _fold(stores), totals, syncs, depth, notes)


def twin(trace: Path, options: dict[str, str]) -> Replayed:
    """``trace`` replayed by ssdtwin's engine (``ssdtwin fio``'s path) on a fresh in-memory
    CM6 at 1/454, the engine recording what it issued."""
    job = f"[r]\nioengine=null\nread_iolog={trace}\nreplay_redirect=/dev/null\n" + "".join(f"{k}={v}\n" for k, v in options.items())
    run = parse_string(job, cwd=trace.parent)
    with Drive.in_memory(CM6, scale=454) as d:
        ns = d.namespaces()[0]
        (spec,) = run.to_engine(ns.bytes, ns.lba_bytes)
        spec["iolog"] = True
        (result,) = d.run_fio([spec], 1, True, None)
    issued = [(DDIRS[dd], off, n) for _, dd, off, n in struct.iter_unpack("<4Q", bytes(result["iolog"]))]
    paced = [
        (DDIRS[k & 0xFF], off, n, delay, extra) for k, off, n, delay, extra in struct.iter_unpack("<5Q", bytes(spec["replay"]["records"]))
    ]
    totals = {d: (int(result[d]["total_ios"]), int(result[d]["io_bytes"])) for d in DDIRS}
    from ssdtwin.fio import iolog

    replayed = trace.parent / options["merge_blktrace_file"] if "merge_blktrace_file" in options else trace
    summary = iolog.load_trace(str(replayed), str(replayed), run.jobs[0].state).summary
    return Replayed(issued, paced, totals, int(summary["syncs"]), int(spec["iodepth"]), list(summary["notes"]))


# Generated traces and the options they are replayed with (tracefiles.block_trace).
CASES: dict[str, tuple[int, dict[str, str], bool]] = {
    "plain": (5, {}, False),
    "no_stall": (6, {"replay_no_stall": "1"}, False),
    "scaled": (7, {"replay_time_scale": "250", "replay_scale": "3", "replay_align": "4096"}, False),
    "big-endian, skip writes": (8, {"replay_skip": "write"}, True),
}


def write_case(name: str, workdir: Path) -> tuple[Path, dict[str, str]]:
    seed, options, big = CASES[name]
    trace = workdir / f"{name.split(',')[0]}.blktrace"
    tf.write_blktrace(trace, tf.block_trace(800, seed=seed), big_endian=big, pdus={0: b"fio\0", 7: b"xyzw"})
    return trace, options


def table(rows: list[tuple[str, Replayed, Replayed]]) -> str:
    out = [f"{'trace':<26} {'I/Os fio/twin':>15} {'issued bytes':>14} {'sequence':>9} {'delays':>7} {'syncs':>6} {'depth':>6}"]
    for name, f, t in rows:
        n = f"{len(f.ios)}/{len(t.ios)}"
        b = "same" if f.issued_bytes() == t.issued_bytes() else "DIFFER"
        seq = "same" if f.ios == t.ios else "DIFFER"
        pace = "same" if f.paced == t.paced else "DIFFER"
        out.append(f"{name:<26} {n:>15} {b:>14} {seq:>9} {pace:>7} {f'{f.syncs}/{t.syncs}':>6} {f'{f.depth}/{t.depth}':>6}")
    return "\n".join(out)


def main() -> int:
    import tempfile

    fio = shutil.which("fio")
    if fio is None:
        print("fio is not installed", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in CASES:
            trace, options = write_case(name, Path(tmp))
            rows.append((name, real_fio(fio, trace, options, Path(tmp)), twin(trace, options)))
    print(table(rows))
    bad = [n for n, f, t in rows if (f.ios, f.paced, f.syncs, f.depth) != (t.ios, t.paced, t.syncs, t.depth)]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
