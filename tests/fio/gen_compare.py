#!/usr/bin/env python3
"""Compare the I/O sequence of ``fio --ioengine=null`` with the Rust workload generator.

Developer tool (issue 10): runs a one-job fio job file through real fio with
``--ioengine=null --write_iolog`` and through ``ssdtwin``'s parser + the generator
(``examples/gen_iolog``), then prints per-direction totals, distinct sizes and blocks,
the first offsets and the first difference. Exit status 0 when the sequences are equal.

    python3 tests/fio/gen_compare.py JOB.fio [--target BYTES] [--max N] [--fio /usr/bin/fio]

``--target`` is the size of the drive the generator runs on (fio's ``real_file_size``);
by default the end of the job's region, which is what fio's null engine uses. Needs
``cargo build --release -p ssdtwin-core --example gen_iolog`` (CARGO_TARGET_DIR honoured).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

from ssdtwin.fio import engine, parser  # noqa: E402

Io = tuple[str, int, int]


def fio_iolog(fio: str, job: Path, extra: list[str]) -> list[Io]:
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "io.log"
        cmd = [fio, "--ioengine=null", f"--write_iolog={log}", "--output-format=terse", *extra, str(job)]
        subprocess.run(cmd, check=True, cwd=tmp, stdout=subprocess.DEVNULL)
        lines = log.read_text().splitlines()
    v3 = lines and "version 3" in lines[0]
    out = []
    for line in lines[1:]:
        f = line.split()
        if v3:
            f = f[1:]
        if len(f) == 4 and f[1] in ("read", "write", "trim"):
            out.append((f[1], int(f[2]), int(f[3])))
    return out


def twin_iolog(job: Path, target: int | None, max_ios: int) -> list[Io]:
    run = parser.parse([job])
    specs = []
    for clone in run.clones:
        st = clone.job.state
        size = st["size"] if isinstance(st["size"], int) else 0
        off = st["offset"] if isinstance(st["offset"], int) else 0
        dev = target or (off + size)
        specs.append(engine.engine_input(clone, dev, 512))
    target_dir = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    exe = target_dir / "release" / "examples" / "gen_iolog"
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(specs, fh)
    try:
        text = subprocess.run([str(exe), fh.name, str(max_ios)], check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(fh.name)
    return [(f[1], int(f[2]), int(f[3])) for f in (line.split() for line in text.splitlines())]


def summary(ios: list[Io]) -> str:
    parts = []
    for d in ("read", "write", "trim"):
        sel = [io for io in ios if io[0] == d]
        if sel:
            parts.append(f"{d}: {len(sel)} ios {sum(io[2] for io in sel)} B")
    sizes = len({io[2] for io in ios})
    blocks = len({io[1] for io in ios})
    first = " ".join(str(io[1]) for io in ios[:6])
    return f"total_ios={len(ios)} " + ", ".join(parts) + f"; {sizes} sizes, {blocks} distinct offsets; first: {first}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("job", type=Path)
    ap.add_argument("--target", type=int, default=None)
    ap.add_argument("--max", type=int, default=10_000_000)
    ap.add_argument("--fio", default="/usr/bin/fio")
    a = ap.parse_args()
    want = fio_iolog(a.fio, a.job, [])[: a.max]
    got = twin_iolog(a.job, a.target, a.max)
    print(f"fio:     {summary(want)}")
    print(f"ssdtwin: {summary(got)}")
    for i, (w, g) in enumerate(zip(want, got)):
        if w != g:
            print(f"first difference at I/O {i}: fio {w} ssdtwin {g}")
            return 1
    if len(want) != len(got):
        print(f"same prefix, lengths differ: fio {len(want)} ssdtwin {len(got)}")
        return 1
    print("IDENTICAL")
    return 0


if __name__ == "__main__":
    sys.exit(main())
