"""docs/traces.md runs as written: its `sh` blocks, one after the other in an empty
directory as a reader would run them, exit 0, and each prints what the `text` block after it
shows (blocks whose shown output leaves lines out with `…` are only run)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from twin import SSDTWIN

DOC = Path(__file__).resolve().parents[1] / "docs" / "traces.md"


def blocks() -> list[tuple[str, str]]:
    """(language, text) of every fenced block of the page."""
    return re.findall(r"```([a-z]*)\n(.*?)```", DOC.read_text(), re.S)


def runs_with_output() -> list[tuple[str, str | None]]:
    """Each `sh` block with the `text` block right after it (None if there is none)."""
    bs = blocks()
    after = [nxt if kind == "text" else None for kind, nxt in bs[1:]] + [None]
    return [(text, shown) for (lang, text), shown in zip(bs, after) if lang == "sh"]


def test_the_page_has_a_worked_example() -> None:
    runs = runs_with_output()
    assert len(runs) >= 4
    assert any("ssdtwin create" in r for r, _ in runs) and any("ssdtwin replay" in r for r, _ in runs)


def test_the_worked_example_runs_as_written(tmp_path: Path) -> None:
    if Path(SSDTWIN[0]).name != "ssdtwin":
        pytest.skip("the page runs the `ssdtwin` console script, which is not installed here")
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(SSDTWIN[0]).parent), os.environ.get("PATH", "")]))
    for script, shown in runs_with_output():
        bash = ["bash", "-euo", "pipefail", "-c", script]
        r = subprocess.run(bash, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
        assert r.returncode == 0, f"block failed (exit {r.returncode}):\n{script}\n{r.stdout[-3000:]}"
        assert "Traceback" not in r.stdout
        if shown is not None and "…" not in shown:
            assert r.stdout == shown, f"block:\n{script}\nprinted:\n{r.stdout}\nthe page shows:\n{shown}"
