#!/usr/bin/env python3
"""Regenerate crates/ssdtwin-core/tests/data/fio_goldens.json: I/O sequences of real fio.

For each job below: the engine input ssdtwin's parser makes of it, and what
``fio --ioengine=null --write_iolog=...`` (fio 3.33) issued: totals per direction, the
number of distinct sizes and offsets, and the first I/Os. The Rust test
(crates/ssdtwin-core/tests/it/fio_goldens.rs) replays the inputs through the generator.

    python3 tests/fio/gen_goldens.py [--fio /usr/bin/fio]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fio_conformance import run_real_fio  # noqa: E402

from ssdtwin.fio import engine, parser  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

JOBS = {
    "randread_taus88": "rw=randread\nbs=4k\nsize=1m\n",
    "randread_taus258": "rw=randread\nbs=4k\nsize=4m\nrandom_generator=tausworthe64\n",
    "randread_lfsr": "rw=randread\nbs=4k\nsize=4m\nrandom_generator=lfsr\n",
    "bssplit_randommap": "rw=randwrite\nbssplit=4k/50:8k/30:64k/20\nsize=4m\n",
    "bsrange_randommap": "rw=randwrite\nbsrange=4k-512k\nsize=16m\n",
    "randrw_mix70": "rw=randrw\nrwmixread=70\nbs=4k\nsize=4m\n",
    "rw_bsrange_mix30": "rw=rw\nrwmixread=30\nbsrange=4k-64k\nsize=8m\n",
    "zipf_96m": "rw=randread\nbs=4k\nsize=96m\nrandom_distribution=zipf:0.5\n",
    "pareto_16m": "rw=randread\nbs=4k\nsize=16m\nrandom_distribution=pareto:0.3\n",
    "normal_16m": "rw=randread\nbs=4k\nsize=16m\nrandom_distribution=normal:10\n",
    "zoned_16m": "rw=randread\nbs=4k\nsize=16m\nrandom_distribution=zoned:50/5:30/15:20/\n",
    "zoned_abs_16m": "rw=randread\nbs=4k\nsize=16m\nrandom_distribution=zoned_abs:60/1m:40/15m\n",
    "seq_write_end_of_region": "rw=write\nbs=64k\nsize=1000k\n",
    "seq_loops": "rw=write\nbs=64k\nsize=1000k\nloops=3\n",
    "rand_io_size_passes": "rw=randwrite\nbs=64k\nsize=1000k\nio_size=4m\n",
    "percentage_random": "rw=randread\nbs=4k\nsize=4m\npercentage_random=30\n",
    "randread_nr8": "rw=randread:8\nbs=4k\nsize=4m\n",
    "write_holes": "rw=write:4k\nbs=4k\nsize=4m\n",
    "read_backwards": "rw=read:-8k\nbs=4k\nsize=1m\n",
    "trimwrite": "rw=trimwrite\nbs=4k\nsize=1m\n",
    "randtrimwrite": "rw=randtrimwrite\nbs=4k\nsize=1m\n",
    "bs_unaligned": "rw=randwrite\nbsrange=4k-16k\nbs_unaligned\nsize=4m\n",
    "norandommap_io_size": "rw=randwrite\nbs=4k\nsize=4m\nnorandommap\nio_size=8m\n",
    "strided_seq": "rw=write\nbs=4k\nsize=4m\nzonemode=strided\nzonesize=64k\nzoneskip=64k\nio_size=8m\n",
    "strided_rand_bsrange": "rw=randwrite\nbsrange=4k-32k\nsize=4m\nzonemode=strided\nzonesize=256k\nzonerange=128k\nzoneskip=64k\n",
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fio", default="/usr/bin/fio")
    a = ap.parse_args()
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, body in JOBS.items():
            job = Path(tmp) / f"{name}.fio"
            job.write_text(f"[j]\n{body}")
            ios = run_real_fio(a.fio, job, Path(tmp))[0].ios
            clone = parser.parse([job]).clones[0]
            st = clone.job.state
            spec = engine.engine_input(clone, st["offset"] + st["size"], 512)
            totals = {d: [sum(1 for io in ios if io[0] == d), sum(io[2] for io in ios if io[0] == d)] for d in ("read", "write", "trim")}
            out.append(
                {
                    "name": name,
                    "job": body,
                    "command": f"fio --ioengine=null --write_iolog=LOG {name}.fio  # [j]\\n{body.strip()}",
                    "spec": spec,
                    "total_ios": len(ios),
                    "totals": totals,
                    "distinct_sizes": len({io[2] for io in ios}),
                    "distinct_offsets": len({io[1] for io in ios}),
                    "first": [list(io) for io in ios[:12]],
                }
            )
    path = ROOT / "crates/ssdtwin-core/tests/data/fio_goldens.json"
    # One golden per line: diffs stay readable when a golden changes.
    path.write_text("[\n" + ",\n".join(json.dumps(g, separators=(",", ":")) for g in out) + "\n]\n")
    print(f"wrote {len(out)} goldens to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
