"""The binding's types against the Rust structures (docs/architecture.md, "The binding").

Python's TypedDicts (fio/contract.py, core_types.py) are written by hand; these tests fail
when a Rust structure gains or loses a field, or an enum a variant, that its TypedDict
does not follow:

* inputs (serde `deny_unknown_fields`): the binding is handed an unknown field, and serde's
  error names every field the Rust structure has; they must be the TypedDict's keys;
* outputs: the values a real run returns must have the TypedDict's shape, key for key.
"""

from __future__ import annotations

import json
import re
import signal
from typing import Any, Literal, NotRequired, Optional, TypedDict, get_args

import pytest

from shape import fields, mismatches
from ssdtwin import _core, stack
from ssdtwin import core_types as T
from ssdtwin.cluster import Cluster
from ssdtwin.core_types import StackState, StackSummary
from ssdtwin.drive import Drive
from ssdtwin.fio import contract as C
from ssdtwin.fio import parse_string
from twin import CM6

PROBE = "zz_probe"


@pytest.fixture(scope="module")
def drive() -> Drive:
    return Drive.in_memory(CM6, scale=454)


def rust_names(d: Drive, spec: dict[str, Any]) -> set[str]:
    """The field (or variant) names serde expected where ``spec`` put PROBE."""
    with pytest.raises(ValueError) as e:
        d.run_fio([spec])
    message = str(e.value)
    assert f"`{PROBE}`" in message, message
    return set(re.findall(r"`([^`]+)`", message.split("expected", 1)[1]))


# Where each input structure sits in a JobSpec, as a JobSpec with PROBE there.
STRUCTS = [
    (C.JobSpec, {PROBE: 0}),
    (C.BsPerDir, {"bs": {PROBE: 0}}),
    (C.BsSpec, {"bs": {"read": {PROBE: 0}}}),
    (C.IntPerDir, {"blockalign": {PROBE: 0}}),
    (C.SplitPerDir, {"bssplit_fio": {PROBE: 0}}),
    (C.RandomDistribution, {"random_distribution": {PROBE: 0}}),
    (C.Zone, {"random_distribution": {"kind": "zoned", "param": None, "center": None, "zones": {"read": [{PROBE: 0}]}}}),
    (C.LogSpec, {"logs": {PROBE: 0}}),
    (C.ReplayTrace, {"replay": {PROBE: 0}}),
    (C.SteadyStateSpec, {"steadystate": {PROBE: 0}}),
]


@pytest.mark.parametrize("td,spec", STRUCTS, ids=[td.__name__ for td, _ in STRUCTS])
def test_input_typeddicts_have_the_rust_fields(drive: Drive, td: Any, spec: dict[str, Any]) -> None:
    assert set(fields(td)[0]) == rust_names(drive, spec)


# Literal-typed fields, and a JobSpec with PROBE as their value.
VARIANTS = [
    (C.JobSpec, "rate_process", {"rate_process": PROBE}),
    (C.JobSpec, "thinktime_blocks_type", {"thinktime_blocks_type": PROBE}),
    (C.JobSpec, "exit_what", {"exit_what": PROBE}),
    (C.SteadyStateSpec, "metric", {"steadystate": {"metric": PROBE}}),
]


@pytest.mark.parametrize("td,field,spec", VARIANTS, ids=[f for _, f, _ in VARIANTS])
def test_literals_have_the_rust_variants(drive: Drive, td: Any, field: str, spec: dict[str, Any]) -> None:
    (literal,) = [a for a in [fields(td)[0][field]] + list(get_args(fields(td)[0][field])) if getattr(a, "__origin__", None) is Literal]
    assert set(get_args(literal)) == rust_names(drive, spec)
    assert set(get_args(C.Ddir)) == rust_names(drive, {"directions": [PROBE]})


