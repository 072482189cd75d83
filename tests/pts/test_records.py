"""The PTS records (ssdtwin.pts.records) against what a run produces.

The TypedDicts are written by hand beside the code that builds the records; these tests run
every PTS test (reduced: 1 s rounds, few elements) on a small twin in process and check
every record it builds, key for key and type for type (tests/shape.py): each round's row,
steady.json, result.json, pts.json, the settings, the tables' columns and ``-o json``. A key
added to a record without its type, or a type whose key no run produces, fails here.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from shape import fields, mismatches
from ssdtwin.pts import records as R
from ssdtwin.pts import steady as ss
from ssdtwin.pts import tests as T
from ssdtwin.pts.folder import load
from ssdtwin.pts.settings import Settings
from ssdtwin.pts.suite import Runner
from ssdtwin.pts.target import DeviceInfo
from ssdtwin.pts.testrun import TestRun as OneTest  # not "Test*": pytest would collect it
from ssdtwin.pts.twin import TwinTarget
from twin import check_image, run_cli

MODEL = "kioxia-cm6-v-3.2t"
# Every test at its smallest (as tests/pts/test_harness_cli.py and test_xsr_di.py run them).
SETTINGS = Settings(
    round_s=1.0,
    max_rounds=5,
    iops_bs=(4096, 131072),
    iops_mixes=(100, 65, 0),
    lat_bs=(4096,),
    lat_mixes=(100, 0),
    tp_bs=(131072,),
    wsat_fills=0.5,
    hir_reps=1,
    hir_waits_s=(5.0,),
    hir_pre_fills=0.5,
    curve_jobs=(1, 2),
    curve_qd=(1, 4),
    xsr_hours=(0.5, 0.5, 0.5),
    di_tc=(4, 1),
    di_qd=(8, 1),
    di_pc_intervals=2,
    di_rth_s=1.0,
    di_rth_prewrite_s=60.0,
)
# Keys a record type has that this run does not produce, and why.
NOT_PRODUCED: dict[Any, set[str]] = {
    # a partial run's; WSAT's with --wsat-stop-steady (its type is checked below); HIR's when not steady
    R.TestExtra: {"table_error", "steady", "notes"},
}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    base = tmp_path_factory.mktemp("pts-records")
    img = base / "cm6v"
    run_cli("create", img, "--model", MODEL, "--scale", "1/454")
    SETTINGS.validate()
    target = TwinTarget(str(img), seed=SETTINGS.seed)
    (base / "report").mkdir()
    try:
        runner = Runner(target, base / "report", SETTINGS)
        runner.run(list(T.TEST_IDS))
    finally:
        target.close()
    check_image(img)
    return runner


class Seen:
    """Every value checked against its type, and the keys seen per TypedDict."""

    def __init__(self) -> None:
        self.keys: dict[Any, set[str]] = {}
        self.problems: list[str] = []

    def check(self, value: Any, tp: Any, path: str, from_json: bool = False) -> None:
        self.problems += mismatches(value, tp, path, from_json)
        self._collect(value, tp)

    def _collect(self, value: Any, tp: Any) -> None:
        if not isinstance(value, dict) or not hasattr(tp, "__required_keys__"):
            return
        self.keys.setdefault(tp, set()).update(value)
        hints, _ = fields(tp)
        for k, v in value.items():
            sub = hints.get(k)
            if hasattr(sub, "__required_keys__"):
                self._collect(v, sub)
            elif getattr(sub, "__origin__", None) is list and hasattr(sub.__args__[0], "__required_keys__"):
                for item in v:
                    self._collect(item, sub.__args__[0])


def check_test(seen: Seen, tr: OneTest) -> None:
    for i, row in enumerate(tr.rows):
        seen.check(row, R.RoundRow, f"{tr.test} rows[{i}]")
    if tr.steady_doc is not None:
        seen.check(tr.steady_doc, R.SteadyState, f"{tr.test} steady_doc")
        on_disk = json.loads((tr.dir / "steady.json").read_text())
        seen.check(on_disk, R.SteadyState, f"{tr.test}/steady.json", from_json=True)
    seen.check(tr.result_doc(), R.TestResult, f"{tr.test} result_doc")
    seen.check(json.loads((tr.dir / "result.json").read_text()), R.TestResult, f"{tr.test}/result.json", from_json=True)


def test_every_record_has_its_type(run: Runner) -> None:
    seen = Seen()
    assert list(run.tests) == list(T.TEST_IDS)
    for tr in run.tests.values():
        assert tr.status in ("steady", "not steady", "complete"), (tr.test, tr.status, tr.message)
        check_test(seen, tr)
    seen.check(run.manifest, R.Manifest, "manifest")
    seen.check(json.loads((run.folder / "pts.json").read_text()), R.Manifest, "pts.json", from_json=True)
    seen.check(load(run.folder).to_json(), R.RunOutput, "-o json", from_json=True)
    assert seen.problems == []
    # Every key of a record type is one this run produced (no stale or misspelt field).
    for tp in (R.RoundRow, R.SteadyState, R.SteadyVariable, R.PassVerdict, R.TestResult, R.TestSettings, R.TestExtra, R.Manifest):
        missing = set(fields(tp)[0]) - seen.keys.get(tp, set()) - NOT_PRODUCED.get(tp, set())
        assert not missing, (tp.__name__, missing)
    assert seen.keys[R.DeviceExtra] == {"iu_bytes", "namespace", "power_state", "power_state_desc", "image", "seed"}  # a twin's


def test_the_settings_and_the_device_have_every_field(run: Runner) -> None:
    assert set(fields(R.SettingsDoc)[0]) == {f.name for f in dataclasses.fields(Settings)}
    assert mismatches(SETTINGS.to_json(), R.SettingsDoc) == []
    assert set(fields(R.DeviceDoc)[0]) == {f.name for f in dataclasses.fields(DeviceInfo)}
    assert mismatches(run.target.info.to_json(), R.DeviceDoc) == []


@pytest.mark.parametrize(
    "test,row", [("tp", R.TpTableRow), ("lat", R.LatTableRow), ("xsr", R.XsrGroup), ("cbw", R.DiTableRow), ("dirth", R.DiTableRow)]
)
def test_the_tables_columns_are_their_rows_keys(run: Runner, test: str, row: Any) -> None:
    with (run.folder / test / "table.csv").open() as f:
        header = next(csv.reader(f))
    assert header == list(fields(row)[0])


def test_a_window_check_and_the_timing_columns_have_their_types() -> None:
    check = ss.check_window([3, 4, 5, 6, 7], [100.0, 101.0, 99.0, 100.5, 100.0])
    assert check.steady and mismatches(check.to_dict(), R.WindowCheckDoc) == []
    assert set(check.to_dict()) == set(fields(R.WindowCheckDoc)[0])


def test_a_real_file_targets_device_block(tmp_path: Path) -> None:
    if shutil.which("fio") is None:
        pytest.skip("`fio` is not installed (CI installs it)")
    from ssdtwin.pts.realfio import RealFioTarget

    f = tmp_path / "disk.img"
    f.write_bytes(bytes(1 << 20))
    target = RealFioTarget(str(f), allow_destroy=True)
    try:
        doc = target.info.to_json()
    finally:
        target.close()
    assert mismatches(doc, R.DeviceDoc) == []
    assert set(doc["extra"]) == {"path", "fio", "fio_path", "purge_requested"}
