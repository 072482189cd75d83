"""The README runs as written on a fresh machine.

Every `ssdtwin` command line in the README's shell blocks names a command that exists and
only flags that command's `--help` lists; the quick blocks (a drive the nvme-cli way, fio
job files, serving over NBD, the Python API) are run as they stand, in an empty directory,
one after the other as a reader would. The long ones (`pip install`, `make`, `demo`,
`reproduce`, `calibrate`, `pts`, `sweep`, `advise`) are only checked for their command lines: they take minutes, and
tests/test_reproduce.py and tests/test_experiments.py run what they run.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from twin import SSDTWIN, run_cli

README = Path(__file__).resolve().parents[1] / "README.md"


def blocks() -> list[tuple[str, str]]:
    """(language, text) of every fenced block of the README."""
    return re.findall(r"```([a-z]*)\n(.*?)```", README.read_text(), re.S)


def shell_blocks() -> list[str]:
    """Blocks of commands (not of output): the first word of the first line is a program."""
    return [text for lang, text in blocks() if lang == "" and text.split()[0] in ("pip", "ssdtwin", "cat")]


def command_lines(text: str) -> list[list[str]]:
    """Each shell command of a block as words (comments, heredoc bodies and the shell's
    `&`, `&&`, `;`, `|` split off)."""
    out: list[list[str]] = []
    lines = iter(text.splitlines())
    for line in lines:
        if "<<'EOF'" in line:
            for body in lines:
                if body.strip() == "EOF":
                    break
            continue
        lexer = shlex.shlex(line, posix=True, punctuation_chars="&;|")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        words: list[str] = []
        for w in lexer:
            if w in ("&", "&&", ";", "|", "||"):
                out.append(words)
                words = []
            else:
                words.append(w)
        out.append(words)
    return [w for w in out if w]


def ssdtwin_invocations(words: list[str]) -> list[list[str]]:
    """`ssdtwin ...` in a command's words, including the command `ssdtwin waf ... --` runs."""
    starts = [i for i, w in enumerate(words) if w == "ssdtwin"]
    return [words[a:b] for a, b in zip(starts, starts[1:] + [len(words)])]


@cache
def help_text(*command: str) -> str:
    return run_cli(*command, "--help").stdout


def subcommand(words: list[str]) -> tuple[str, ...]:
    """('nvme', 'create-ns') from ['ssdtwin', 'nvme', 'create-ns', './cm6', ...]."""
    cmd = words[1:2]
    if cmd and cmd[0] in ("nvme", "bench", "cluster") and len(words) > 2:
        cmd = words[1:3]
    if cmd == ["pts"] and len(words) > 2:  # `ssdtwin pts TARGET ...` is `ssdtwin pts run TARGET ...`
        return ("pts", "compare" if words[2] == "compare" else "run")
    return tuple(cmd)


INVOCATIONS = [inv for text in shell_blocks() for words in command_lines(text) for inv in ssdtwin_invocations(words)]


def test_the_readme_has_commands_to_check() -> None:
    assert len(INVOCATIONS) >= 20, INVOCATIONS
    assert {subcommand(i) for i in INVOCATIONS} >= {
        ("demo",),
        ("create",),
        ("nvme", "create-ns"),
        ("precondition",),
        ("waf",),
        ("fio",),
        ("serve",),
        ("reproduce",),
        ("calibrate",),
    }


@pytest.mark.parametrize("words", INVOCATIONS, ids=lambda w: " ".join(w)[:60])
def test_every_readme_command_and_flag_exists(words: list[str]) -> None:
    cmd = subcommand(words)
    listing = help_text(*cmd[:-1]) if cmd else help_text()
    if cmd:
        assert re.search(rf"(?m)^\s+{re.escape(cmd[-1])}\s", listing), f"no command {' '.join(cmd)}"
    own = help_text(*cmd)
    args = words[1 + len(cmd) :]
    if cmd == ("waf",) and "--" in args:
        args = args[: args.index("--")]
    for a in args:
        if a.startswith("-") and a != "-":
            flag = a.split("=", 1)[0]
            assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", own), (
                f"{' '.join(words)}: {flag} is not in `ssdtwin {' '.join(cmd)} --help`"
            )


LONG = (
    "pip install",
    "make ",
    "ssdtwin demo",
    "ssdtwin reproduce",
    "ssdtwin calibrate",
    "ssdtwin validate",
    "ssdtwin pts",
    "ssdtwin sweep",
    "ssdtwin advise",
)


def runnable(text: str) -> bool:
    return not any(line.lstrip().startswith(LONG) for line in text.splitlines())


def missing_tools(text: str) -> list[str]:
    """Programs a block runs that are not installed (`until PROG ...` counts PROG)."""
    progs = {w[1] if w[0] in ("until", "while", "do") and len(w) > 1 else w[0] for w in command_lines(text)}
    return sorted(p for p in progs - {"done", "kill", "wait"} if shutil.which(p) is None)


def bash(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # `ssdtwin` as the README means it: the console script of the interpreter running the tests.
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(SSDTWIN[0]).parent), os.environ.get("PATH", "")]))
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_the_quick_readme_blocks_run_as_written(tmp_path: Path) -> None:
    if Path(SSDTWIN[0]).name != "ssdtwin":
        pytest.skip("the README runs the `ssdtwin` console script, which is not installed here")
    ran = 0
    for text in shell_blocks():
        if not runnable(text):
            continue
        tools = missing_tools(text)
        if tools:
            pytest.skip(f"the README block starting {text.splitlines()[0]!r} needs {', '.join(tools)}")
        r = bash(text, tmp_path)
        assert r.returncode == 0, (
            f"README block failed (exit {r.returncode}):\n{text}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
        )
        assert "Traceback" not in r.stderr and "panicked" not in r.stderr
        ran += 1
    assert ran == 3
    # The README promises the image survives all of it, and the server committed on SIGTERM.
    run_cli("check", tmp_path / "cm6")
    assert "stopped by SIGTERM" in r.stderr and "committed generation" in r.stderr
    # ... and that its Python example runs (the same directory: it makes ./p5316).
    (py,) = [t for lang, t in blocks() if lang == "python"]
    script = "\n".join(line.split("  #")[0] for line in py.splitlines())  # the lines as statements
    p = subprocess.run([sys.executable, "-c", script + "\nprint(r.waf)"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    claimed = float(re.search(r"r\.waf ≈ (\d+)", py).group(1))  # type: ignore[union-attr]
    assert float(p.stdout.split()[-1]) == pytest.approx(claimed, rel=0.05)
    run_cli("check", tmp_path / "p5316")