JOBS = {
    "plain": "[w]\nrw=randwrite\nbs=4k\nsize=16m\nnumber_ios=300\n",
    "mixed": "[m]\nrw=randrw\nbssplit=4k/50:8k/50\nsize=16m\nnumber_ios=300\nrandom_distribution=zoned:50/10:50/90\n",
    "every output": (
        "[s]\nrw=randread\nbs=4k\nsize=16m\ntime_based\nruntime=2\nss=iops:10%\nss_dur=1\nwrite_iolog=s.log\n"
        "write_bw_log=s\nwrite_lat_log=s\nwrite_hist_log=s\nlog_avg_msec=100\nexitall\nflow=1\n"
    ),
}


@pytest.mark.parametrize("name", sorted(JOBS))
def test_a_run_crosses_with_the_contract_types(drive: Drive, name: str) -> None:
    ns = drive.namespaces()[0]
    specs = parse_string(JOBS[name], name=f"{name}.fio").to_engine(ns.bytes, ns.lba_bytes)
    for spec in specs:
        assert mismatches(spec, C.JobSpec, "JobSpec") == []
    out = drive.run_fio(specs)
    for result in out:
        assert mismatches(result, C.CloneOut, "CloneOut") == []
    if name == "every output":
        assert {"steadystate", "iolog"} <= set(out[0]), "the run must show the optional fields too"


def test_a_drive_answers_with_the_drive_types(tmp_path: Any) -> None:
    d = _core.Drive.create(tmp_path / "img", CM6, scale=454)
    d.write(1, 0, 8)
    view = d.view()
    answers = [
        (d.manifest(), T.Manifest),
        (d.ftl_fingerprint(), T.FtlFingerprint),
        (d.ftl_info(), T.FtlInfo),
        (d.read(1, 0, 8), T.ReadSummary),
        (d.namespace(1), T.NamespaceRow),
        (d.precondition(1, "seq", 131072, 1 << 20, 1), T.PreconditionReport),
        (d.qos(), list[T.QosRow]),
        (_core.waf_measurement(d.vendor_log(), d.vendor_log(), "timed", 1 << 20), T.WafMeasurement),
    ]
    for source in (d, view):
        answers += [
            (source.id_ctrl(), T.IdCtrl),
            (source.id_ns(1), T.IdNs),
            (source.list_ns(), list[T.NamespaceRow]),
            (source.smart_log(), T.SmartLog),
            (source.vendor_log(), T.VendorLog),
        ]
    d.close()
    for value, tp in answers:
        assert mismatches(value, tp, str(tp)) == []


def test_fio_facts_have_their_type() -> None:
    assert mismatches(_core.fio_facts(), C.FioFacts, "FioFacts") == []


def test_stack_state_has_its_type_and_survives_a_json_file(drive: Drive) -> None:
    state = stack.new_state("pmem", stack.tier_params(drive, "log", 64 << 20))
    host = state["stack"]
    assert mismatches(host.to_state(), StackState, "StackState") == []
    run = parse_string("[w]\nrw=randwrite\nbs=4k\nsize=32m\nnumber_ios=2000\n", name="w.fio")
    before = host.counters()
    _, state = stack.run_parsed(drive, state, run, idle_gc=False)
    assert state["stack"] is host, "a run advances the stack in place"
    assert host.counters()["host_write_bytes"] == before["host_write_bytes"] + 2000 * 4096
    summary = host.summary()
    assert mismatches(summary, StackSummary, "StackSummary") == []
    assert summary["resident_bytes"] > 0, "the log tier holds the writes"
    # The readers give what state.json holds, key for key and in its order.
    saved = host.to_state()
    assert mismatches(saved, StackState, "StackState") == []
    for part, tp in [(host.counters(), T.TierCounters), (host.config(), T.TierConfig), (host.media(), T.MediaSpec)]:
        assert mismatches(part, tp, tp.__name__) == []
    assert json.dumps(host.counters()) == json.dumps(saved["tier"]["counters"])
    assert json.dumps(host.config()) == json.dumps(saved["tier"]["config"])
    assert json.dumps(host.media()) == json.dumps(saved["media"])
    # state.json: map keys become strings; the core reads them back as they were.
    text = json.dumps(saved)
    reread = _core.HostStack.from_state(json.loads(text))
    assert json.dumps(reread.to_state()) == text
    assert reread.summary() == summary
    _, again = stack.run_parsed(drive, {**state, "stack": reread}, run, idle_gc=False)
    assert mismatches(again["stack"].to_state(), StackState, "StackState") == []


