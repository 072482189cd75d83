"""Random sequences of the NVMe admin commands a storage engineer strings together (namespace
management and attachment, write protect in every state, power cycles, format, QoS caps,
power states, temperature thresholds) against a reference model of NVMe 1.4's rules, on a
tiny in-memory drive; every invariant is checked after each step and ``check`` at the end.

Cheap in CI (a few seconds); ``SSDTWIN_STATEFUL_EXAMPLES=2000`` runs it longer locally.
test_api.py's ControllerMachine covers capacity, mapping and I/O; this one the features and
the state that must follow a namespace through delete, attach and power cycles.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Optional

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from ssdtwin.drive import Drive, NvmeError
from test_api import tiny_spec

NSID_ALL = 0xFFFFFFFF
WP_NONE, WP_PROTECT, WP_UNTIL_POWER_CYCLE, WP_PERMANENT = range(4)
#: The composite temperature the twin reports (K).
TEMPERATURE_K = 313
#: The CM6's power states: 0..5 operational, 6 non-operational (refused by the twin).
POWER_STATES = 7
UNDER = 1 << 20  # feature 04h CDW11 THSEL = 1

nsids = st.sampled_from([1, 2, 3, 5, NSID_ALL])
one_nsid = st.sampled_from([0, 1, 2, 3, 5])


def status_of(call: Callable[[], Any]) -> Optional[str]:
    try:
        call()
    except NvmeError as e:
        return str(e.status)  # type: ignore[attr-defined]
    return None


class NvmeFeatureMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.d = Drive.in_memory(spec_toml=tiny_spec(), seed=1)
        self.d.nvme.detach_ns(1)
        self.d.nvme.delete_ns(1)
        self.nn = self.d.nvme.id_ctrl()["nn"]
        # nsid -> {"attached", "wp", "iops"}
        self.ns: dict[int, dict[str, int]] = {}
        self.ps, self.over, self.under = 0, 343, 0
        # What Set Features with Save stored: a power cycle restores it (NVMe 1.4 §7.3).
        self.saved_ps, self.saved_over, self.saved_under = 0, 343, 0

    # -- namespace management --------------------------------------------------------------
    @rule(blocks=st.integers(1, 1000))
    def create_ns(self, blocks: int) -> None:
        free = next((i for i in range(1, self.nn + 1) if i not in self.ns), None)
        try:
            nsid: Optional[int] = self.d.nvme.create_ns(blocks, block_size=512)
        except NvmeError as e:
            assert free is None and e.status == "NS_ID_UNAVAILABLE", e  # type: ignore[attr-defined]
            return
        assert nsid == free
        self.ns[nsid] = {"attached": 0, "wp": WP_NONE, "iops": 0}

    @rule(nsid=nsids)
    def delete_ns(self, nsid: int) -> None:
        want = None if nsid == NSID_ALL or nsid in self.ns else "INVALID_NS"
        if want is None and any(self.ns[k]["wp"] for k in (list(self.ns) if nsid == NSID_ALL else [nsid])):
            want = "NS_WRITE_PROTECTED"  # deleting would destroy protected data: nothing is deleted
        assert status_of(lambda: self.d.nvme.delete_ns(nsid)) == want
        if want is None:
            for k in list(self.ns) if nsid == NSID_ALL else [nsid]:
                del self.ns[k]

    @rule(nsid=one_nsid, attach=st.booleans())
    def attach_or_detach(self, nsid: int, attach: bool) -> None:
        n = self.ns.get(nsid)
        if n is None:
            want: Optional[str] = "INVALID_NS"
        elif bool(n["attached"]) == attach:
            want = "NS_ALREADY_ATTACHED" if attach else "NS_NOT_ATTACHED"
        else:
            want = None
        call = self.d.nvme.attach_ns if attach else self.d.nvme.detach_ns
        assert status_of(lambda: call(nsid)) == want
        if want is None:
            self.ns[nsid]["attached"] = int(attach)

    # -- write protect, power, format, I/O -------------------------------------------------
    @rule(nsid=one_nsid, value=st.sampled_from([0, 1, 2, 3, 4, 7, 0x101]))
    def set_write_protect(self, nsid: int, value: int) -> None:
        n, wp = self.ns.get(nsid), value & 7
        if wp > WP_PERMANENT:
            want: Optional[str] = "INVALID_FIELD"
        elif n is None or not n["attached"]:
            want = "INVALID_NS"
        elif n["wp"] in (WP_UNTIL_POWER_CYCLE, WP_PERMANENT):
            want = "FEATURE_NOT_CHANGEABLE"  # NVMe 1.4 §8.12
        else:
            want = None
        assert status_of(lambda: self.d.nvme.set_feature(0x84, value, nsid=nsid)) == want
        if want is None:
            self.ns[nsid]["wp"] = wp

    @rule(unsafe=st.booleans())
    def power_cycle(self, unsafe: bool) -> None:
        self.d.power_cycle(unsafe)
        self.ps, self.over, self.under = self.saved_ps, self.saved_over, self.saved_under
        for n in self.ns.values():
            if n["wp"] == WP_UNTIL_POWER_CYCLE:
                n["wp"] = WP_NONE

    @rule(nsid=one_nsid)
    def write(self, nsid: int) -> None:
        n = self.ns.get(nsid)
        want = "INVALID_NS" if n is None or not n["attached"] else "NS_WRITE_PROTECTED" if n["wp"] else None
        assert status_of(lambda: self.d.write(nsid, 0, 1)) == want

    @rule(nsid=nsids)
    def format(self, nsid: int) -> None:
        ids = list(self.ns) if nsid == NSID_ALL else [nsid]
        if nsid != NSID_ALL and nsid not in self.ns:
            want: Optional[str] = "INVALID_NS"
        elif any(self.ns[i]["wp"] for i in ids):
            want = "NS_WRITE_PROTECTED"
        else:
            want = None
        assert status_of(lambda: self.d.nvme.format(nsid, 0)) == want

    # -- QoS, power states, temperature ----------------------------------------------------
    @rule(nsid=one_nsid, iops=st.sampled_from([0, 1, 5000]))
    def set_qos(self, nsid: int, iops: int) -> None:
        want = None if nsid in self.ns else "INVALID_NS"
        assert status_of(lambda: self.d.nvme.set_qos(nsid, iops=iops)) == want
        if want is None:
            self.ns[nsid]["iops"] = iops

    @rule(ps=st.integers(0, POWER_STATES), save=st.booleans())
    def set_power_state(self, ps: int, save: bool) -> None:
        want = None if ps < POWER_STATES - 1 else "INVALID_FIELD"
        assert status_of(lambda: self.d.nvme.set_feature(0x02, ps, save=save)) == want
        if want is None:
            self.ps = ps
            if save:
                self.saved_ps = ps

    @rule(thsel=st.sampled_from([0, 1, 2]), tmpsel=st.sampled_from([0, 1, 0xF]), kelvin=st.integers(250, 400), save=st.booleans())
    def set_temperature_threshold(self, thsel: int, tmpsel: int, kelvin: int, save: bool) -> None:
        want = None if thsel < 2 and tmpsel in (0, 0xF) else "INVALID_FIELD"
        assert status_of(lambda: self.d.nvme.set_feature(0x04, thsel << 20 | tmpsel << 16 | kelvin, save=save)) == want
        if want is None and thsel == 0:
            self.over = kelvin
            self.saved_over = kelvin if save else self.saved_over
        elif want is None:
            self.under = kelvin
            self.saved_under = kelvin if save else self.saved_under

    # -- what must hold after every step ---------------------------------------------------
    @invariant()
    def features_follow_the_model(self) -> None:
        listed = {n.nsid: n for n in self.d.namespaces()}
        assert sorted(listed) == sorted(self.ns)
        for nsid, n in self.ns.items():
            assert listed[nsid].attached == bool(n["attached"])
            got = status_of(lambda k=nsid: self.d.nvme.get_feature(0x84, nsid=k))
            assert got == (None if n["attached"] else "INVALID_NS")
            if n["attached"]:
                assert self.d.nvme.get_feature(0x84, nsid=nsid) == n["wp"]
        # QoS caps belong to the namespace: a deleted one's never reach a new one of its NSID.
        assert {r["nsid"]: r["iops"] for r in self.d.nvme.qos()} == {k: v["iops"] for k, v in self.ns.items()}
        assert self.d.nvme.get_feature(0x02) == self.ps
        assert self.d.nvme.get_feature(0x02, sel=2) == self.saved_ps
        assert self.d.nvme.get_feature(0x04, sel=2) == self.saved_over
        assert self.d.nvme.get_feature(0x04) == self.over
        assert self.d.nvme.get_feature(0x04, cdw11=UNDER) == UNDER | self.under
        hot = self.over <= TEMPERATURE_K or self.under > 0 and self.under >= TEMPERATURE_K
        assert self.d.nvme.smart_log()["critical_warning"] == (2 if hot else 0)

    def teardown(self) -> None:
        self.d.check()
        self.d.close()


NvmeFeatureMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("SSDTWIN_STATEFUL_EXAMPLES", "20")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestNvmeFeatures = NvmeFeatureMachine.TestCase
