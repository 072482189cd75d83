"""Physics: the simulated FTL against the closed-form models (docs/models.md §2; docs/sources.md).

(1) uniform 4 KiB random writes on a 4 KiB-IU drive reach a steady-state WAF within 5 %
    of the greedy/FIFO Lambert-W model at OP 7, 20, 28 and 50 %;
(4) --scale 1/64 and 1/16 give the same steady-state WAF within 2 %;
and the IU read-modify-write multiplier of a 64 KiB-IU drive (P5316): 4 KiB random writes
cost 16x the NAND writes of 64 KiB random writes, sequential writes cost the same.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import pytest
from scipy.special import lambertw

from ssdtwin import _core
from ssdtwin.drive import Drive
from ssdtwin.studies.calibrate import measure_figures, prepare_images
from ssdtwin.studies.corners import Corner
from ssdtwin.studies.experiments import measure_corner
from twin import CM6, P5316

# --------------------------------------------------------------------------- oracles


def fifo_ref(alpha: float) -> float:
    """Desnoyers 2012, Eq. 4 (= Xiang & Kurkoski 2011), with scipy's Lambert W."""
    return alpha / (alpha + lambertw(-alpha * math.exp(-alpha)).real)


def greedy_ref(alpha: float, np_: float = 10**6) -> float:
    k = 1 + 1 / (2 * np_)
    return fifo_ref(k * alpha) / k


@pytest.mark.parametrize(
    "alpha, np_, expected",
    [
        (1.3, None, 2.36),  # waf_fifo(1.3) = 2.36 (Xiang & Kurkoski 2011)
        (1.07, 64, 7.00),  # waf_greedy(1.07, 64) = 7.00
        (1.28, 10**6, 2.48),  # waf_greedy(1.28) = 2.48
        (1.07, None, 7.82),
        (1.5, None, 1.72),
    ],
)
def test_oracle_values_of_the_closed_forms(alpha: float, np_: int | None, expected: float) -> None:
    ours = _core.waf_greedy(alpha) if np_ is None else _core.waf_greedy(alpha, np_)
    ref = fifo_ref(alpha) if np_ is None else greedy_ref(alpha, np_)
    assert ours == pytest.approx(expected, abs=0.005 if expected < 3 else 0.01)
    assert ours == pytest.approx(ref, rel=1e-9)


def test_core_lambert_w_matches_scipy_over_the_op_range() -> None:
    for op in [0.02, 0.07, 0.145, 0.2, 0.28, 0.374, 0.5, 1.0, 3.0]:
        a = 1 + op
        assert _core.waf_greedy(a) == pytest.approx(fifo_ref(a), rel=1e-9), op
        assert _core.waf_greedy(a, 3072.0) == pytest.approx(greedy_ref(a, 3072.0), rel=1e-9), op
    # WAF falls as OP grows, and tends to 1 for a nearly empty drive.
    wafs = [_core.waf_greedy(1 + op) for op in (0.07, 0.2, 0.28, 0.5, 2.0, 9.0)]
    assert wafs == sorted(wafs, reverse=True)
    assert wafs[-1] == pytest.approx(1.0, abs=0.01)


def test_waf_greedy_rejects_alpha_at_or_below_one() -> None:
    for bad in (1.0, 0.5, -2.0):
        with pytest.raises(ValueError, match="alpha must exceed 1"):
            _core.waf_greedy(bad)


def test_waf_greedy_rejects_non_finite_alpha_and_units_per_block() -> None:
    # Each of these reached lambert_w0(NaN) and panicked (PanicException, not an Exception).
    with pytest.raises(ValueError, match="alpha must be finite"):
        _core.waf_greedy(math.inf)
    for bad in (0.0, math.nan, 0.5, -1.0, -0.5, math.inf, -math.inf):
        with pytest.raises(ValueError, match="units_per_block must be a finite number of at least 1"):
            _core.waf_greedy(2.0, bad)
    assert math.isfinite(_core.waf_greedy(2.0, 1.0)) and _core.waf_greedy(1.07, 64.0) == pytest.approx(7.00, abs=0.01)


# --------------------------------------------------------------------------- helpers