def test_a_stack_state_that_does_not_fit_is_one_line_naming_it(drive: Drive) -> None:
    saved = stack.new_state("pmem", stack.tier_params(drive, "log", 64 << 20))["stack"].to_state()
    log = saved["tier"]["state"]["Log"]
    maps = [k for k, v in log.items() if isinstance(v, str)]
    assert maps, "the log tier's maps are hex strings"
    bad_digit = json.loads(json.dumps(saved))
    bad_digit["tier"]["state"]["Log"][maps[0]] = "zz" + log[maps[0]][2:]
    no_counters = json.loads(json.dumps(saved))
    del no_counters["tier"]["counters"]
    wrong_type = json.loads(json.dumps(saved))
    wrong_type["tier"]["config"]["capacity_bytes"] = "64MiB"
    for bad, needle in [
        (bad_digit, "non-hex digit"),
        (no_counters, "missing field `counters`"),
        (wrong_type, "invalid type: string"),
        ([1, 2], "stack state"),
    ]:
        with pytest.raises(ValueError) as e:
            _core.HostStack.from_state(bad)
        msg = str(e.value)
        assert msg.startswith("stack state: ") and needle in msg and "\n" not in msg, msg


def test_a_failed_run_leaves_the_stack_unusable(drive: Drive) -> None:
    host = stack.new_state("pmem", stack.tier_params(drive, "log", 64 << 20))["stack"]
    run = parse_string("[w]\nrw=randwrite\nbs=4k\nsize=32m\ntime_based\nruntime=1s\n", name="w.fio")
    specs = run.to_engine(host.summary()["user_bytes"], 512)
    # A namespace that is not there is refused before the run: the stack stays whole.
    with pytest.raises(_core.NvmeError, match="namespace 7 does not exist"):
        drive.run_fio_stack(specs, host, nsid=7)
    assert host.summary()["resident_bytes"] == 0

    def stop(done: int, total: int, unit: str, now_ns: int) -> None:
        raise RuntimeError("stopped")

    with pytest.raises(RuntimeError, match="stopped"):
        drive.run_fio_stack(specs, host, progress=stop)
    # Half a run's state is never used again, nor saved.
    with pytest.raises(_core.SsdtwinError, match="host stack: in use by a run, or left unusable by a run that failed"):
        host.summary()


class _Probe(TypedDict):
    n: int
    ratio: float
    kind: Literal["a", "b"]
    pairs: list[tuple[int, int]]
    note: NotRequired[Optional[str]]


@pytest.mark.parametrize(
    "value,found",
    [
        ({"n": 1, "ratio": 2, "kind": "a", "pairs": [(1, 2)]}, []),
        ({"n": 1, "ratio": 2.0, "kind": "a", "pairs": [], "note": None}, []),
        ({"ratio": 2.0, "kind": "a", "pairs": []}, ["v: missing n (_Probe)"]),
        ({"n": 1, "ratio": 2.0, "kind": "a", "pairs": [], "extra": 0}, ["v: extra is not a field of _Probe"]),
        (
            {"n": True, "ratio": 2.0, "kind": "c", "pairs": [[1, 2]]},
            ["v.kind: 'c' is not one of ('a', 'b')", "v.n: expected an int, got True"],
        ),
    ],
)
def test_the_shape_check_finds_missing_unknown_and_wrong_fields(value: dict[str, Any], found: list[str]) -> None:
    got = mismatches(value, _Probe, "v")
    assert [g for g in got if not g.startswith("v.pairs")] == found
    assert any(g.startswith("v.pairs[0]: expected a tuple") for g in got) == (value["pairs"] == [[1, 2]])


# --- the rest of the binding: logs, stacks, traces, serving, clusters, the host's memory --------

