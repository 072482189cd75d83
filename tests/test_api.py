"""The Python API (``ssdtwin.Drive``), determinism, and property tests of the controller
against a small reference model of NVMe namespace management and I/O."""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import ssdtwin
from ssdtwin import _core
from ssdtwin.drive import (
    Drive,
    ImageError,
    Namespace,
    NvmeError,
    PreconditionReport,
    SpecError,
    SsdtwinError,
    parse_amount,
    parse_scale,
)
from twin import CM6, P5316

# --------------------------------------------------------------------------- a tiny drive

IU = 4096


def tiny_spec(tnvmcap: int = 48 << 20, write_buffer_bytes: int = 0) -> str:
    """CM6 parameters on 2 dies x 1 plane x 48 pages: 1.5 MiB superblocks, 40 of them.
    No write buffer, so NUSE is exactly the mapped IUs (see test_cli's NUSE xfail)."""
    text = dict(_core.presets())[CM6]
    values = {
        "channels": 2,
        "dies_per_channel": 1,
        "planes_per_die": 1,
        "pages_per_block": 48,
        "blocks_per_plane": 40,
        "write_buffer_bytes": write_buffer_bytes,
        "tnvmcap_bytes": tnvmcap,
    }
    for key, v in values.items():
        text, n = re.subn(rf"(?m)^{key} = \{{ value = [^,]+,", f"{key} = {{ value = {v},", text)
        assert n == 1, f"preset layout changed: {key}"
    return text


TINY = tiny_spec()
#: A DRAM namespace budget of 256 KiB on the tiny drive (the PBlaze5's DRAM timing).
TINY_DRAM_BUDGET = 256 << 10
TINY_DRAM = (
    TINY
    + f"""
[dram_namespace]
budget_bytes = {{ value = {TINY_DRAM_BUDGET}, source = "[ASSUMED] test" }}
latency_ns = {{ value = 5000, source = "[ASSUMED] test" }}
bytes_per_s = {{ value = 6400000000, source = "[ASSUMED] test" }}
"""
)


# --------------------------------------------------------------------------- construction


def test_package_exports() -> None:
    assert ssdtwin.Drive is Drive
    assert ssdtwin.__version__ == _core.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", ssdtwin.__version__)
    with pytest.raises(AttributeError):
        ssdtwin.no_such_thing  # noqa: B018


def test_error_hierarchy() -> None:
    for cls in (NvmeError, ImageError, SpecError):
        assert issubclass(cls, SsdtwinError) and issubclass(cls, Exception)
    assert _core.NvmeError is NvmeError


def test_create_open_and_commit(tmp_path: Path) -> None:
    d = tmp_path / "img"
    with Drive.create(d, CM6, scale="1/454", seed=4) as drv:
        assert drv.path == d
        assert drv.manifest() == {"format": "ssdtwin-image", "version": 2, "preset": CM6, "scale": 454, "seed": 4}
        cap = drv.nvme.id_ctrl()["tnvmcap"]
        drv.nvme.detach_ns(1)
        drv.nvme.delete_ns(1)
        nsid = drv.nvme.create_ns(cap // 2 // 4096, block_size=4096)
        drv.nvme.attach_ns(nsid)
        r = drv.precondition(nsid, "seq", 131072, loops=1.0, seed=9)
    # Leaving the with-block committed; a read-only open sees it.
    ro = Drive.open(d, writable=False)
    (ns,) = ro.namespaces()
    assert (ns.nsid, ns.lba_bytes, ns.flbas, ns.nsze, ns.attached) == (1, 4096, 1, cap // 2 // 4096, True)
    assert ro.vendor_log()["host_write_bytes"] == r.host_bytes
    ro.close()
    with pytest.raises(SsdtwinError, match="closed"):
        ro.vendor_log()


def test_an_empty_path_is_refused_before_anything_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec.toml").write_text("mine\n")
    # Wrote the image's spec.toml over the working directory's, and a LOCK beside it, then
    # failed with ": No such file or directory (os error 2)".
    with pytest.raises(ImageError, match="^an empty path names no directory: give the image a directory of its own"):
        Drive.create("", CM6, scale=454)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.toml"]
    assert (tmp_path / "spec.toml").read_text() == "mine\n"


def test_exception_in_with_block_does_not_commit(tmp_path: Path) -> None:
    d = tmp_path / "img"
    Drive.create(d, CM6, scale=454).close()
    with pytest.raises(RuntimeError), Drive.open(d) as drv:
        drv.precondition(1, "rand", 4096, amount_bytes=1 << 20, seed=1)
        raise RuntimeError("boom")
    with Drive.open(d, writable=False) as drv:
        assert drv.vendor_log()["host_write_bytes"] == 0


def test_a_drive_closed_inside_its_with_block_leaves_it_quietly(tmp_path: Path) -> None:
    d = tmp_path / "img"
    Drive.create(d, CM6, scale=454).close()
    # Leaving the block raised SsdtwinError "the drive is closed" (it committed the closed drive).
    with Drive.open(d) as a:
        a.write(1, 0, 8)
        a.commit()
        a.close()
        assert a.closed
    with Drive.open(d) as b:
        assert b.smart_log()["host_write_commands"] == 1 and not b.closed
    assert b.closed


def test_uncommitted_changes_are_dropped_on_close(tmp_path: Path) -> None:
    d = tmp_path / "img"
    drv = Drive.create(d, CM6, scale=454)
    drv.precondition(1, "rand", 4096, amount_bytes=1 << 20, seed=1)
    drv.close()
    assert Drive.open(d, writable=False).smart_log()["host_write_commands"] == 0


def test_writable_open_is_exclusive(tmp_path: Path) -> None:
    d = tmp_path / "img"
    a = Drive.create(d, CM6, scale=454)
    # Said "in use by another ssdtwin process (pid P)" with P this process's own pid.
    with pytest.raises(ImageError) as e:
        Drive.open(d)
    assert str(e.value) == f"{d} is already open for writing in this process (pid {os.getpid()}); close that drive first"
    Drive.open(d, writable=False).close()  # readers are fine
    a.close()
    Drive.open(d).close()


def test_the_live_state_functions_take_string_paths(tmp_path: Path) -> None:
    from ssdtwin import live

    img = tmp_path / "img"
    with Drive.create(img, CM6, scale=454):
        # Was a TypeError: unsupported operand type(s) for /: 'str' and 'str'.
        assert live.lock_holder(str(img)) == os.getpid()
        assert live.live_state(str(img)) is None  # a writer, but not a server: no live.json
    assert live.lock_holder(str(img)) is None


def test_a_read_only_drive_reads_its_generation_while_a_writer_commits(tmp_path: Path) -> None:
    # The maps of a read-only Drive load at the first call that needs them; a writer that
    # committed meanwhile had removed that generation: "drive image damaged: .../p2l.bin:
    # missing" from check() on a sound image (also `ssdtwin check` beside a committing writer).
    d = tmp_path / "img"
    with Drive.create(d, CM6, scale=454) as w:
        w.precondition(1, "rand", 4096, amount_bytes=1 << 20, seed=1)
    ro = Drive.open(d, writable=False)
    with Drive.open(d) as w:
        committed = w.ftl_fingerprint()
        for seed in (2, 3):
            w.precondition(1, "rand", 4096, amount_bytes=1 << 20, seed=seed)
            w.commit()
        assert w.ftl_fingerprint() != committed
    with ro:
        ro.check()
        assert ro.ftl_fingerprint() == committed  # the generation it opened, whole

    # The same in a loop: a thread writes and commits (the core releases the GIL) while
    # read-only Drives open and check their maps.
    stop = threading.Event()
    commits = [0]

    def writer() -> None:
        with Drive.open(d) as w:
            while not stop.is_set():
                w.precondition(1, "rand", 4096, amount_bytes=64 << 10, seed=4 + commits[0])
                w.commit()
                commits[0] += 1

    t = threading.Thread(target=writer)
    t.start()
    failed = []
    try:
        for _ in range(20):
            try:
                with Drive.open(d, writable=False) as r:
                    time.sleep(0.03)  # a commit or two: the writer moves past this generation
                    r.check()
            except ImageError as e:
                failed.append(str(e))
    finally:
        stop.set()
        t.join()
    assert commits[0] >= 5, f"the writer must commit during the reads ({commits[0]} commits)"
    assert not failed, f"{len(failed)} of 20 read-only drives failed to check, e.g. {failed[0]}"


def test_in_memory_has_no_image() -> None:
    d = Drive.in_memory(CM6, scale=454)
    assert d.path is None and d.manifest()["format"] == "memory"
    with pytest.raises(SsdtwinError, match="no image to commit"):
        d.commit()
    with pytest.raises(SpecError, match="give a preset name or a spec TOML"):
        Drive.in_memory()
    with pytest.raises(SpecError, match="unknown preset"):
        Drive.in_memory("nope")
    with pytest.raises(SpecError, match="too small"):
        Drive.in_memory(CM6, scale=100000)


def test_a_preset_and_a_spec_together_are_refused() -> None:
    # The preset was ignored: Drive.in_memory("kioxia-cm6-r-3.84t", spec_toml=<a P5316's>)
    # built a P5316.
    spec = dict(_core.presets())[P5316]
    with pytest.raises(ValueError, match="^model and spec_toml: give one of them, not both$"):
        Drive.in_memory(CM6, spec_toml=spec, scale=256)
    with pytest.raises(ValueError, match="^preset and spec_toml: give one of them, not both$"):
        _core.Drive.in_memory(preset=CM6, spec_toml=spec, scale=256)


def test_scale_errors_name_the_keyword_the_caller_gave() -> None:
    # Were "--scale 1/100000: too small ..." from the Python API, which has no --scale.
    for call in (lambda: Drive.in_memory(CM6, scale=100000), lambda: Drive.in_memory(CM6, scale="1/100000")):
        with pytest.raises(SpecError) as e:
            call()
        assert re.match(r"scale=(100000|'1/100000'): too small", str(e.value)), str(e.value)
        assert "--scale" not in str(e.value)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"seed": -1}, "seed=-1: out of range; must be an integer in 0..=18446744073709551615 (u64)"),
        ({"seed": 2**70}, f"seed={2**70}: out of range; must be an integer in 0..=18446744073709551615 (u64)"),
        ({"nvm_sets": 2**40}, f"nvm_sets={2**40}: out of range; must be an integer in 0..=4294967295 (u32)"),
        ({"partitions": -2}, "partitions=-2: out of range; must be an integer in 0..=4294967295 (u32)"),
    ],
)
def test_out_of_range_integers_name_the_parameter(kwargs: dict[str, int], needle: str) -> None:
    # Was pyo3's OverflowError naming nothing ("can't convert negative int to unsigned").
    with pytest.raises(ValueError) as e:
        Drive.in_memory(CM6, scale=454, **kwargs)
    assert str(e.value) == needle
    assert isinstance(e.value, OverflowError)  # still what it was, for callers catching that


