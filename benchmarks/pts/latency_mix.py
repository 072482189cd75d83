"""The CM6/CD6 review's latency test on a twin, one row per block size x queue depth x mix:
read, write and overall mean latency and the 99.99th percentiles (docs/models.md §8,
"Latency test"). Each element runs on its own copy of one drive after SNIA WIPC (sequential
128 KiB over 2x the namespace), for RUNTIME seconds of simulated time at TC1/QD.

``--set PARAM=VALUE`` replaces a `[timing]` value for every run (a what-if: the candidates of
docs/models.md §8, "Why the QD1 mix is not slower than both"); the drive and its
preconditioning stay the preset's.

usage: python3 benchmarks/pts/latency_mix.py [--models kioxia-cm6-v-1.6t,kioxia-cm6-v-3.2t,kioxia-cd6-v-3.2t]
           [--scale 1/64] [--runtime 20] [--qd 1,4] [--bs 4k,8k] [--mixes 100,65,0]
           [--state wipc|rand] [--rand-passes 2] [--set max_suspends_per_op=0 ...] [--ps 0] [--work DIR] [--json]
"""

from __future__ import annotations

import argparse
import copy
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from ssdtwin.drive import Drive
from ssdtwin.fio import parse_string
from ssdtwin.fio.hist import dense, index_to_value, percentiles
from ssdtwin.studies.experiments import run_on_ns1

# A read slower than this met a program it could not suspend (or an erase): the share of such
# reads tells die contention without suspend from a controller-side delay (docs/models.md §8).
SLOW_NS = 500_000
DEFAULT_MODELS = "kioxia-cm6-v-1.6t,kioxia-cm6-v-3.2t,kioxia-cd6-v-3.2t"


def job(bs: str, qd: int, read_pct: int, runtime_s: float) -> str:
    rw = {100: "randread", 0: "randwrite"}.get(read_pct, "randrw")
    mix = f"rwmixread={read_pct}\n" if rw == "randrw" else ""
    return (
        "[global]\nioengine=libaio\ndirect=1\nnorandommap=1\nrandrepeat=0\ntime_based=1\n"
        f"runtime={int(runtime_s * 1000)}ms\n[lat]\nrw={rw}\n{mix}bs={bs}\niodepth={qd}\n"
    )


def stats(out: list[Any], d: str) -> tuple[int, float, float, float]:
    """(I/Os, mean µs, 99.99th percentile µs, share above SLOW_NS) of direction `d` over the clones."""
    n = sum(r[d]["clat"]["n"] for r in out)
    if n == 0:
        return 0, float("nan"), float("nan"), float("nan")
    mean = sum(r[d]["clat"]["sum_ns"] for r in out) / n / 1e3
    hist: list[int] = []
    for r in out:
        h = dense(r[d]["clat"]["hist"])
        hist = [a + b for a, b in zip(hist, h)] + (h[len(hist) :] if len(h) > len(hist) else hist[len(h) :])
    p = percentiles(hist, n, [99.99])
    slow = sum(c for i, c in enumerate(hist) if index_to_value(i) > SLOW_NS) / n
    return n, mean, (p[0][1] / 1e3 if p else float("nan")), slow


def die_busy(spec: dict[str, Any], timing: Any, nand_bytes: int, seconds: float) -> float:
    """Share of the time an average die spends programming: NAND bytes in program units of
    all planes x page x bits, tPROG each, over dies x the run."""
    n = spec["nand"]
    unit = n["planes_per_die"]["value"] * n["page_bytes"]["value"] * n["bits_per_cell"]["value"]
    dies = n["channels"]["value"] * n["dies_per_channel"]["value"]
    t_prog = (timing or spec["timing"])["t_prog_ns"]["value"] * 1e-9
    return float(nand_bytes / unit * t_prog / (dies * seconds))


