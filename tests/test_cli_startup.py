"""A start of ``ssdtwin`` imports only the command it runs (commands/cli.py, ``_LazyGroup``).

About 560 tests start the CLI, many several times; importing every sub-command's module and
the libraries behind them (pts, cluster, the fio parser, stack, serve, sweep) cost each
start ~0.1 s of CPU (docs/performance.md, "CI time"). These tests keep that from coming back
unnoticed, and check that the lazily built commands still answer as before.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# Modules no short command needs: the sub-command modules built on demand, the packages
# behind them, and the heavy third-party libraries some commands import inside functions.
HEAVY = (
    "ssdtwin.commands.nvme",
    "ssdtwin.commands.pts",
    "ssdtwin.commands.cluster",
    "ssdtwin.commands.serve",
    "ssdtwin.commands.stack",
    "ssdtwin.commands.sweep",
    "ssdtwin.pts",
    "ssdtwin.cluster",
    "ssdtwin.fio",
    "ssdtwin.stack",
    "ssdtwin.studies",
    "ssdtwin.sweep",
    "click",
    "rich",
    "numpy",
    "pandas",
    "pyarrow",
    "matplotlib",
    "jinja2",
)

PROBE = """
import json, sys
from ssdtwin.commands.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
sys.__stderr__.write(json.dumps(sorted(sys.modules)))
"""


def imported(*args: str) -> set[str]:
    """The modules a run of ``ssdtwin ARGS`` has imported when it exits."""
    p = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60)
    return set(json.loads(p.stderr.splitlines()[-1]))


def heavy(modules: set[str]) -> set[str]:
    return {m for m in modules if m.startswith(HEAVY) and (m in HEAVY or m.startswith(tuple(h + "." for h in HEAVY)))}


@pytest.mark.parametrize("args", [["--version"], ["check", "--help"], ["create", "--help"], ["models", "--help"]])
def test_a_short_command_imports_no_sub_command_module_nor_heavy_library(args: list[str]) -> None:
    mods = imported(*args)
    assert "ssdtwin.commands.cli" in mods  # the probe ran the CLI
    assert not heavy(mods), f"ssdtwin {' '.join(args)} imported {sorted(heavy(mods))}"


def test_a_sub_command_imports_its_own_module_only() -> None:
    mods = imported("nvme", "list", "--help")
    assert "ssdtwin.commands.nvme" in mods
    assert heavy(mods) == {"ssdtwin.commands.nvme"}, sorted(heavy(mods))


def test_the_top_help_builds_every_lazy_command() -> None:
    """``ssdtwin --help`` lists each lazy command with its own first help line (not the
    placeholder's), in the order they were registered."""
    p = subprocess.run([sys.executable, "-m", "ssdtwin", "--help"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "Stands for a lazy command" not in p.stdout
    names = [line.split()[0] for line in p.stdout.split("Commands:\n")[1].splitlines() if line.strip()]
    lazy = ["serve", "stack", "sweep", "advise", "nvme", "bench", "pts", "cluster"]
    assert [n for n in names if n in lazy] == lazy
    assert names.index("fio") < names.index("serve") and names.index("advise") < names.index("calibrate")
    assert names[-4:] == ["nvme", "bench", "pts", "cluster"]
    assert "nvme-cli verbs against a drive image." in p.stdout