def steady_random_waf(d: Drive, nsid: int, warm: float = 2.0, measure: float = 1.0, bs: int = 4096) -> float:
    """Sequential 128k fill, `warm` x random warm-up, then WAF measured over `measure` x.

    The WAF is steady after one random pass. Its error against the model per pass (1 to 5)
    after the fill, on the Lambert-W test's 1/64 drives: OP 7 % -4.65, +0.71, +0.79, +0.68,
    +0.64 %; OP 50 % -14.50, -0.31, -0.14, +0.12, +0.33 % (OP 20 and 28 % alike); 1/128
    against 1/32 per pass from the second: -0.62, -0.72, -0.27, -0.99 %. Two passes of
    warm-up and one measured (1/128 against 1/32: -0.77 %) keep both tests' margins with 3/5
    of the random writes of three and two (docs/performance.md, "CI time")."""
    d.precondition(nsid, "seq", 131072, loops=1.0, seed=1)
    d.precondition(nsid, "rand", bs, loops=warm, seed=2)
    v0 = d.vendor_log()
    r = d.precondition(nsid, "rand", bs, loops=measure, seed=3)
    v1 = d.vendor_log()
    # The report and the vendor log must tell the same story.
    dh = v1["host_write_bytes"] - v0["host_write_bytes"]
    dn = v1["nand_write_bytes"] - v0["nand_write_bytes"]
    assert dh == r.host_bytes and dn == r.nand_bytes
    return r.waf


def cm6_toml_with_tnvmcap(fraction_of_pool: float) -> str:
    """The CM6 preset with TNVMCAP raised to `fraction_of_pool` x the FTL data pool, so that
    namespaces of any OP from ~2 % up can be carved from it."""
    text = dict(_core.presets())[CM6]
    n = _core.preset(CM6)["nand"]
    v = {k: n[k]["value"] for k in ("channels", "dies_per_channel", "planes_per_die", "pages_per_block", "page_bytes", "blocks_per_plane")}
    superblock = v["channels"] * v["dies_per_channel"] * v["planes_per_die"] * v["pages_per_block"] * v["page_bytes"]
    f = _core.preset(CM6)["ftl"]
    overhead = f["gc_overhead_superblocks"]["value"] + f["gc_overhead_finite_size"]["value"] / v["blocks_per_plane"]
    pool = (v["blocks_per_plane"] - overhead) * superblock
    t = int(pool * fraction_of_pool) // 65536 * 65536
    new, n = re.subn(r"(?m)^tnvmcap_bytes = \{ value = \d+,", f"tnvmcap_bytes = {{ value = {t},", text)
    assert n == 1, "preset TOML layout changed: tnvmcap_bytes line not found"
    return new


# --------------------------------------------------------------------------- (1)