def test_out_of_range_integers_of_nvme_verbs_name_the_parameter() -> None:
    d = Drive.in_memory(CM6, scale=454)
    for call, needle in (
        (lambda: d.nvme.id_ns(-1), "nsid=-1: out of range; must be an integer in 0..=4294967295 (u32)"),
        (lambda: d.nvme.format(1, lbaf=256), "lbaf=256: out of range; must be an integer in 0..=255 (u8)"),
        (lambda: d.nvme.id_nvmset(70000), "nvmsetid=70000: out of range; must be an integer in 0..=65535 (u16)"),
        (lambda: d.write(1, -5, 1), "slba=-5: out of range; must be an integer in 0..=18446744073709551615 (u64)"),
    ):
        with pytest.raises(ValueError) as e:
            call()
        assert str(e.value) == needle


def test_the_narrow_parameter_table_matches_the_bindings() -> None:
    """_bounds.NARROW_BITS names every u8/u16 parameter of the pyo3 methods, with its width."""
    from ssdtwin._bounds import NARROW_BITS

    src = Path(__file__).resolve().parents[1] / "crates" / "ssdtwin-py" / "src"
    found: dict[str, set[int]] = {}
    for f in src.glob("*.rs"):
        for sig in re.findall(r"\bfn \w+(?:<[^>]*>)?\(([^)]*)\)", f.read_text(), re.S):
            for name, bits in re.findall(r"\b(\w+): (?:Option<)?[ui](8|16)\b", sig):
                found.setdefault(name, set()).add(int(bits))
    assert found and all(len(b) == 1 for b in found.values()), found
    assert {n: b.pop() for n, b in found.items()} == NARROW_BITS


def test_spec_errors_name_every_bad_field() -> None:
    bad = TINY.replace("channels = { value = 2,", "channels = { value = 0,").replace(
        "iu_bytes = { value = 4096,", "iu_bytes = { value = 5000,"
    )
    with pytest.raises(SpecError) as e:
        Drive.in_memory(spec_toml=bad)
    msg = str(e.value)
    assert "nand.channels: must be 1..=64 (got 0)" in msg and "ftl.iu_bytes" in msg
    with pytest.raises(SpecError, match="tnvmcap_bytes: must be below the NAND available"):
        Drive.in_memory(spec_toml=tiny_spec(tnvmcap=64 << 20))