def parse_value(text: str) -> Any:
    if text in ("true", "false"):
        return text == "true"
    try:
        return int(text)
    except ValueError:
        return float(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--scale", default="1/64")
    ap.add_argument("--runtime", type=float, default=20.0, help="seconds of simulated time per element")
    ap.add_argument("--qd", default="1,4")
    ap.add_argument("--bs", default="4k,8k")
    ap.add_argument("--mixes", default="100,65,0")
    ap.add_argument("--set", action="append", default=[], metavar="PARAM=VALUE")
    ap.add_argument("--state", choices=("wipc", "rand"), default="wipc", help="rand: then 4 KiB random writes over 2x (steady state)")
    ap.add_argument("--rand-passes", type=float, default=2.0, help="with --state rand: namespaces of 4 KiB random writes")
    ap.add_argument("--ps", type=int, default=0, help="power state (Set Features 02h)")
    ap.add_argument("--work", default=None, help="directory for the preconditioned images (kept; reused)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    work = Path(a.work or tempfile.mkdtemp(prefix="latency-mix-"))
    work.mkdir(parents=True, exist_ok=True)
    overrides = {}
    for s in a.set:
        k, sep, v = s.partition("=")
        if not sep:
            print(f"latency_mix: error: --set {s}: expected PARAM=VALUE", file=sys.stderr)
            return 2
        try:
            overrides[k] = parse_value(v)
        except ValueError:
            print(f"latency_mix: error: --set {s}: {v!r} is not a number, true or false", file=sys.stderr)
            return 2
    rows = []
    if not a.json:
        state = "WIPC" if a.state == "wipc" else f"WIPC + {a.rand_passes:g}x 4 KiB random"
        print(f"TC1, {a.runtime:g} s per element after {state}, {a.scale}, ps{a.ps}, overrides {overrides or 'none'}; latencies in us")
        cols = ["drive", "bs", "QD", "R/W mix", "read mean", "read 99.99 %", "write mean", "write 99.99 %", "all mean"]
        cols += ["die programming", "WAF", "reads > 0.5 ms"]
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
    for model in a.models.split(","):
        tag = a.state if a.state == "wipc" or a.rand_passes == 2.0 else f"rand{a.rand_passes:g}"
        base = work / f"{model}-{a.scale.replace('/', '_')}-{tag}"
        if not (base / "spec.toml").exists():
            with Drive.create(base, model, scale=a.scale) as d:
                d.precondition(1, "seq", 131072, loops=2, seed=1)
                if a.state == "rand":
                    d.precondition(1, "rand", 4096, loops=a.rand_passes, seed=1)
                d.commit()
        timing: Any = None
        for bs in a.bs.split(","):
            for qd in (int(q) for q in a.qd.split(",")):
                for mix in (int(m) for m in a.mixes.split(",")):
                    run_dir = work / "run"
                    shutil.rmtree(run_dir, ignore_errors=True)
                    shutil.copytree(base, run_dir)
                    with Drive.open(run_dir) as d:
                        if overrides and timing is None:
                            timing = copy.deepcopy(d.spec()["timing"])
                            for k, v in overrides.items():
                                if k not in timing:
                                    print(f"latency_mix: error: --set {k}: not a [timing] parameter", file=sys.stderr)
                                    return 2
                                timing[k]["value"] = v
                        if a.ps:
                            d.nvme.set_feature(2, a.ps)
                        v0 = d.vendor_log()
                        out = run_on_ns1(d, parse_string(job(bs, qd, mix, a.runtime), name="lat.fio"), timing)
                        v1 = d.vendor_log()
                        busy = die_busy(d.spec(), timing, v1["nand_write_bytes"] - v0["nand_write_bytes"], a.runtime)
                        dh = v1["host_write_bytes"] - v0["host_write_bytes"]
                        waf = (v1["nand_write_bytes"] - v0["nand_write_bytes"]) / dh if dh else float("nan")
                    shutil.rmtree(run_dir)
                    nr, rm, r99, rslow = stats(out, "read")
                    nw, wm, w99, _ = stats(out, "write")
                    allm = ((rm * nr if nr else 0) + (wm * nw if nw else 0)) / (nr + nw)
                    rows.append(dict(model=model, bs=bs, qd=qd, mix=f"{mix}/{100 - mix}", reads=nr, writes=nw,
                                     read_mean_us=rm, read_p9999_us=r99, write_mean_us=wm, write_p9999_us=w99, all_mean_us=allm,
                                     die_program_busy=busy, waf=waf, reads_over_500us=rslow))  # fmt: skip
                    if not a.json:
                        r = rows[-1]
                        cells = [model, bs, qd, r["mix"]] + [f"{x:,.1f}" if x == x else "–" for x in (rm, r99, wm, w99, allm)]
                        cells += [f"{100 * busy:.2f} %", f"{waf:.2f}" if waf == waf else "–", f"{100 * rslow:.2f} %" if nr else "–"]
                        print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)
    if a.json:
        print(json.dumps({"overrides": overrides, "runtime_s": a.runtime, "scale": a.scale, "ps": a.ps, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