PB5 = "memblaze-pblaze5-910-3.84t"  # NVM Sets, Endurance Groups, Predictable Latency Mode


def probed(call: Any, what: str) -> set[str]:
    """The field (or variant) names serde expected where a call's input held PROBE."""
    with pytest.raises(ValueError) as e:
        call()
    message = str(e.value)
    assert message.startswith(what) and f"`{PROBE}`" in message, message
    return set(re.findall(r"`([^`]+)`", message.split("expected", 1)[1]))


def a_plan(**changes: Any) -> dict[str, Any]:
    """A trace plan with ``changes`` (dotted keys reach into its parts)."""
    plan: dict[str, Any] = {"format": "fio-iolog", "target": {"bytes": 1 << 30, "lba": 512, "beyond": "refuse", "widen": False}}
    for key, value in changes.items():
        part, _, field = key.partition("__")
        if field:
            plan[part] = {**plan.get(part, {}), field: value}
        else:
            plan[part] = value
    return plan


INPUTS = [
    (T.TierConfig, "tier parameters", lambda: _core.stack_new("pmem", {PROBE: 0})),
    (T.ClusterInitOptions, "cluster options", lambda: _core.cluster_init({PROBE: 0})),
    (C.TracePlan, "trace plan", lambda: _core.trace_scan("-", "-", {PROBE: 0})),
    (C.TraceFioReplay, "trace plan", lambda: _core.trace_scan("-", "-", a_plan(fio__zz_probe=0))),
    (C.TraceTarget, "trace plan", lambda: _core.trace_scan("-", "-", a_plan(target={PROBE: 0}))),
    (C.TraceLimits, "trace plan", lambda: _core.trace_scan("-", "-", a_plan(limits__zz_probe=0))),
]


@pytest.mark.parametrize("td,what,call", INPUTS, ids=[td.__name__ for td, _, _ in INPUTS])
def test_more_input_typeddicts_have_the_rust_fields(td: Any, what: str, call: Any) -> None:
    assert set(fields(td)[0]) == probed(call, what)


def test_input_literals_have_the_rust_variants() -> None:
    tier = {"policy": PROBE, "capacity_bytes": 0}
    assert set(get_args(fields(T.TierConfig)[0]["policy"])) == probed(lambda: _core.stack_new("pmem", tier), "tier parameters")
    target = {"bytes": 1, "lba": 512, "beyond": PROBE, "widen": False}
    assert set(get_args(C.Beyond)) == probed(lambda: _core.trace_scan("-", "-", a_plan(target=target)), "trace plan")


def test_the_logs_have_their_types(tmp_path: Any) -> None:
    d = _core.Drive.in_memory(PB5, scale=256, nvm_sets=2)
    d.set_feature(0x13, 1, cdw12=1)  # Predictable Latency Mode on in set 1
    d.inject_media_error(1, 0, 8)
    with pytest.raises(_core.NvmeError):
        d.read(1, 0, 8)
    view = d.view()
    answers = [
        (d.id_nvmset(), T.NvmSetList),
        (view.id_nvmset(), T.NvmSetList),
        (d.endurance_log(1), T.EnduranceGroupLog),
        (view.endurance_log(1), T.EnduranceGroupLog),
        (d.pred_lat_log(1), T.PredLatLog),
        (d.pred_lat_event_agg(), T.PredLatEventAgg),
        (d.plm_state(), list[T.PlmSet]),
        (d.get_lba_status(1, 0, 0xFFFF, 0x11, 0), T.LbaStatus),
        (view.error_log(), list[T.ErrorLogEntry]),
        (view.sanitize_log(), T.SanitizeLog),
        (d.sanitize_times(0), Optional[T.SanitizeTimes]),
        (d.recovery(), Optional[T.Recovery]),
        (d.precondition_touches(1, "rand", 4096, 1 << 20, 1), T.PreconditionTouches),
    ]
    assert d.plm_state() and view.error_log() and d.get_lba_status(1, 0, 0xFFFF, 0x11, 0)["descs"], "the lists are not empty"
    assert d.sanitize_times(0) is not None
    cm6 = _core.Drive.in_memory(CM6, scale=454)
    answers.append((cm6.ana_log(), T.AnaLog))
    vendor = _core.Drive.in_memory("intel-p5316-15.36t", scale=256).vendor_log()
    assert "intel_smart_add" in vendor, "a preset with Intel's additional SMART log shows its fields"
    answers.append((vendor, T.VendorLog))
    for value, tp in answers:
        assert mismatches(value, tp, str(tp)) == []


