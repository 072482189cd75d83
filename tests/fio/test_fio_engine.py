"""Engine input (Run.to_engine, docs/fio.md §3) and the fake engine's output (§4)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fio_fake_engine import run as fake_run

from shape import mismatches
from ssdtwin.fio import FioJobError, parse_string
from ssdtwin.fio.contract import CloneOut
from ssdtwin.fio.engine import effective_bssplit

MiB = 1 << 20
DOCS = Path(__file__).resolve().parents[2] / "docs" / "fio.md"


def specs(body: str, size: int = 8 * MiB, lba: int = 512, **kw: Any) -> list[dict[str, Any]]:
    run = parse_string("[global]\nioengine=libaio\nfilename=ns1\n" + body, env={})
    return run.to_engine(size, lba, **kw)


def one(body: str, **kw: Any) -> dict[str, Any]:
    out = specs("[j]\n" + body, **kw)
    assert len(out) == 1
    return out[0]


# Region arithmetic measured with fio-3.33 on an 8 MiB file (first/last offsets of a
# per-I/O bw log with log_offset=1; docs/fio.md §2.4).
@pytest.mark.parametrize(
    "body,offset,size,io_size",
    [
        ("size=50%\noffset=25%", 2 * MiB, 4 * MiB, 4 * MiB),
        ("size=25%\noffset=50%", 4 * MiB, 2 * MiB, 2 * MiB),
        ("size=30%\noffset=10%\nbs=64k", 851968, 2490368, 2490368),
        ("offset=25%\nbs=64k,16k\nsize=1m", 2 * MiB, MiB, MiB),
        ("offset=10%\noffset_align=1m\nsize=1m", MiB, MiB, MiB),
        ("size=30%\noffset=10%\nbs=64k\noffset_align=0", 851968, 2490368, 2490368),  # 0: fio's default
        ("io_size=50%\nsize=2m", 0, 2 * MiB, MiB),
        ("size=2m\nio_size=3m", 0, 2 * MiB, 3 * MiB),
        ("offset=1m", MiB, 7 * MiB, 7 * MiB),
        ("", 0, 8 * MiB, 8 * MiB),
        ("size=100%\noffset=1000", 1000, 8 * MiB - 1000, 8 * MiB - 1000),
        ("fill_device=1\noffset=1m", MiB, 7 * MiB, 7 * MiB),
    ],
)
def test_region_matches_fio(body: str, offset: int, size: int, io_size: int) -> None:
    e = one(body + "\n", lba=8)
    assert (e["offset_bytes"], e["size_bytes"], e["io_size_bytes"]) == (offset, size, io_size)


def test_offset_increment_per_clone_in_fio_order() -> None:
    out = specs("[j]\nrw=write\nbs=256k\nsize=256k\nnumjobs=4\noffset_increment=1m\n")
    # measured: threads 1..4 wrote at 0, 3m, 2m, 1m
    assert [(e["thread_number"], e["subjob"], e["offset_bytes"]) for e in out] == [(1, 0, 0), (2, 3, 3 * MiB), (3, 2, 2 * MiB), (4, 1, MiB)]


def test_offset_increment_percent_is_aligned_up() -> None:
    out = specs("[j]\nrw=write\nbs=64k\nsize=1m\nnumjobs=2\noffset_increment=10%\n")
    assert [e["offset_bytes"] for e in out] == [0, 851968]  # measured: 838860 rounded up to 64k


def test_namespaces() -> None:
    run = parse_string("[a]\nfilename=ns2\nsize=50%\n[b]\nfilename=/dev/nvme0n1\n[c]\nfilename=/tmp/x\n", env={})
    out = run.to_engine(100 * MiB, 4096, namespace_sizes={1: 10 * MiB, 2: 20 * MiB})
    assert [(e["namespace"], e["target_size_bytes"], e["size_bytes"]) for e in out] == [
        (2, 20 * MiB, 10 * MiB),
        (1, 10 * MiB, 10 * MiB),
        (None, 100 * MiB, 100 * MiB),
    ]
    with pytest.raises(FioJobError, match="namespace 3 does not exist") as info:
        parse_string("[a]\nfilename=ns3\n", env={}).to_engine(MiB, 512, namespace_sizes={1: MiB})
    assert info.value.option == "filename" and info.value.line == 2


def test_region_past_the_end_and_lba_alignment_are_errors() -> None:
    with pytest.raises(FioJobError, match="runs past the end") as info:
        specs("[j]\noffset=7m\nsize=2m\n")
    assert info.value.option == "size"
    with pytest.raises(FioJobError, match="offset .* is beyond the end"):
        specs("[j]\noffset=9m\n")
    with pytest.raises(FioJobError, match="not multiples of the 4096-byte LBA") as info:
        specs("[j]\nrw=randread\nbs=512\n", lba=4096)
    assert info.value.option == "bs"
    with pytest.raises(FioJobError, match="offset 1000 is not a multiple"):
        specs("[j]\noffset=1000\n")
    # kb_base=1000 makes 4k a 4000-byte block: refused (fio's I/O fails with EINVAL)
    with pytest.raises(FioJobError, match="4000"):
        specs("[j]\nkb_base=1000\nbs=4k\n")


def test_all_errors_of_a_run_are_reported() -> None:
    run = parse_string("[a]\nfilename=ns1\noffset=1000\n[b]\nfilename=ns1\nbs=100\n", env={})
    with pytest.raises(FioJobError) as info:
        run.to_engine(MiB, 512)
    assert len(info.value.errors) == 2


@pytest.mark.parametrize(
    "split,unaligned,expected",
    [
        ([[4096, 30], [8192, 30]], False, [[4096, 30], [8192, 70]]),  # measured 6035/13965
        ([[4096, 80], [8192, 80]], False, [[4096, 80], [8192, 20]]),  # measured 15984/4016
        ([[4096, 50], [6144, 50]], False, [[4096, 100]]),  # measured: all 4 KiB
        ([[4096, 50], [6144, 50]], True, [[4096, 50], [6144, 50]]),
        ([[4096, 60], [8192, 20], [16384, 20]], False, [[8192, 20], [16384, 20], [4096, 60]]),  # measured 11953/3963/4084
        ([[8192, 50], [4096, 50]], False, [[8192, 50], [4096, 50]]),
        ([[4096, 10], [8192, 45], [16384, 45]], False, [[4096, 10], [8192, 45], [16384, 45]]),
        ([[4096, 0], [8192, 100]], False, [[8192, 100]]),
    ],
)
def test_effective_bssplit(split: list[list[int]], unaligned: bool, expected: list[list[int]]) -> None:
    sizes = [s for s, _ in split]
    got = effective_bssplit(split, min(sizes), max(sizes), unaligned)
    assert got == expected
    assert sum(p for _, p in got) == 100


def test_block_sizes_per_direction() -> None:
    e = one("rw=randrw\nbssplit=4k/50:64k/50,8k\n")
    assert e["bs"]["read"] == {"min": 4096, "max": 65536, "split": [[4096, 50], [65536, 50]]}
    assert e["bs"]["write"] == {"min": 8192, "max": 8192, "split": [[8192, 100]]}
    e = one("bsrange=4k-16k\n")
    assert e["bs"]["read"] == {"min": 4096, "max": 16384, "split": None}
    e = one("bs=8k\n")
    assert e["bs"]["trim"] == {"min": 8192, "max": 8192, "split": [[8192, 100]]}


def test_blockalign_only_for_random_and_turns_off_the_map() -> None:
    assert one("rw=write\nba=8k\n")["blockalign"]["write"] == 4096
    e = one("rw=randwrite\nba=8k\n")
    assert e["blockalign"]["write"] == 8192 and e["norandommap"] is True
    assert one("rw=randwrite\n")["norandommap"] is False
    assert one("rw=randread\nrandom_distribution=zipf:1.2\n")["norandommap"] is True


def test_queue_depth_and_engine_flags() -> None:
    e = one("ioengine=psync\niodepth=16\n")
    assert (e["iodepth"], e["iodepth_configured"], e["engine_async"]) == (1, 16, False)
    e = one("iodepth=16\n")
    assert (e["iodepth"], e["engine_async"]) == (16, True)


def test_times_are_nanoseconds() -> None:
    e = one("time_based\nruntime=2m\nramp_time=500ms\nstartdelay=3\nthinktime=250\nthinktime_spin=100\nthinktime_blocks=8\n")
    assert e["time_based"] is True and e["runtime_ns"] == 120_000_000_000 and e["ramp_time_ns"] == 500_000_000
    assert e["startdelay_ns"] == 3_000_000_000
    assert (e["thinktime_ns"], e["thinktime_spin_ns"], e["thinktime_blocks"]) == (250_000, 100_000, 8)


def test_rates_and_mix() -> None:
    e = one("rw=randrw\nrwmixread=70\nrate=1m,2m\nrate_process=poisson\npercentage_random=50\n")
    assert (e["rwmixread"], e["rwmixwrite"]) == (70, 30)
    assert e["rate_bytes_per_s"] == {"read": MiB, "write": 2 * MiB, "trim": 2 * MiB}
    assert e["rate_iops"] == {"read": 0, "write": 0, "trim": 0}
    assert e["rate_process"] == "poisson" and e["percentage_random"] == {"read": 50, "write": 50, "trim": 50}
    assert e["directions"] == ["read", "write"] and e["random"] is True
    assert one("rw=trimwrite\n")["directions"] == ["trim", "write"]


def test_distribution_and_zones() -> None:
    e = one("rw=randread\nrandom_distribution=zoned:50/5:30/15:20/80\n")
    assert e["random_distribution"]["kind"] == "zoned"
    assert e["random_distribution"]["zones"]["read"][0] == {"access_pct": 50, "range_pct": 5}
    e = one("rw=randread\nrandom_distribution=pareto:0.2:0.5\n")
    assert e["random_distribution"] == {"kind": "pareto", "param": 0.2, "center": 0.5, "zones": None}


def test_log_requests_and_averaging_windows() -> None:
    e = one("write_bw_log=x\nwrite_lat_log\nlog_avg_msec=1000\n")
    assert e["logs"] == {
        "bw": True,
        "iops": False,
        "lat": True,
        "hist": False,
        "avg_ms": 1000,
        "hist_ms": 0,
        "max_value": False,
        "offset": False,
    }
    assert (e["bw_avg_ms"], e["iops_avg_ms"]) == (1000, 500)
    e = one("write_bw_log=x\nlog_avg_msec=1000\nbwavgtime=250\n")
    assert e["bw_avg_ms"] == 250  # the smaller one when bwavgtime is given (init.c)
    e = one("write_iops_log=x\n")
    assert e["iops_avg_ms"] == 500  # per-I/O log: we keep the default window (documented)
    # fio-3.33 accepts 0 (was refused here): a sample each 250 ms helper-thread tick.
    e = one("bwavgtime=0\niopsavgtime=0\n")
    assert (e["bw_avg_ms"], e["iops_avg_ms"]) == (250, 250)


def test_engine_input_is_json_and_matches_the_documented_keys() -> None:
    e = one("rw=randrw\n")
    assert json.loads(json.dumps(e)) == e
    documented = re.findall(r"^\| `([a-z_]+)` \|", DOCS.read_text().split("## 3.", 1)[1].split("## 4.", 1)[0], re.M)
    # `replay` is there only for read_iolog jobs (tests/test_fio_iolog.py).
    assert sorted(documented) == sorted([*e.keys(), "replay"])


def test_the_api_block_imports_every_module_it_calls() -> None:
    """docs/fio.md §1: its `from ssdtwin.fio import ...` lines run, and every `module.function(`
    the block calls on a name it does not assign itself is imported and exists (the block once
    called iolog.* without importing iolog)."""
    block = DOCS.read_text().split("```python\n", 1)[1].split("```", 1)[0]
    names: dict[str, Any] = {}
    exec("\n".join(line for line in block.splitlines() if line.startswith("from ")), names)
    assigned = set(re.findall(r"^(\w+)(?:, \w+)* = ", block, re.M))
    calls = re.findall(r"(?:^|;\s+)([a-z_]+)\.([a-z_]+)\(", block, re.M)
    assert {m for m, _ in calls} >= {"output", "logs", "iolog", "hist"}
    for module, function in calls:
        if module not in assigned:
            assert module in names, f"docs/fio.md §1 calls {module}.{function} without importing {module}"
            assert callable(getattr(names[module], function, None)), f"{module}.{function}"


def test_seed_is_exposed_per_clone() -> None:
    out = specs("[j]\nrw=randread\nnumjobs=2\n")
    assert out[0]["seed"] == 0xB1899BED and out[1]["seed"] == 2 * 0xB1899BED
    assert set(out[0]["seeds"]) >= {"offset", "rwmix", "bs_read", "bs_write", "bs_trim", "start_delay"}


def test_batches_follow_stonewalls() -> None:
    out = specs("[a]\nnumjobs=2\n[b]\nstonewall\n[c]\n[d]\nstonewall\n")
    assert [(e["name"], e["batch"], e["stonewall"]) for e in out] == [
        ("a", 0, False),
        ("a", 0, False),
        ("b", 1, True),
        ("c", 1, False),
        ("d", 2, True),
    ]


# --- engine output -------------------------------------------------------------------------


@pytest.mark.parametrize("body", ["rw=randrw\ntime_based\nruntime=1\n", "rw=write\nss=iops:5%\nss_dur=1\nwrite_lat_log=l\n"])
def test_fake_engine_output_has_the_engines_type(body: str) -> None:
    """The output tests feed the fake engine's results where the Rust engine's go: they must
    be of the same type (tests/test_binding_types.py checks the Rust engine's)."""
    (result,) = fake_run([one(body)], seconds=1)
    assert mismatches(result, CloneOut, "CloneOut") == []


# --- fio's generators bit for bit (docs/fio.md §3) -------------------------------------------


def test_generator_fields_follow_fio() -> None:
    e = one("rw=randwrite\nbssplit=64k/20:4k/50:8k/\nsize=4m\n")
    # options.c bssplit_ddir: blanks share the rest, entries sorted by percentage (stable).
    assert e["bssplit_fio"]["write"] == [[64 * 1024, 20], [8192, 30], [4096, 50]]
    assert e["randrepeat"] is True and e["io_size_set"] is False
    e = one("rw=randread\nrandseed=7\nio_size=16m\nsize=4m\n")
    assert e["randrepeat"] is False, "an explicit randseed turns randrepeat off at run time"
    assert e["io_size_set"] is True
    e = one("rw=read:-8k\nsize=4m\n")
    assert (e["rw_seq_add_signed"], e["rw_seq_add_bytes"]) == (-8192, 0)
    e = one("rw=write\nzonemode=strided\nzonesize=64k\nzoneskip=1m\n")
    assert (e["zone_size_bytes"], e["zone_range_bytes"], e["zone_skip_bytes"]) == (65536, 65536, MiB)
    assert one("rw=write\n")["zone_size_bytes"] == 0


def test_zonesize_without_strided_zonemode_is_refused() -> None:
    with pytest.raises(FioJobError) as info:
        one("rw=write\nzonesize=64k\n")
    assert "zonemode=none and zonesize" in str(info.value)
    with pytest.raises(FioJobError) as info:
        one("rw=write\nzonemode=strided\n")
    assert "needs zonesize" in str(info.value)