def test_spec_roundtrip_and_ftl_info() -> None:
    d = Drive.in_memory(spec_toml=TINY)
    spec = d.spec()
    assert spec["nand"]["channels"]["value"] == 2 and spec["scale"] == 1
    assert _core.parse_spec(d.spec_toml()) == spec
    info = d.ftl_info()
    assert info["superblocks"] == 40 and info["superblock_bytes"] == 2 * 48 * 16384
    # The data pool: superblocks less those GC keeps out of service (a fractional count).
    assert 3 < info["gc_overhead_superblocks"] < 8
    pool = (info["superblocks"] - info["gc_overhead_superblocks"]) * info["superblock_bytes"]
    assert info["data_pool_bytes"] == pytest.approx(pool, abs=1)
    assert info["data_pool_bytes"] > d.nvme.id_ctrl()["tnvmcap"]
    assert info["buffer_slots"] == 0 and info["iu_bytes"] == IU


# --------------------------------------------------------------------------- nvme mirror of the CLI


def test_nvme_methods_mirror_the_cli() -> None:
    d = Drive.in_memory(spec_toml=TINY)
    n = d.nvme
    tnv = n.id_ctrl()["tnvmcap"]
    assert n.list() == [Namespace(1, tnv // 512, tnv // 512, 0, 512, 0, True, 0, 0, tnv)]
    n.detach_ns(1)
    n.delete_ns(1)
    assert n.id_ctrl()["unvmcap"] == tnv
    a = n.create_ns(1000, block_size=512)
    b = n.create_ns(100, 100, flbas=1)
    assert (a, b) == (1, 2)
    n.attach_ns(a)
    n.attach_ns(b, [1])
    assert n.id_ctrl()["unvmcap"] == tnv - 1000 * 512 - 100 * 4096
    assert n.id_ns(2)["nsze"] == 100 and n.id_ns(2)["flbas"] == 1
    n.format(1, lbaf=1, ses=1)
    assert n.id_ns(1)["nsze"] == 1000 * 512 // 4096
    with pytest.raises(NvmeError, match=r"INVALID_FORMAT\(0x410a\): block size 1000") as e:
        n.create_ns(10, block_size=1000)
    n.set_feature(0x84, 1, nsid=1)
    assert n.get_feature(0x84, nsid=1) == 1
    with pytest.raises(NvmeError) as e:
        d.write(1, 0, 1)
    assert e.value.status == "NS_WRITE_PROTECTED" and e.value.code == 0x4020  # type: ignore[attr-defined]
    d.power_cycle()
    assert n.get_feature(0x84, nsid=1) == 1  # 1 = protected until cleared, not until power cycle
    assert d.smart_log()["power_cycles"] == 1
    assert n.smart_log() == d.smart_log() and n.vendor_log() == d.vendor_log()


def test_an_unknown_queue_priority_class_is_named_as_given() -> None:
    d = Drive.in_memory(CM6, scale=454)
    # Was NvmeError "queue priority 255: must be 0 (urgent), 1 (high), ...": a number never given.
    with pytest.raises(ValueError, match="^cls 'highest': one of urgent, high, medium, low$"):
        d.nvme.set_sq_priority(1, "highest")
    d.nvme.set_sq_priority(1, "high")
    assert d.nvme.qos()[0]["sq_priority"] == "high"


def test_nvme_error_attributes() -> None:
    d = Drive.in_memory(spec_toml=TINY)
    with pytest.raises(NvmeError) as e:
        d.nvme.create_ns(10**9, 10**9)
    err = e.value
    assert err.status == "NS_INSUFFICIENT_CAPACITY" and err.code == 0x4115  # type: ignore[attr-defined]
    assert "unallocated" in err.detail  # type: ignore[attr-defined]
    assert str(err).startswith("NS_INSUFFICIENT_CAPACITY(0x4115): ")


def test_statuses_come_from_the_core() -> None:
    """Python never writes an NVMe status: the LBA format lookup and a missing namespace
    are answered by the controller, with its status name and code."""
    d = Drive.in_memory(spec_toml=TINY)
    with pytest.raises(NvmeError) as e:
        d.nvme.lba_format_index(1000)
    assert e.value.status == "INVALID_FORMAT" and e.value.code == 0x410A  # type: ignore[attr-defined]
    assert "formats: 0=512 B, 1=4096 B" in str(e.value)
    assert [d.nvme.lba_format_index(b) for b in d.nvme.lba_sizes()] == list(range(len(d.nvme.lba_sizes())))
    for call in (lambda: d.nvme.namespace(9), lambda: d.precondition(9, "seq", 4096), lambda: d.view().id_ns(9)):
        with pytest.raises(NvmeError) as e:
            call()
        assert e.value.status == "INVALID_NS" and e.value.code == 0x400B  # type: ignore[attr-defined]
        assert "namespace 9 does not exist (namespaces: 1)" in str(e.value)


def test_view_is_what_the_single_queries_return() -> None:
    """Drive.view() (the structure a server's live.json holds) agrees with every query."""
    d = Drive.in_memory(spec_toml=TINY)
    d.nvme.create_ns(100, block_size=4096) if d.nvme.id_ctrl()["unvmcap"] else None
    d.write(1, 0, 64)
    v = d.view()
    assert v.id_ctrl() == d.nvme.id_ctrl()
    assert v.list_ns() == [ns.__dict__ for ns in d.namespaces()]
    assert all(v.id_ns(ns.nsid) == d.nvme.id_ns(ns.nsid) for ns in d.namespaces())
    assert v.smart_log() == d.smart_log() and v.vendor_log() == d.vendor_log()
    assert v.smart_log()["host_write_commands"] == 1


def test_run_fio_takes_and_returns_python_objects() -> None:
    from ssdtwin.fio import parse_string

    d = Drive.in_memory(CM6, scale=454)
    ns = d.namespaces()[0]
    specs = parse_string("[w]\nrw=randwrite\nbs=4k\nsize=16m\nnumber_ios=500\n", name="w.fio").to_engine(ns.bytes, ns.lba_bytes)
    out = d._core.run_fio(specs)
    assert isinstance(out, list) and isinstance(out[0], dict)
    assert out[0]["write"]["total_ios"] == 500 and out[0]["write"]["io_bytes"] == 500 * 4096
    assert d.run_fio(json.dumps(specs))[0]["write"]["total_ios"] == 500  # JSON text still accepted
    bad = [dict(specs[0], nonsense=1)]
    with pytest.raises(ValueError, match="engine input does not follow contract v1: .*nonsense"):
        d.run_fio(bad)


def test_run_fio_refuses_percentages_fio_cannot_express() -> None:
    from ssdtwin.fio import parse_string

    d = Drive.in_memory(CM6, scale=454)
    ns = d.namespaces()[0]
    text = "[w]\nrw=randrw\nbs=4k\nsize=16m\nnumber_ios=100\nlatency_target=1ms\n"
    spec = parse_string(text, name="w.fio").to_engine(ns.bytes, ns.lba_bytes)[0]
    for field, value in (("rwmixread", 513), ("rwmixwrite", 101), ("latency_percentile", float("nan")), ("latency_percentile", -1.0)):
        # Ran before: rwmixread 513 read only, a NaN percentile judged no latency window.
        with pytest.raises(ssdtwin._core.EngineError, match=f"{field} .*: must be 0..=100"):
            d.run_fio([dict(spec, **{field: value})])
    with pytest.raises(ssdtwin._core.EngineError, match="percentage_random.write 101: must be 0..=100"):
        d.run_fio([dict(spec, percentage_random={"read": 100, "write": 101, "trim": 100})])
    assert d.run_fio([spec])[0]["read"]["total_ios"] > 0
    d.check()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("iodepth", 0, "iodepth 0: must be 1..=65536"),
        ("iodepth", 70000, "iodepth 70000: must be 1..=65536"),
        ("loops", 0, "loops 0: must be 1..=4294967295"),
        ("rw_nr", 0, "rw_nr 0: must be 1..=4294967295"),
        ("bw_avg_ms", 0, "bw_avg_ms 0: must be 1..=4294967295"),
        ("flow", 5000, "flow 5000: must be 0..=1000"),
        ("pi_chk", 9, "pi_chk 9: must be 0..=7"),
    ],
)
def test_run_fio_checks_every_field_range(field: str, value: int, message: str) -> None:
    # Ran before: iodepth 0 at depth 1, loops 0 as one loop (the table: workload/spec.rs check_ranges).
    from ssdtwin.fio import parse_string

    d = Drive.in_memory(CM6, scale=454)
    ns = d.namespaces()[0]
    spec = parse_string("[w]\nrw=randwrite\nbs=4k\nsize=16m\nnumber_ios=10\n", name="w.fio").to_engine(ns.bytes, ns.lba_bytes)[0]
    with pytest.raises(ssdtwin._core.EngineError) as e:
        d.run_fio([dict(spec, **{field: value})])
    assert str(e.value) == f"job 'w' (thread 1): {message}"


