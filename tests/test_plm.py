"""Predictable Latency Mode (NVMe 1.4 IO Determinism, docs/tenants.md) from the CLI: features
0x13/0x14 per NVM Set, the Predictable Latency Per NVM Set log (0Ah) and the event
aggregate log (0Bh) with nvme-cli's JSON names, and a deterministic window that expires in
simulated time during a fio run. The refusals are in test_bad_input.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from twin import check_image, copy_image, run_cli

PB5 = "memblaze-pblaze5-910-3.84t"

# nvme-cli's json_predictable_latency_per_nvmset, in its order.
PRED_LAT_KEYS = [
    "nvmset_id",
    "status",
    "event_type",
    "dtwin_reads_typical",
    "dtwin_writes_typical",
    "dtwin_time_maximum",
    "ndwin_time_minimum_high",
    "ndwin_time_minimum_low",
    "dtwin_reads_estimate",
    "dtwin_writes_estimate",
    "dtwin_time_estimate",
]


@pytest.fixture(scope="module")
def plm_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("plm") / "pb5"
    run_cli("create", d, "--model", PB5, "--scale", "1/256", "--nvm-sets", "2")
    return d


@pytest.fixture
def pb5(tmp_path: Path, plm_template: Path) -> Path:
    return copy_image(plm_template, tmp_path / "pb5")


def job(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / name
    p.write_text("[global]\nfilename=ns1\nbs=4k\ntime_based=1\n" + body)
    return p


def log(image: Path, nvmsetid: int = 1) -> dict[str, int]:
    d: dict[str, int] = run_cli("nvme", "predictable-lat-log", image, "-i", str(nvmsetid), "-o", "json").json()
    return d


def test_a_power_cycle_disables_predictable_latency_mode(pb5: Path) -> None:
    """Features 13h and 14h are not saveable (NVMe 1.4 Figure 271): after a power cycle they
    read their defaults. The set stayed in its window through it."""
    run_cli("nvme", "set-feature", pb5, "-f", "0x13", "-V", "1", "-c", "1")
    assert log(pb5)["status"] == 2
    run_cli("power-cycle", pb5)
    assert run_cli("nvme", "get-feature", pb5, "-f", "0x13", "-c", "1", "-o", "json").json()["value"] == 0
    assert run_cli("nvme", "get-feature", pb5, "-f", "0x14", "-c", "1", "-o", "json").json()["value"] == 0
    assert log(pb5)["status"] == 0
    check_image(pb5)


def test_windows_follow_the_features_and_expire_in_simulated_time(pb5: Path, tmp_path: Path) -> None:
    off = log(pb5)
    assert list(off) == PRED_LAT_KEYS
    assert (off["status"], off["dtwin_time_maximum"], off["dtwin_writes_estimate"]) == (0, 30000, 0)
    # An empty set has nothing to collect: its NDWIN minimum is the low one.
    assert off["dtwin_writes_typical"] > 0 and off["ndwin_time_minimum_high"] == off["ndwin_time_minimum_low"] == 1000
    run_cli("nvme", "set-feature", pb5, "-f", "0x13", "-V", "1", "-c", "1")
    assert run_cli("nvme", "get-feature", pb5, "-f", "0x13", "-c", "1", "-o", "json").json()["value"] == 1
    assert run_cli("nvme", "get-feature", pb5, "-f", "0x14", "-c", "1", "-o", "json").json()["value"] == 2
    assert log(pb5)["status"] == 2 and log(pb5, 2)["status"] == 0
    # The NDWIN minimum (1 s after nothing was written) passes in a fio run.
    run_cli("fio", pb5, job(tmp_path, "ndwin.fio", "runtime=2s\n[w]\nrw=randwrite\nrate=1m\n"))
    run_cli("nvme", "set-feature", pb5, "-f", "0x14", "-V", "1", "-c", "1")
    dt = log(pb5)
    assert (dt["status"], dt["event_type"], dt["dtwin_time_estimate"]) == (1, 0, 30000)
    # A 35 s run outlives DTWIN Time Maximum: the controller ends the window by itself.
    run_cli("fio", pb5, job(tmp_path, "dtwin.fio", "runtime=35s\n[w]\nrw=randwrite\nrate=1m\n"))
    after = log(pb5)
    assert (after["status"], after["event_type"]) == (2, 0x4000)
    assert run_cli("nvme", "pred-lat-event-agg-log", pb5, "-o", "json").json() == {
        "num_entries_avail": 1,
        "list_of_entries": [{"entry": 1}],
    }
    text = run_cli("nvme", "predictable-lat-log", pb5, "-i", "1").stdout
    # nvme-cli 2.4's lines as they are (the twin wrote "NVM Set ID: 1", "Status: 2 (...)",
    # "DTWIN Time Maximum: 30000 ms"), its notes on lines of their own after them
    assert f"device: {pb5}\nPredictable Latency Per NVM Set Log for NVM Set ID: 1\nStatus: 2\nEvent Type: 16384\n" in text
    assert "\nDTWIN Time Maximum: 30000\nNDWIN Time Minimum High: 1000 \nNDWIN Time Minimum Low: 1000\n" in text
    assert "\nDTWIN Time Estimate: 30000\n\n\n(twin) status 2: non-deterministic window (NDWIN); times in ms\n" in text
    assert "Entry[1]: 1\n" in run_cli("nvme", "pred-lat-event-agg-log", pb5).stdout
    assert "last DTWIN: 30000.0 ms, ended by the controller (time)" in text
    # The host leaves PLM: set 1 is back to the normal GC and the log says not enabled.
    run_cli("nvme", "set-feature", pb5, "-f", "0x13", "-V", "1", "-c", "0")
    assert log(pb5)["status"] == 0