@pytest.mark.slow
@pytest.mark.parametrize("op", [0.07, 0.20, 0.28, 0.50])
def test_random_write_waf_matches_lambert_w(op: float) -> None:
    """Steady-state WAF within 5 % of the greedy-GC model (docs/models.md §2, Lambert W) at
    OP 7/20/28/50 % (CM6 geometry, 1/128 scale: 18 superblocks). OP is set the NVMe way: a
    smaller namespace leaves the rest as spare.

    The errors at 1/128 are -0.87, -0.08, +0.33, -0.06 %, as small as at 1/64 (+0.82, +0.23,
    +0.07, -0.16 %) for half the writes; at 1/256 (11 superblocks) the finite drive shows
    at OP 7 % (-4.72 %), so 1/128 is the smallest scale with the 5 % bound's margin."""
    toml = cm6_toml_with_tnvmcap(0.98)
    d = Drive.in_memory(spec_toml=toml, scale=128, seed=11)
    pool = d.ftl_info()["data_pool_bytes"]
    ns_bytes = int(pool / (1 + op)) // 4096 * 4096
    d.nvme.detach_ns(1)
    d.nvme.delete_ns(1)
    nsid = d.nvme.create_ns(ns_bytes // 512, ns_bytes // 512, block_size=512)
    d.nvme.attach_ns(nsid)
    assert d.nvme.id_ctrl()["unvmcap"] == d.nvme.id_ctrl()["tnvmcap"] - ns_bytes
    waf = steady_random_waf(d, nsid)
    d.check()
    model = _core.waf_greedy(pool / ns_bytes)
    err = waf / model - 1
    print(f"OP {op:.0%}: simulated WAF {waf:.3f}, Lambert-W {model:.3f}, error {err:+.2%}")
    assert abs(err) < 0.05, f"OP {op:.0%}: WAF {waf:.3f} vs model {model:.3f} ({err:+.2%})"


# --------------------------------------------------------------------------- (4)


# The issue names 1/64 and 1/16; CI checks the same factor of 4 one step smaller (1/128 and
# 1/32, a third of the time), and `make physics-scale` runs the issue's own pair.
SCALE_PAIR = (64, 16) if os.environ.get("SSDTWIN_SCALE_PAIR") == "issue" else (128, 32)


@pytest.mark.slow
def test_scale_agreement_over_a_factor_of_4() -> None:
    """Scale agreement: the CM6 preset as shipped, uniform 4 KiB random writes, same
    steady-state WAF at two scales a factor of 4 apart (1/64 and 1/16 with `make
    physics-scale`) within 2 %."""
    small, large = SCALE_PAIR
    wafs = {}
    for scale in SCALE_PAIR:
        d = Drive.in_memory(CM6, scale=scale, seed=5)
        wafs[scale] = steady_random_waf(d, 1)
        d.close()
    diff = wafs[small] / wafs[large] - 1
    print(f"WAF at 1/{small} {wafs[small]:.3f}, at 1/{large} {wafs[large]:.3f}, difference {diff:+.2%}")
    assert abs(diff) < 0.02, wafs
    # Both sit near the closed form for the preset's own OP (~14.5 %: alpha = pool / tnvmcap).
    d = Drive.in_memory(CM6, scale=large)
    alpha = d.ftl_info()["data_pool_bytes"] / d.nvme.id_ctrl()["tnvmcap"]
    assert wafs[large] == pytest.approx(_core.waf_greedy(alpha), rel=0.05)


# --------------------------------------------------------------------------- P5316 (64 KiB IU)

# 1/256 leaves 8 superblocks of 18 GiB (4.4 of them data pool): about the smallest P5316
# the spec allows, and fast. The IU multiplier does not depend on the superblock count: 4 KiB and
# 64 KiB random writes both overwrite uniformly random IUs, so GC sees the same stream.
P5316_SCALE = 256


def test_p5316_4k_random_costs_16x_64k_random() -> None:
    d = Drive.in_memory(P5316, scale=P5316_SCALE, seed=3)
    assert d.ftl_info()["iu_bytes"] == 65536
    d.precondition(1, "seq", 131072, loops=1.0, seed=1)
    d.precondition(1, "rand", 65536, loops=2.0, seed=2)
    r64 = d.precondition(1, "rand", 65536, loops=1.0, seed=3)
    v0 = d.vendor_log()
    r4 = d.precondition(1, "rand", 4096, loops=0.25, seed=4)
    v1 = d.vendor_log()
    ratio = r4.waf / r64.waf
    print(f"P5316 1/{P5316_SCALE}: WAF 4k random {r4.waf:.2f}, 64k random {r64.waf:.3f}, ratio {ratio:.2f}")
    assert ratio == pytest.approx(16.0, rel=0.10)
    # Every 4 KiB write was a read-modify-write of a 64 KiB IU (the buffer rarely merges
    # uniformly random 4 KiB writes into the same IU).
    rmw = v1["rmw_ius"] - v0["rmw_ius"]
    assert rmw >= 0.97 * r4.ios
    assert v1["nand_read_rmw_bytes"] - v0["nand_read_rmw_bytes"] == rmw * 65536
    d.check()


def test_p5316_sequential_4k_costs_the_same_as_64k() -> None:
    wafs = {}
    for bs in (4096, 65536):
        d = Drive.in_memory(P5316, scale=P5316_SCALE, seed=3)
        first = d.precondition(1, "seq", bs, loops=1.0, seed=1)
        second = d.precondition(1, "seq", bs, loops=1.0, seed=1)
        # Consecutive 4 KiB writes fill whole IUs in the write buffer: no read-modify-write.
        assert d.vendor_log()["rmw_ius"] == 0
        assert first.waf == pytest.approx(1.0, abs=0.01)
        wafs[bs] = second.waf
        d.check()
    assert wafs[4096] / wafs[65536] <= 1.05, wafs


# --------------------------------------------------------------------------- CM6/CD6 family (docs/models.md §15)

CM6_V16, CM6_V32, CD6 = "kioxia-cm6-v-1.6t", "kioxia-cm6-v-3.2t", "kioxia-cd6-v-3.2t"


def program_bandwidth(model: str) -> tuple[int, float]:
    """(dies, bytes per second the dies program together): one unit of planes x page x bits
    per tPROG on each die, from the preset."""
    p = _core.preset(model)
    n, t = p["nand"], p["timing"]
    dies = n["channels"]["value"] * n["dies_per_channel"]["value"]
    unit = n["planes_per_die"]["value"] * n["page_bytes"]["value"] * n["bits_per_cell"]["value"]
    return dies, dies * unit / (t["t_prog_ns"]["value"] * 1e-9)


def test_cm6_sequential_writes_are_bound_by_their_dies() -> None:
    """The CM6-V 1.6 TB and 3.2 TB write sequentially at what their dies program: no stage
    above the dies (back end, write data path, link) binds either, so half the dies write
    half as fast. A back end at the large SKUs' 4.2 GB/s over faster dies would make the
    1.6 TB write two thirds as fast instead."""
    seq_write = {"seq-write": Corner("seq-write", 1.0, "")}
    written = {}
    for model in (CM6_V16, CM6_V32):
        dies, bandwidth = program_bandwidth(model)
        written[model] = measure_figures(dict(_core.presets())[model], seq_write, 64)["seq-write"] * 1e6
        print(f"{model}: {dies} dies program {bandwidth / 1e6:,.0f} MB/s, the twin writes {written[model] / 1e6:,.0f} MB/s")
        assert written[model] == pytest.approx(bandwidth, rel=0.03), model
    dies_ratio = program_bandwidth(CM6_V32)[0] / program_bandwidth(CM6_V16)[0]
    assert dies_ratio == 2
    assert written[CM6_V32] / written[CM6_V16] == pytest.approx(dies_ratio, rel=0.03)


@pytest.mark.slow
def test_a_back_end_at_the_cm6_sequential_write_would_starve_its_random_write(tmp_path: Path) -> None:
    """Why the CM6 presets have no back end (docs/models.md §15): a stage that programs and GC
    reads share, just fast enough for the CM6-R's sequential write, also carries every
    relocation of its random writes (WAF about 4), and cuts them by more than 10 %; the same
    stage with room for that traffic leaves them as they are."""
    toml = dict(_core.presets())[CM6]
    timing = _core.parse_spec(toml)["timing"]
    assert timing["ctrl_backend_bytes_per_s"]["value"] == 0
    rand_write = Corner("rand-write", 1.0, "")
    seq_mb_s = measure_figures(toml, {"seq-write": Corner("seq-write", 1.0, "")}, 128)["seq-write"]
    figures = {}
    image = prepare_images(toml, [rand_write], 128, 1, str(tmp_path))["rand"]  # checked as the test ends
    for label, backend in (("none", 0), ("at the seq write", int(seq_mb_s * 1e6 * 1.01)), ("roomy", int(seq_mb_s * 1e6 * 1.5))):
        trial = json.loads(json.dumps(timing))
        trial["ctrl_backend_bytes_per_s"]["value"] = backend
        d = Drive.open(image, writable=False)
        try:
            figures[label] = measure_corner(d, rand_write, trial)
        finally:
            d.close()
    print(f"CM6-R 1/128: seq write {seq_mb_s:,.0f} MB/s; random write IOPS by back end: {figures}")
    assert figures["at the seq write"] < 0.9 * figures["none"]
    assert figures["roomy"] == pytest.approx(figures["none"], rel=0.01)


def test_cd6_parity_takes_one_die_in_64_of_the_cm6_v_pool() -> None:
    """The CD6-V 3.2 TB has the CM6-V 3.2 TB's NAND and user capacity but keeps die parity in
    its own 64 dies (16 channels, where the CM6 has 18): its data pool is 63/64 of the CM6-V's,
    and its sequential writes program 64/63 of their data."""
    pools = {}
    for model in (CM6_V32, CD6):
        d = Drive.in_memory(model, scale=64)
        pools[model] = d.ftl_info()["data_pool_bytes"]
        if model == CD6:
            r = d.precondition(1, "seq", 131072, loops=1.0, seed=1)
            assert r.waf == pytest.approx(64 / 63, rel=0.005)
        d.close()
    dies = program_bandwidth(CD6)[0]
    assert dies == 64
    assert pools[CD6] / pools[CM6_V32] == pytest.approx((dies - 1) / dies, rel=0.002)