U32 = "out of range; must be an integer in 0..=4294967295 (u32)"
U64 = "out of range; must be an integer in 0..=18446744073709551615 (u64)"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"seed": -1}, f"seed=-1: {U64}"),
        ({"nodes": 2.5}, "nodes=2.5: TypeError: 'float' object cannot be interpreted as an integer"),
        ({"scale": "1/64"}, "scale='1/64': TypeError: 'str' object cannot be interpreted as an integer"),
        # Was taken for 1 (a bool is an int to Python).
        ({"nodes": True}, "nodes=True: an integer, not a bool"),
        ({"node_cores": {"value": False, "source": "lab"}}, "node_cores.value=False: an integer, not a bool"),
        # A long value is shown by its start (the message stays one line).
        ({"drive": ["x" * 100]}, f"drive=['{'x' * 58}...: unexpected type: 'list' object is not an instance of 'str'"),
    ],
)
def test_cluster_options_that_do_not_convert_name_the_option(tmp_path: Path, options: dict[str, object], message: str) -> None:
    from ssdtwin.cluster import Cluster

    # Were "cluster options: OverflowError: out of range integral type conversion attempted"
    # (or "can't convert negative int to unsigned"), naming no option.
    with pytest.raises(ValueError) as e:
        Cluster.create(tmp_path / "lab", **options)  # type: ignore[arg-type]
    assert str(e.value) == f"cluster options: {message}"
    assert not (tmp_path / "lab").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"nodes": -1}, "cluster.nodes: must be 1..=64 (got -1)"),
        ({"nodes": 2**40}, "cluster.nodes: must be 1..=64 (got 1099511627776)"),
        ({"osds_per_drive": -1}, "cluster.osds_per_drive: must be 1..=1024 (got -1)"),
        ({"node_cores": {"value": -1, "source": "lab"}}, "hosts.node_cores: must be 1..=4096 (got -1)"),
        ({"pg_num": {"value": -4, "source": "lab"}}, "ceph.pg_num: must be 1..=1048576 (got -4)"),
        ({"osd_threads": -1}, "osd_threads (the threads per OSD that pin hosts.osd_cpus): must be 0..=4096 (got -1)"),
        ({"volume_bytes": 2**64}, "cluster.volume_bytes: must be a positive multiple of 4096 (got 18446744073709551616)"),
        ({"ceph_version": -1}, "ceph.version: 14 or 18, the releases with a cost table (got -1)"),
        ({"nodes": -1, "clients": 0}, "cluster.nodes: must be 1..=64 (got -1); cluster.clients: must be 1..=256 (got 0) (2 problems)"),
    ],
)
def test_cluster_options_past_the_binding_name_their_fields_range(tmp_path: Path, options: dict[str, object], message: str) -> None:
    """nodes=-1 said "out of range; must be an integer in 0..=4294967295 (u32)" (the binding's
    integer) where nodes=0 said "cluster.nodes: must be 1..=64": every value outside its
    field's range is now the core's SpecError, naming the field and its range."""
    from ssdtwin.cluster import Cluster

    with pytest.raises(ssdtwin._core.SpecError) as e:
        Cluster.create(tmp_path / "lab", **options)  # type: ignore[arg-type]
    assert str(e.value) == f"cluster init: {message}"
    assert not (tmp_path / "lab").exists()


def test_engine_inputs_and_tier_parameters_that_do_not_convert_name_the_field() -> None:
    from ssdtwin import stack
    from ssdtwin.fio import parse_string

    d = Drive.in_memory(CM6, scale=454)
    ns = d.namespaces()[0]
    jobs = parse_string("[a]\nrw=write\nsize=1m\n[b]\nrw=randwrite\nbs=4k\nsize=16m\nnumber_ios=10\n", name="w.fio")
    specs = jobs.to_engine(ns.bytes, ns.lba_bytes)
    with pytest.raises(ValueError) as e:
        d.run_fio([specs[0], dict(specs[1], iodepth=-1)])
    assert str(e.value) == f"engine input does not follow contract v1: [1].iodepth=-1: {U32}"
    tier = stack.tier_params(d, "log", 64 << 20)
    with pytest.raises(ValueError) as e:
        _core.stack_new("pmem", dict(tier, host_op_pct=-20))
    assert str(e.value) == f"tier parameters: host_op_pct=-20: {U32}"
    d.check()


def test_log_page_length_is_bounded() -> None:
    v = Drive.in_memory(CM6, scale=454).view()
    assert len(v.log_page(0x02, 1 << 20)) == 1 << 20 and v.log_page(0x02, 0) == b""
    # Was a zero-filled allocation of up to 4 GiB (an abort where memory is short).
    for length in ((1 << 20) + 1, 2**32 - 1):
        with pytest.raises(NvmeError, match=f"INVALID_FIELD.*log page length {length}: must be 0..=1048576"):
            v.log_page(0x02, length)


