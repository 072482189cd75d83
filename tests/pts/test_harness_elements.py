"""Every PTS element's job text (ssdtwin.pts.tests) runs on the twin as written, with the
PTS options the SNIA PTS implementations pass (docs/sources.md), and the fio JSON parses into the rounds.csv row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ssdtwin import Drive
from ssdtwin.fio.run import render, run_jobs
from ssdtwin.pts import measurements
from ssdtwin.pts import tests as T
from ssdtwin.pts.target import PtsError

MODEL = "kioxia-cm6-v-3.2t"


def every_element(runtime_s: float) -> list[T.Element]:
    tc = T.TC_QD
    els = list(T.iops_pass(T.IOPS_BS, T.MIXES, *tc["iops"], runtime_s).elements)
    for p in T.tp_passes(T.TP_BS, *tc["tp"], runtime_s):
        els += [*p.elements, p.wipc] if p.wipc else list(p.elements)
    els += T.lat_pass(T.LAT_BS, T.LAT_MIXES, *tc["lat"], runtime_s).elements
    els += [T.wsat_element(*tc["wsat"], runtime_s), T.hir_element(*tc["hir"], runtime_s)]
    els += T.curve_elements(T.CURVE_JOBS, T.CURVE_QD, runtime_s)
    return els


def test_the_matrix_is_the_specs() -> None:
    iops = T.iops_pass(T.IOPS_BS, T.MIXES, 4, 32, 60).elements
    assert len(iops) == 56 and iops[0].name == "rnd-1m-100_0" and iops[-1].name == "rnd-512-0_100"
    assert [t.element for t in T.iops_pass(T.IOPS_BS, T.MIXES, 4, 32, 60).tracking] == ["rnd-4k-0_100", "rnd-64k-65_35", "rnd-1m-100_0"]
    assert len(T.lat_pass(T.LAT_BS, T.LAT_MIXES, 1, 1, 60).elements) == 9
    assert len(T.curve_elements(T.CURVE_JOBS, T.CURVE_QD, 60)) == 30
    assert [p.wipc.name for p in T.tp_passes(T.TP_BS, 1, 32, 60) if p.wipc] == ["wipc", "wipc-1m"]


def test_job_text_has_the_pts_options() -> None:
    text = T.rnd(4096, 65, 4, 32, 60).job_text("ioengine=nbd\nuri=nbd://h/ns1", "IOPS")
    lines = text.splitlines()
    for opt in ("direct=1", "size=100%", "refill_buffers=1", "group_reporting=1", "randrepeat=0", "norandommap=1"):
        assert opt in lines, opt
    assert "random_generator=tausworthe64" in lines and "time_based=1" in lines and "runtime=60" in lines
    assert lines.index("ioengine=nbd") > lines.index("ioengine=libaio")  # the target's engine wins
    assert lines[-5:] == ["rw=randrw", "rwmixread=65", "bs=4k", "numjobs=4", "iodepth=32"]
    wipc = T.wipc().job_text("", "IOPS").splitlines()
    assert "loops=2" in wipc and "rw=write" in wipc and "bs=128k" in wipc and not any(x.startswith("runtime") for x in wipc)
    assert T.fio_seconds(0.5) == "500ms" and T.fio_seconds(60.0) == "60"


def test_every_element_runs_on_the_twin(tmp_path: Path) -> None:
    d = Drive.in_memory(MODEL, scale=454)
    seen = set()
    for el in every_element(0.005):
        text = el.job_text("", "test")
        if text in seen:
            continue
        seen.add(text)
        if el.runtime_s is None:  # WIPC: a size-based pass over the whole range
            continue
        job = tmp_path / f"{el.name}.fio"
        job.write_text(text)
        notes: list[str] = []
        run, results = run_jobs(d, [str(job)], run_seed=1, notes=notes.append)
        assert not [n for n in notes if n.startswith("warning")], (el.name, notes)
        row, hists = measurements.fio_row(json.loads(render(run, results, "json+")))
        assert row["iops"] > 0 and row["lat_mean_us"] > 0, el.name
        assert (row["read_iops"] > 0) == (el.read_pct > 0) and (row["write_iops"] > 0) == (el.read_pct < 100), el.name
        assert sum(hists["read"].values()) + sum(hists["write"].values()) > 0
    assert len(seen) == 56 + 4 + 2 + 9 + 30  # IOPS, TP, its WIPCs, LAT, curve; WSAT's and HIR's are IOPS's rnd-4k-0_100
    d.close()


def test_parse_tests() -> None:
    assert T.parse_tests("lat, iops,lat") == ["lat", "iops"]
    assert T.parse_tests("all") == list(T.TEST_IDS)
    assert T.parse_tests("xsr,CBW, dirth") == ["xsr", "cbw", "dirth"]
    with pytest.raises(PtsError, match="unknown test 'ecw'"):
        T.parse_tests("iops,ecw")
    with pytest.raises(PtsError, match="name at least one"):
        T.parse_tests(" , ")
