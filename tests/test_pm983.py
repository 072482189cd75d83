"""The PM983 preset's NAND physics (docs/models.md §11.10).

Its dies program at the 970 EVO's per-die TLC rate (the same 64-layer 256 Gb die on the same
Phoenix controller: 300, 600 and 1,200 MB/s on 8, 16 and 32 dies, Techgage 970 EVO 2018), and
its 128 dies together program faster than its PCIe Gen3 link carries, and its back end (the NF1
PM983's 2,000 MB/s, [ASSUMED] for this SKU) binds below both: a fresh drive's sequential write
is the back end's, the link's once the back end is lifted, and the dies' once both are.
"""

from __future__ import annotations

import re

import pytest

from ssdtwin import _core
from ssdtwin.drive import Drive
from ssdtwin.studies import experiments

PM983 = "samsung-pm983-3.84t"
SCALE = 256
# The 970 EVO's sequential write straight to TLC past its SLC cache, MB/s, by its die count
# (250 GB, 500 GB, 1 TB: 8, 16, 32 dies of 256 Gb).
EVO_TLC_WRITE = {8: 300e6, 16: 600e6, 32: 1200e6}
SEQ_WRITE = "[w]\nioengine=libaio\ndirect=1\nrw=write\nbs=128k\niodepth=16\ntime_based\nramp_time=100ms\nruntime=400ms\n"


def _program_rate(spec: dict) -> float:
    """Bytes per second one die programs: its program unit over t_prog."""
    n = spec["nand"]
    unit = n["planes_per_die"]["value"] * n["page_bytes"]["value"] * n["bits_per_cell"]["value"]
    return unit / (spec["timing"]["t_prog_ns"]["value"] * 1e-9)


def test_pm983_dies_program_at_the_970_evo_rate_per_die() -> None:
    d = Drive.in_memory(PM983, scale=SCALE, seed=1)
    spec = d.spec()
    rate = _program_rate(spec)
    for dies, bytes_per_s in EVO_TLC_WRITE.items():
        assert rate == pytest.approx(bytes_per_s / dies, rel=0.001), dies
    # 4 TiB of 256 Gb dies, and no die-level parity taken from the data pool.
    n = spec["nand"]
    assert n["channels"]["value"] * n["dies_per_channel"]["value"] == (4 << 40) // (256 << 30 >> 3)
    assert d.ftl_info()["dies"] == 128
    assert spec["ftl"]["die_parity"]["value"] is False
    d.close()


def _seq_write_bytes_per_s(spec_toml: str) -> float:
    d = Drive.in_memory(scale=SCALE, seed=1, spec_toml=spec_toml)
    m = experiments.run_job(d, SEQ_WRITE, "seq-write.fio")
    d.close()
    return m.mb_s * 1e6


def _lifted(toml: str, key: str, value: int) -> str:
    out, n = re.subn(rf"(?m)^{key} = \{{ value = \d+", f"{key} = {{ value = {value}", toml)
    assert n == 1, key
    return out


def test_pm983_sequential_write_is_bound_by_its_back_end_then_its_link_then_its_dies() -> None:
    d = Drive.in_memory(PM983, scale=SCALE, seed=1)
    spec, dies = d.spec(), d.ftl_info()["dies"]
    d.close()
    toml = dict(_core.presets())[PM983]
    back_end = spec["timing"]["ctrl_backend_bytes_per_s"]["value"]
    link = spec["timing"]["host_link_bytes_per_s"]["value"]
    nand = dies * _program_rate(spec)
    channels = spec["nand"]["channels"]["value"] * spec["timing"]["channel_bytes_per_s"]["value"]
    assert 0 < back_end < link < nand < channels
    # The preset as it is: the back end binds.
    assert _seq_write_bytes_per_s(toml) == pytest.approx(back_end, rel=0.03)
    # No back end (0 turns the stage off): the link binds.
    no_back_end = _lifted(toml, "ctrl_backend_bytes_per_s", 0)
    assert _seq_write_bytes_per_s(no_back_end) == pytest.approx(link, rel=0.03)
    # The link lifted far above the dies too: the dies bind, at their summed program rate.
    lifted = _lifted(no_back_end, "host_link_bytes_per_s", 100_000_000_000)
    assert _seq_write_bytes_per_s(lifted) == pytest.approx(nand, rel=0.05)