def test_host_stack_parameters_and_saved_states_that_do_not_fit_are_refused() -> None:
    from ssdtwin import stack

    d = Drive.in_memory(CM6, scale=454)
    tier = stack.tier_params(d, "log", 64 << 20)
    # Aborted the interpreter: "memory allocation of 7205759403792792 bytes failed".
    with pytest.raises(ValueError, match="drive_bytes 9223372036854775808: the log tier maps at most"):
        _core.stack_new("pmem", dict(tier, drive_bytes=2**63))
    with pytest.raises(NvmeError, match="INVALID_NS"):  # was a bare KeyError
        stack.tier_params(d, "log", 64 << 20, nsid=9)
    saved = _core.stack_new("pmem", tier).to_state()
    assert _core.HostStack.from_state(saved).config() == tier | {"area_bytes": 0}
    log = saved["tier"]["state"]["Log"]
    # Each of these loaded, then panicked on an index at the first destage.
    for key, value, needle in (
        ("p2l", log["p2l"][:16], "p2l entries 2, but the parameters make"),
        ("band_state", [0], "band_state entries 1, but the parameters make"),
        ("free_bands", [10**6], "free band 1000000 is beyond"),
    ):
        damaged = json.loads(json.dumps(saved))
        damaged["tier"]["state"]["Log"][key] = value
        with pytest.raises(ValueError, match=f"stack state: log: {needle}"):
            _core.HostStack.from_state(damaged)


