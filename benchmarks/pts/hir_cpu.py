"""Run ``ssdtwin pts ...`` in this process and print, on stderr at exit, the CPU seconds of
its parts as one JSON line: the pre-HIR rounds' and the bursts' fio runs (``pre.run_fio``,
``burst.run_fio``; of which ``*.engine`` is the core's run with the job's parsing and the WAF
read-out, ``*.render`` fio's JSON), the idle waits (``idle``) and the process (``total``);
each as [CPU seconds, calls]. docs/performance.md, "Where HIR's CPU goes".

usage: PYTHONPATH=python python3 benchmarks/pts/hir_cpu.py pts run IMG --tests hir --hir-reps 24 -q --no-render --report REP
"""

import atexit
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable

from ssdtwin.commands.entry import main
from ssdtwin.fio import run as fiorun
from ssdtwin.pts import twin

acc: dict[str, list[float]] = {}
kind = ["?"]  # what runs now: "pre" (a 60 s round) or "burst" (a HIR burst: its name ends "-5s")


def add(key: str, seconds: float) -> None:
    a = acc.setdefault(key, [0.0, 0])
    a[0] += seconds
    a[1] += 1


def timed(key: Callable[[], str], f: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t = time.process_time()
        try:
            return f(*args, **kwargs)
        finally:
            add(key(), time.process_time() - t)

    return wrapper


run_fio = twin.TwinTarget.run_fio


def run_fio_kind(self: twin.TwinTarget, job_path: Path, json_path: Path) -> Any:
    kind[0] = "burst" if "-5s" in json_path.name else "pre"
    return run_fio(self, job_path, json_path)


twin.TwinTarget.run_fio = timed(lambda: kind[0] + ".run_fio", run_fio_kind)  # type: ignore[method-assign]
twin.TwinTarget.idle = timed(lambda: "idle", twin.TwinTarget.idle)  # type: ignore[method-assign]
fiorun.run_jobs = timed(lambda: kind[0] + ".engine", fiorun.run_jobs)
fiorun.run_jobs_converging = timed(lambda: kind[0] + ".engine", fiorun.run_jobs_converging)
fiorun.render = timed(lambda: kind[0] + ".render", fiorun.render)


@atexit.register
def report() -> None:
    parts = {k: [round(v[0], 3), int(v[1])] for k, v in acc.items()}
    print(json.dumps({"total": round(time.process_time(), 3), **parts}), file=sys.stderr)


sys.argv = ["ssdtwin", *sys.argv[1:]]
main()