def test_a_stack_a_trace_and_the_host_memory_have_their_types(tmp_path: Any, drive: Drive) -> None:
    assert mismatches(_core.media_presets(), list[T.MediaSpec], "media_presets") == []
    img = tmp_path / "img"
    _core.Drive.create(img, CM6, scale=454).close()
    created = stack.create(tmp_path / "stk", img, "pmem:64MiB", "log")
    assert mismatches(created["tier"], T.TierConfig, "StackConfig.tier") == []
    config, state = stack.load(tmp_path / "stk")
    assert mismatches(config, T.StackFile, "StackFile") == []
    assert mismatches(state["stack"].to_state(), StackState, "StackState") == []
    trace = tmp_path / "t.log"
    trace.write_text("fio version 2 iolog\n/dev/x add\n/dev/x open\n/dev/x write 0 4096\n/dev/x read 4096 4096\n/dev/x close\n")
    plan = a_plan(limits={"max_ios": 100, "skip_bad": False})
    summary = _core.trace_scan(trace, str(trace), plan)
    assert mismatches(summary, C.TraceSummary, "TraceSummary") == []
    records, loaded = _core.trace_load(trace, str(trace), plan, 100)
    assert mismatches(loaded, C.TraceSummary, "TraceSummary") == [] and records
    assert mismatches(_core.rmw_rate(1 << 20, 1000), T.RmwReport, "RmwReport") == []


def test_a_served_session_has_its_types(tmp_path: Any) -> None:
    """``serve`` in this process, stopped by an alarm once ready: what it tells ``ready``, what
    it returns, and the live.json it kept."""
    img = tmp_path / "img"
    _core.Drive.create(img, CM6, scale=454).close()
    infos: list[Any] = []

    class Stop(Exception):
        pass

    def alarm(signum: int, frame: Any) -> None:
        raise Stop()

    def ready(info: Any) -> None:
        infos.append(info)
        signal.setitimer(signal.ITIMER_REAL, 1.5)  # live.json is written once a second

    old = signal.signal(signal.SIGALRM, alarm)
    try:
        summary = _core.serve(img, unix=[tmp_path / "s.sock"], ready=ready)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert summary["stopped_by"] == "Stop" and "seconds" in summary, summary
    assert mismatches(infos[0], T.ServeInfo, "ServeInfo") == []
    assert mismatches(summary, T.StoppedSummary, "StoppedSummary") == []
    found = _core.read_live_snapshot(img)
    assert found is not None, "the server kept its live.json"
    assert mismatches(found[0], T.LiveSnapshot, "LiveSnapshot") == []


def test_a_cluster_has_its_types() -> None:
    opts: T.ClusterInitOptions = {"nodes": 3, "drives_per_node": 2, "clients": 2, "scale": 512, "volume_bytes": 8 << 30}
    text = _core.cluster_init(opts)
    assert mismatches(_core.cluster_info(text), T.LayoutInfo, "LayoutInfo") == []
    run = parse_string("[global]\nrw=randread\nbs=4k\niodepth=4\ntime_based=1\nruntime=5ms\n[c0]\n[c1]\n", name="c.fio")
    volume = _core.cluster_info(text)["volume_bytes"]
    res = _core.cluster_run(text, run.to_engine(volume, 512))
    assert mismatches(res, T.ClusterRun, "ClusterRun") == []
    like = Cluster.from_text(text).options()  # what `cluster init --like` copies
    assert mismatches(like, T.ClusterInitOptions, "options()") == []
    assert _core.cluster_init(like) == text