def test_trace_plans_that_cannot_place_an_io_are_refused(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("".join(f"{128166372000000000 + i * 1000},h,0,Write,{i * 4096},4096,100\n" for i in range(20)))
    d = Drive.in_memory(CM6, scale=454)
    ns = d.namespaces()[0]
    plan = {"format": "msr", "target": {"bytes": ns.bytes, "lba": ns.lba_bytes, "beyond": "wrap", "widen": True}}
    assert _core.trace_scan(trace, "t.csv", plan)["ios"] == (0, 20, 0)
    for part, key, value, needle in (
        # target.bytes 0 and target.lba 0 panicked dividing by zero at the first I/O
        # (PanicException); a replay_trace that did left the drive's lock poisoned.
        ("target", "bytes", 0, "target.bytes 0: at least one 512-byte LBA"),
        ("target", "lba", 0, "target.lba 0: at least 1 byte"),
        ("target", "bytes", 256, "target.bytes 256: at least one 512-byte LBA"),
        ("fio", "time_scale", float("nan"), "fio.time_scale NaN: a finite number of at least 0"),
        ("fio", "replay_align", 3, "fio.replay_align 3: 0 or a power of two"),
    ):
        bad = json.loads(json.dumps(plan))
        bad.setdefault(part, {})[key] = value
        with pytest.raises(ValueError, match=f"trace plan: {re.escape(needle)}"):
            _core.trace_scan(trace, "t.csv", bad)
        with pytest.raises(ValueError, match=f"trace plan: {re.escape(needle)}"):
            _core.trace_load(trace, "t.csv", bad, 10)
        with pytest.raises(ValueError, match=f"trace plan: {re.escape(needle)}"):
            _core.replay_trace(d._core, trace, "t.csv", bad, {})  # the plan is checked before the job
    d.check()


def test_io_commands() -> None:
    d = Drive.in_memory(spec_toml=tiny_spec(write_buffer_bytes=16 * IU))
    d.write(1, 0, 16)  # two 4 KiB IUs of 512 B blocks
    assert d.read(1, 0, 16) == {"nand_ius": 0, "buffer_ius": 2, "unmapped_ius": 0}
    assert d.read(1, 16, 8) == {"nand_ius": 0, "buffer_ius": 0, "unmapped_ius": 1}
    # Deallocation is per whole IU: 4..20 covers IU 1 whole only.
    assert d.deallocate(1, 4, 16) == 1
    assert d.read(1, 0, 16)["unmapped_ius"] == 1
    with pytest.raises(NvmeError, match="LBA_RANGE"):
        d.write(1, d.namespaces()[0].nsze, 1)
    with pytest.raises(NvmeError, match="LBA_RANGE"):
        d.read(1, 0, 0)
    d.check()


def test_check_pi_checks_what_a_read_checks_first() -> None:
    d = Drive.in_memory(CM6, scale=454)
    d.nvme.format(1, lbaf=4, pi=1)  # 4096 B + 8 B of metadata
    d.nvme.inject_pi_error(1, 3, 4)
    with pytest.raises(NvmeError, match="GUARD_CHECK"):
        d.nvme.check_pi(1, 0, 8)
    d.nvme.check_pi(1, 0, 3)
    nsze = d.nvme.namespace(1).nsze
    # Each of these returned None: no such namespace, LBAs past its end or none at all, and
    # PRCHK bits that are no check.
    for args, needle in (
        ((9, 0, 8, 7), "INVALID_NS"),
        ((1, nsze, 1, 7), f"LBA_RANGE.*LBAs {nsze}\\+1 outside namespace 1"),
        ((1, 2**64 - 1, 2, 7), "LBA_RANGE"),
        ((1, 0, 0, 7), "LBA_RANGE"),
        ((1, 0, 8, 8), "INVALID_FIELD.*prchk 8: a mask of guard \\(4\\), application tag \\(2\\) and reference tag \\(1\\), 0..=7"),
    ):
        with pytest.raises(NvmeError, match=needle):
            d.nvme.check_pi(*args)
    d.check()


def test_precondition_report_and_logs() -> None:
    d = Drive.in_memory(CM6, scale=454, seed=2)
    ns_bytes = d.namespaces()[0].bytes
    r = d.precondition(1, "seq", 131072, loops=1.0)
    assert isinstance(r, PreconditionReport)
    assert (r.nsid, r.pattern, r.block_bytes, r.interrupted) == (1, "sequential", 131072, False)
    # One pass covers the namespace exactly: the last write is shortened to its end.
    assert r.host_bytes == ns_bytes and r.ios == -(-ns_bytes // 131072)
    r2 = d.precondition(1, "rand", 4096, amount_bytes=ns_bytes, seed=77)
    assert r2.seed == 77 and r2.pattern == "random" and r2.ios == ns_bytes // 4096
    assert r2.waf == pytest.approx(r2.nand_bytes / r2.host_bytes) and r2.waf > 1.5
    v = d.vendor_log()
    assert v["host_write_bytes"] == r.host_bytes + r2.host_bytes
    assert v["nand_write_bytes"] >= r.nand_bytes + r2.nand_bytes - v["buffered_bytes"]
    s = d.smart_log()
    assert s["host_write_commands"] == r.ios + r2.ios
    assert s["data_units_written"] == -(-(r.host_bytes + r2.host_bytes) // 512 // 1000)
    with pytest.raises(NvmeError, match="INVALID_NS"):
        d.precondition(5, "seq", 4096)
    with pytest.raises(ValueError, match="pattern 'zigzag'"):
        d.precondition(1, "zigzag", 4096, amount_bytes=4096)
    with pytest.raises(NvmeError, match="INVALID_FIELD.*block size 1000"):
        d.precondition(1, "rand", 1000, amount_bytes=4096)
    # Were "cannot convert float NaN to integer" and OverflowError "can't convert negative
    # int to unsigned", naming neither the argument nor its range.
    for loops in (math.nan, -1.0, math.inf):
        with pytest.raises(ValueError, match=f"loops {loops}: a finite number of namespace passes, at least 0"):
            d.precondition(1, "seq", 131072, loops=loops)
    with pytest.raises(ValueError, match="loops 1e\\+30: .* is more than 2\\^64 bytes"):
        d.precondition(1, "seq", 131072, loops=1e30)
    with pytest.raises(ValueError, match="amount_bytes -5: from 0 to 2\\^64 - 1 bytes"):
        d.precondition(1, "seq", 131072, amount_bytes=-5)
    d.check()


def test_precondition_and_idle_refuse_arguments_they_would_misread() -> None:
    d = Drive.in_memory(CM6, scale=454)
    before = d.vendor_log()
    # Both given: loops was ignored (one 4 KiB write here, not a namespace pass).
    with pytest.raises(ValueError, match="^loops 1 and amount_bytes 4096: give one of them, not both$"):
        d.precondition(1, "seq", 4096, loops=1, amount_bytes=4096)
    # Were "'>=' not supported between instances of 'str' and 'int'" (and '<=' for idle).
    with pytest.raises(TypeError, match="^loops '2': must be a number, not str$"):
        d.precondition(1, "seq", 4096, loops="2")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="^seconds '1': must be a number, not str$"):
        d.idle("1")  # type: ignore[arg-type]
    assert d.vendor_log() == before
    d.check()


def test_numbers_of_numpy_are_numbers() -> None:
    import numpy as np

    from ssdtwin.fio import parse_string
    from ssdtwin.fio.run import engine_specs

    d = Drive.in_memory(CM6, scale=454)
    assert d.precondition(1, "seq", 131072, loops=np.float64(0.01)).host_bytes > 0
    assert d.idle(np.int64(1)) >= 0
    run = parse_string("[w]\nrw=randwrite\nbs=4k\nsize=1m\n", name="w.fio")
    specs = engine_specs(d, run, namespace=np.int64(1))  # type: ignore[arg-type]
    assert d.run_fio(specs)[0]["write"]["io_bytes"] == 1 << 20
    d.check()


def test_precondition_progress_callback_can_stop_it() -> None:
    d = Drive.in_memory(CM6, scale=454)
    calls: list[tuple[int, int]] = []

    def progress(done: int, total: int, unit: str, now_ns: int) -> None:
        assert (unit, now_ns) == ("bytes", 0), "bytes of the amount, no simulated time (fast-forward)"
        calls.append((done, total))
        if len(calls) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        d.precondition(1, "seq", 131072, loops=1.0, progress=progress)
    assert len(calls) == 3 and calls[0][1] == calls[-1][1] and calls[0][0] < calls[2][0] < calls[2][1]
    d.check()


def test_namespaces_frame() -> None:
    d = Drive.in_memory(spec_toml=TINY)
    d.nvme.create_ns(8, block_size=4096) if d.nvme.id_ctrl()["unvmcap"] else None
    df = d.namespaces_frame()
    assert isinstance(df, pd.DataFrame)
    columns = [
        "nsid",
        "nsze",
        "ncap",
        "nuse",
        "lba_bytes",
        "flbas",
        "attached",
        "write_protect",
        "nmic",
        "bytes",
        "dram",
        "nvmsetid",
        "ms",
        "pi",
    ]
    assert list(df.columns) == columns
    assert df["nsid"].tolist() == [n.nsid for n in d.namespaces()]
    assert int(df["bytes"].sum()) == d.nvme.id_ctrl()["tnvmcap"] - d.nvme.id_ctrl()["unvmcap"]


def test_models_frame() -> None:
    from ssdtwin.drive import models_frame

    df = models_frame()
    assert set(df["name"]) == {n for n, _ in _core.presets()}
    row = df.set_index("name").loc[P5316]
    assert row["iu_bytes"] == 65536 and row["bits_per_cell"] == 4 and row["dies"] == 128


# --------------------------------------------------------------------------- units


@pytest.mark.parametrize(
    "text, value",
    [
        ("4096", 4096),
        ("4k", 4096),
        ("4K", 4096),
        ("128k", 131072),
        ("4KiB", 4096),
        ("64KiB", 65536),
        ("1m", 1 << 20),
        ("1MiB", 1 << 20),
        ("2g", 2 << 30),
        ("1GiB", 1 << 30),
        ("1t", 1 << 40),
        ("1TiB", 1 << 40),
        ("1KB", 1000),
        ("1MB", 10**6),
        ("1GB", 10**9),
        ("3.84TB", 3_840_000_000_000),
        ("1TB", 10**12),
    ],
)
def test_parse_size(text: str, value: int) -> None:
    assert _core.parse_size(text) == value


@pytest.mark.parametrize("text", ["", "abc", "12q", "-4k", "1.5"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="is not a size|not a whole number|size"):
        _core.parse_size(text)


def test_parse_scale_and_amount() -> None:
    assert parse_scale("1/64") == 64 and parse_scale("16") == 16 and parse_scale(8) == 8 and parse_scale("1") == 1
    for bad in ("1/0", "0", "x", "1/2.5", -3):
        with pytest.raises(ValueError):
            parse_scale(bad)  # type: ignore[arg-type]
    for wrong in (1.5, None, True):
        with pytest.raises(TypeError, match="scale .*: use 1/N"):  # was AttributeError: 'float' object has no attribute 'strip'
            parse_scale(wrong)  # type: ignore[arg-type]
    assert parse_amount("2x", 1000) == 2000 and parse_amount("0.5x", 1000) == 500
    assert parse_amount("1MiB", 1) == 1 << 20
    with pytest.raises(ValueError):
        parse_amount("0x", 1000)


# --------------------------------------------------------------------------- determinism


def run_fixed_workload(seed: int) -> tuple[dict, dict]:
    d = Drive.in_memory(CM6, scale=454, seed=seed)
    d.precondition(1, "seq", 131072, loops=1.0)  # seeds drawn from the drive's seed
    d.precondition(1, "rand", 4096, loops=1.5)
    d.precondition(1, "rand", 16384, loops=0.5)
    return d.vendor_log(), d.smart_log()


def test_same_seed_same_logs_different_seed_different_logs() -> None:
    a, b, c = run_fixed_workload(1), run_fixed_workload(1), run_fixed_workload(2)
    assert a == b
    assert a[0] != c[0]
    # Same amount written whatever the seed; where it landed (and so GC) differs.
    assert a[0]["host_write_bytes"] == c[0]["host_write_bytes"] and a[1] == c[1]


def test_an_empty_controller_list_is_sent_as_it_is() -> None:
    # attach_ns(n, []) attached the namespace to controller 1, as if no list were given;
    # nvme-cli sends an empty list (with a warning) and the drive refuses it
    n = Drive.in_memory(spec_toml=TINY).nvme
    n.detach_ns(1)
    with pytest.raises(NvmeError, match=r"CTRL_LIST_INVALID\(0x411c\): the controller list is empty"):
        n.attach_ns(1, [])
    assert not n.namespace(1).attached
    n.attach_ns(1)
    with pytest.raises(NvmeError, match=r"CTRL_LIST_INVALID\(0x411c\): the controller list is empty"):
        n.detach_ns(1, [])
    assert n.namespace(1).attached


def test_next_seed_says_it_consumes_the_seed_it_returns() -> None:
    # its docstring was missing: each call moves the image's sequence on, so a later
    # precondition without a seed of its own draws the seed after it
    doc = Drive.next_seed.__doc__ or ""
    assert "consumes" in doc and "precondition" in doc
    a, b = Drive.in_memory(spec_toml=TINY, seed=5), Drive.in_memory(spec_toml=TINY, seed=5)
    a.next_seed(), a.next_seed()
    b.next_seed()
    b.precondition(1, "rand", 4096, amount_bytes=1 << 20)  # draws the second
    assert b.next_seed() == a.next_seed()


def test_next_seed_sequence_is_a_function_of_the_image_seed() -> None:
    s1 = [Drive.in_memory(spec_toml=TINY, seed=5).next_seed() for _ in range(2)]
    d = Drive.in_memory(spec_toml=TINY, seed=5)
    seq = [d.next_seed() for _ in range(4)]
    assert s1 == [seq[0], seq[0]] and len(set(seq)) == 4
    assert Drive.in_memory(spec_toml=TINY, seed=6).next_seed() != seq[0]


# --------------------------------------------------------------------------- property tests

NSID_ALL = 0xFFFFFFFF
#: Data bytes of the CM6's LBA formats by index: 512 and 4096, then each with 8 and 64 B of
#: metadata (docs/cli.md, format).
LBA_DATA = (512, 4096, 512, 512, 4096, 4096)


class Model:
    """Reference model: NVMe namespace management and per-IU mapping, nothing else."""

    def __init__(self, tnvmcap: int, nn: int = 64, dram_budget: int = 0) -> None:
        self.tnvmcap = tnvmcap
        self.nn = nn
        self.dram_budget = dram_budget
        # nsid -> [nsze, lba_bytes, attached, mapped namespace-relative IUs, dram]
        self.ns: dict[int, list] = {}

    def unvmcap(self) -> int:
        return self.tnvmcap - sum(v[0] * v[1] for v in self.ns.values() if not v[4])

    def dram_free(self) -> int:
        return self.dram_budget - sum(v[0] * v[1] for v in self.ns.values() if v[4])

    def create(self, nsze: int, flbas: int, dram: bool = False) -> str | int:
        if flbas >= len(LBA_DATA):
            return "INVALID_FORMAT"
        if nsze == 0:
            return "INVALID_FIELD"
        lba = LBA_DATA[flbas]
        if nsze * lba > (self.dram_free() if dram else self.unvmcap()):
            return "NS_INSUFFICIENT_CAPACITY"
        nsid = next((i for i in range(1, self.nn + 1) if i not in self.ns), None)
        if nsid is None:
            return "NS_ID_UNAVAILABLE"
        self.ns[nsid] = [nsze, lba, False, set(), dram]
        return nsid

    def delete(self, nsid: int) -> str | None:
        if nsid == NSID_ALL:
            self.ns.clear()
            return None
        if nsid not in self.ns:
            return "INVALID_NS"
        del self.ns[nsid]
        return None

    def attach(self, nsid: int, want: bool) -> str | None:
        if nsid not in self.ns:
            return "INVALID_NS"
        if self.ns[nsid][2] == want:
            return "NS_ALREADY_ATTACHED" if want else "NS_NOT_ATTACHED"
        self.ns[nsid][2] = want
        return None

    def format(self, nsid: int, lbaf: int, ses: int) -> str | None:
        if ses > 2:
            return "INVALID_FIELD"
        if lbaf >= len(LBA_DATA):
            return "INVALID_FORMAT"
        ids = list(self.ns) if nsid == NSID_ALL else [nsid]
        if nsid != NSID_ALL and nsid not in self.ns:
            return "INVALID_NS"
        new_lba = LBA_DATA[lbaf]
        if any(self.ns[i][0] * self.ns[i][1] < new_lba for i in ids):
            return "INVALID_FORMAT"  # less than one block of the new format (nothing changes)
        for i in ids:
            v = self.ns[i]
            nbytes = v[0] * v[1]
            v[1] = new_lba
            v[0] = nbytes // v[1]
            v[3].clear()
        return None

    def io_check(self, nsid: int, slba: int, nlb: int) -> str | None:
        if nsid not in self.ns or not self.ns[nsid][2]:
            return "INVALID_NS"
        if nlb == 0 or slba + nlb > self.ns[nsid][0]:
            return "LBA_RANGE"
        return None

    def write(self, nsid: int, slba: int, nlb: int) -> str | None:
        err = self.io_check(nsid, slba, nlb)
        if err is None and not self.ns[nsid][4]:  # a DRAM namespace maps nothing
            lba = self.ns[nsid][1]
            b0, b1 = slba * lba, (slba + nlb) * lba
            self.ns[nsid][3].update(range(b0 // IU, (b1 - 1) // IU + 1))
        return err

    def deallocate(self, nsid: int, slba: int, nlb: int) -> str | int:
        err = self.io_check(nsid, slba, nlb)
        if err is not None:
            return err
        if self.ns[nsid][4]:
            return 0  # nothing on NAND to deallocate
        lba = self.ns[nsid][1]
        b0, b1 = slba * lba, (slba + nlb) * lba
        whole = range(-(-b0 // IU), b1 // IU)  # IUs entirely inside the range
        self.ns[nsid][3].difference_update(whole)
        return len(whole)

    def nuse(self, nsid: int) -> int:
        nsze, lba, _, mapped, dram = self.ns[nsid]
        if dram:
            return nsze  # its DRAM is reserved in full
        return min(len(mapped) * IU // lba, nsze)


def status_of(call) -> object:  # type: ignore[no-untyped-def]
    try:
        return call()
    except NvmeError as e:
        return e.status  # type: ignore[attr-defined]


nsids = st.sampled_from([1, 2, 3, 4, 7, NSID_ALL])
io_nsids = st.sampled_from([1, 2, 3, 4, 7])


class ControllerMachine(RuleBasedStateMachine):
    """Random admin and I/O command sequences on a tiny drive, compared with Model."""

    def __init__(self) -> None:
        super().__init__()
        self.d = Drive.in_memory(spec_toml=TINY_DRAM, seed=1)
        c = self.d.nvme.id_ctrl()
        self.m = Model(c["tnvmcap"], c["nn"], TINY_DRAM_BUDGET)
        self.m.ns[1] = [c["tnvmcap"] // 512, 512, True, set(), False]
        self.host_written = 0

    @rule(blocks=st.one_of(st.integers(0, 3000), st.integers(0, 120_000)), flbas=st.sampled_from([0, 0, 1, 1, 4, 6]))
    def create_ns(self, blocks: int, flbas: int) -> None:
        # Sizes are in 4 KiB units for flbas 1, so draw fewer blocks there.
        nsze = blocks // 8 if LBA_DATA[flbas % len(LBA_DATA)] == 4096 else blocks
        got = status_of(lambda: self.d.nvme.create_ns(nsze, nsze, flbas=flbas))
        assert got == self.m.create(nsze, flbas)

    @rule(blocks=st.integers(0, 700), flbas=st.sampled_from([0, 0, 1, 6]))
    def create_dram_ns(self, blocks: int, flbas: int) -> None:
        nsze = blocks // 8 if flbas == 1 else blocks
        got = status_of(lambda: self.d.nvme.create_ns(nsze, nsze, flbas=flbas, dram=True))
        assert got == self.m.create(nsze, flbas, dram=True)

    @rule(nsid=nsids)
    def delete_ns(self, nsid: int) -> None:
        assert status_of(lambda: self.d.nvme.delete_ns(nsid)) == self.m.delete(nsid)

    @rule(nsid=io_nsids)
    def attach_ns(self, nsid: int) -> None:
        assert status_of(lambda: self.d.nvme.attach_ns(nsid)) == self.m.attach(nsid, True)

    @rule(nsid=io_nsids)
    def detach_ns(self, nsid: int) -> None:
        assert status_of(lambda: self.d.nvme.detach_ns(nsid)) == self.m.attach(nsid, False)

    @rule(nsid=nsids, lbaf=st.sampled_from([0, 1, 3, 7]), ses=st.sampled_from([0, 1, 2, 5]))
    def format(self, nsid: int, lbaf: int, ses: int) -> None:
        assert status_of(lambda: self.d.nvme.format(nsid, lbaf, ses)) == self.m.format(nsid, lbaf, ses)

    @rule(nsid=io_nsids, slba=st.integers(0, 100_000), nlb=st.integers(0, 300))
    def write(self, nsid: int, slba: int, nlb: int) -> None:
        err = self.m.write(nsid, slba, nlb)
        assert status_of(lambda: self.d.write(nsid, slba, nlb)) == err
        if err is None:
            self.host_written += nlb * self.m.ns[nsid][1]

    @rule(nsid=io_nsids, slba=st.integers(0, 100_000), nlb=st.integers(0, 3000))
    def deallocate(self, nsid: int, slba: int, nlb: int) -> None:
        assert status_of(lambda: self.d.deallocate(nsid, slba, nlb)) == self.m.deallocate(nsid, slba, nlb)

    @precondition(lambda self: any(v[2] for v in self.m.ns.values()))
    @rule(data=st.data())
    def fill(self, data: st.DataObject) -> None:
        """A burst of random 4 KiB writes big enough to make GC run."""
        nsid = data.draw(st.sampled_from(sorted(k for k, v in self.m.ns.items() if v[2])))
        nsze, lba = self.m.ns[nsid][0], self.m.ns[nsid][1]
        per = IU // lba
        if nsze < per:
            return
        for slba in data.draw(st.lists(st.integers(0, nsze // per - 1), min_size=1, max_size=400)):
            assert status_of(lambda s=slba * per: self.d.write(nsid, s, per)) == self.m.write(nsid, slba * per, per)
            self.host_written += IU

    @invariant()
    def matches_model(self) -> None:
        c = self.d.nvme.id_ctrl()
        listed = {n.nsid: n for n in self.d.namespaces()}
        assert c["tnvmcap"] == self.m.tnvmcap
        assert c["unvmcap"] == c["tnvmcap"] - sum(n.bytes for n in listed.values() if not n.dram) == self.m.unvmcap()
        assert c["vs_dram_ns"] == {"budget_bytes": TINY_DRAM_BUDGET, "unallocated_bytes": self.m.dram_free()}
        assert sorted(listed) == sorted(self.m.ns)
        for nsid, (nsze, lba, attached, _, dram) in self.m.ns.items():
            n = listed[nsid]
            assert (n.nsze, n.ncap, n.lba_bytes, n.attached, n.bytes, n.dram) == (nsze, nsze, lba, attached, nsze * lba, dram)
            assert n.nuse == self.m.nuse(nsid), nsid
        v = self.d.vendor_log()
        assert v["valid_bytes"] == sum(len(x[3]) for x in self.m.ns.values()) * IU
        # Every host write is counted as one, and DRAM-namespace writes never reach NAND.
        assert v["host_write_bytes"] == self.host_written
        assert v["host_write_bytes"] - v["dram_write_bytes"] == self.d.ftl_fingerprint()["counters"]["host_write_bytes"]

    def teardown(self) -> None:
        self.d.check()  # every FTL invariant (maps, valid counts, page conservation)
        self.d.close()


ControllerMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestController = ControllerMachine.TestCase


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), ops=st.lists(st.tuples(st.integers(0, 12_000), st.integers(1, 64)), max_size=200))
def test_writes_then_check_always_hold(seed: int, ops: list[tuple[int, int]]) -> None:
    """Arbitrary unaligned writes (RMW paths) then deallocations keep the FTL consistent."""
    d = Drive.in_memory(spec_toml=tiny_spec(write_buffer_bytes=8 * IU), seed=seed)
    nsze = d.namespaces()[0].nsze
    for slba, nlb in ops:
        if slba + nlb <= nsze:
            d.write(1, slba, nlb)
    d.precondition(1, "rand", 4096, amount_bytes=8 << 20, seed=seed)
    for slba, nlb in ops[::3]:
        if slba + nlb <= nsze:
            d.deallocate(1, slba, nlb)
    d.check()
    v = d.vendor_log()
    assert v["nand_write_bytes"] == v["nand_write_host_bytes"] + v["nand_write_gc_bytes"]
    assert v["valid_bytes"] + v["buffered_bytes"] <= d.nvme.id_ctrl()["tnvmcap"] + 8 * IU
