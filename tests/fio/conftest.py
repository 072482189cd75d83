"""Shared fixtures for the fio layer tests."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
GOLDEN = HERE / "golden"
# A real fio 3.33 run: the job file fio-sample.fio and its JSON output fio-sample.json.
REFERENCE = DATA / "real"

# The helper modules (fake engine, real-fio stats loader) live next to the tests.
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "tools: needs external programs (fio); skipped when absent")


@pytest.fixture
def fio_binary() -> str:
    path = shutil.which("fio")
    if path is None:
        pytest.skip("the real fio binary is not installed")
    return path


def golden(name: str, text: str) -> None:
    """Compare with tests/fio/golden/NAME; rewrite it only when UPDATE_GOLDEN=1."""
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.exists(), f"missing golden file {path}; run with UPDATE_GOLDEN=1 to create it"
    expected = path.read_text()
    assert text == expected, f"output differs from {path} (UPDATE_GOLDEN=1 rewrites it after review)"
