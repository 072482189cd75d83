"""Fixtures for the CLI, API, crash and physics tests: small drive images, made once per
session and copied cheaply for each test (helpers live in twin.py)."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

import pytest

from twin import CM6, Run, check_image, check_shared_images, copy_image, run_cli


def pytest_configure(config: pytest.Config) -> None:
    # (A module/session fixture's shared image damaged on purpose opts out with a file DAMAGED in it.)
    config.addinivalue_line("markers", "damages_image: the test leaves a deliberately damaged image behind (not checked)")
    # A shell without job control starts a background job (`cmd &` in a script, a CI runner's
    # nohup) with SIGINT ignored, every child inherits that, and Python leaves an ignored SIGINT
    # ignored: the Ctrl-C tests' `ssdtwin` would never see their signal. The tests need the
    # terminal's default; a handler here (in each xdist worker) is reset to it at exec.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # Under nohup SIGHUP is ignored the same way, and `ssdtwin serve` keeps an ignored SIGHUP
    # ignored (as nohup asks): the hang-up test's server would never see its signal. A
    # handler that does nothing keeps this process as nohup left it; its children start with
    # the default (a handler is reset at exec).
    if signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        signal.signal(signal.SIGHUP, lambda _sig, _frame: None)
    _fio_with_a_named_clock()


SHIMS = Path(__file__).resolve().parent / "shims"


def _fio_with_a_named_clock() -> None:
    """Every `fio` the tests start (directly, through `ssdtwin`, in a README block) runs
    tests/shims/fio: the real binary with `--clocksource=clock_gettime`, which skips fio's
    TSC self-test at start-up (~0.07 s of CPU per start, ~270 starts; see the shim)."""
    real = shutil.which("fio")
    if real is None or Path(real).resolve().parent == SHIMS:
        return
    os.environ["SSDTWIN_TEST_REAL_FIO"] = real
    os.environ["PATH"] = f"{SHIMS}{os.pathsep}{os.environ.get('PATH', '')}"


# The costliest test files, heaviest first. Under `--dist loadfile` a file runs whole on one
# worker, and xdist hands files out in collection order (the Makefile passes
# --no-loadscope-reorder: xdist's own reorder puts the files with the most tests first, which
# sent the two-test, 60 s validate file last), so the long ones start first and a long file
# never runs alone at the end (longest processing time first). Files not listed follow in the
# usual order. The figures: CPU seconds of each file (user + sys, child processes included;
# getrusage around each test, summed per file) in a `pytest -n 3 --dist loadfile` run of the
# whole suite, stop 59, with that stop's cuts (docs/performance.md, "CI time"); the files that
# wait on real time (servers, real fio, MariaDB, Ctrl-C) take longer on a worker than their CPU
# says, so they stand higher than their CPU alone would put them.
COSTLIEST_FILES = (
    "tests/test_validate.py",  # 45 s: validate --quick on two processes
    "tests/test_serve.py",  # 21 s, most of a worker's wall of any file: real clients over NBD in real time
    "tests/test_reproduce.py",  # 31 s
    "tests/test_physics.py",  # 24 s
    "tests/pts/test_records.py",  # 23 s: every PTS test on a small twin, one CLI run
    "tests/pts/test_report_figures.py",  # 21 s
    "tests/test_sweep.py",  # 20 s
    "tests/test_signals.py",  # 15 s: signals to real processes
    "tests/pts/test_report.py",  # 15 s: headless chromium
    "tests/test_experiments.py",  # 14 s
    "tests/test_readme.py",  # 13 s: the README's blocks in bash, a server in real time
    "tests/test_mariadb.py",  # 12 s: a real MariaDB
    "tests/test_doublewrite.py",  # 12 s
    "tests/test_advise.py",  # 12 s
    "tests/test_cli.py",  # 11 s
    "tests/pts/test_pts_scale.py",  # 11 s
    "tests/test_calibrate.py",  # 9 s
    "tests/fio/test_fio_bad_input.py",  # 9 s
    "tests/test_stack_serve.py",  # 8 s: NBD in real time
    "tests/test_tenants.py",  # 8 s: NBD in real time
    "tests/test_bad_input.py",  # 8 s over 261 tests
    "tests/test_crash.py",  # 6 s: kills in real time
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(COSTLIEST_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


# The folders (direct children of the base temp) that are some test's own tmp_path: their
# images are checked when that test ends, so the check of the shared images skips them.
_TEST_TMP_FOLDERS: set[str] = set()


@pytest.fixture(scope="session", autouse=True)
def _check_shared_images(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """`ssdtwin check` on every drive image under the base temp that is no test's own
    tmp_path: the templates and module/session fixtures' images (tmp_path_factory.mktemp),
    which tests share and often write. Each is checked once, when the session (an xdist
    worker's) ends: after its last user and after every other fixture's teardown (this one
    is set up first, so it is torn down last). A failure shows as an error at the teardown
    of the last test, naming the image; its folder is the name the fixture gave mktemp.
    A fixture whose image is damaged on purpose puts a file named DAMAGED in it."""
    yield
    check_shared_images(tmp_path_factory.getbasetemp(), _TEST_TMP_FOLDERS)


@pytest.fixture(autouse=True)
def _check_images_left_behind(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[None]:
    """`ssdtwin check` (the same open and full FTL check) on every drive image a test leaves
    in its tmp_path: a test that passes must not leave an inconsistent image behind."""
    _TEST_TMP_FOLDERS.add(tmp_path.name)  # pytest makes each tmp_path right under the base temp
    yield
    if request.node.get_closest_marker("damages_image"):
        return
    for manifest in sorted(tmp_path.rglob("ssdtwin.toml")):
        check_image(manifest.parent)


@pytest.fixture(scope="session")
def cli() -> Callable[..., Run]:
    return run_cli


@pytest.fixture(scope="session")
def cm6_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A factory-fresh CM6 image at 1/64 scale, made once; tests get copies."""
    d = tmp_path_factory.mktemp("template") / "cm6"
    run_cli("create", d, "--model", CM6, "--scale", "1/64")
    check_image(d)
    return d


@pytest.fixture(scope="session")
def cm6_written_template(tmp_path_factory: pytest.TempPathFactory, cm6_template: Path) -> Path:
    """The CM6 template after a 128k sequential fill (maps on disk are non-trivial)."""
    d = copy_image(cm6_template, tmp_path_factory.mktemp("template-written") / "cm6")
    run_cli("precondition", d, "--seq", "128k", "--loops", "1", "--seed", "7")
    check_image(d)
    return d


@pytest.fixture(scope="session")
def small_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The smallest CM6 image the spec allows to be useful: 1/454 scale, 8 superblocks
    (5 of data), 10.57 GB user. For tests of behaviour that does not depend on size."""
    d = tmp_path_factory.mktemp("template-small") / "cm6s"
    run_cli("create", d, "--model", CM6, "--scale", "1/454")
    run_cli("precondition", d, "--seq", "128k", "--loops", "1", "--rand", "4k", "--amount", "0.5x", "--seed", "3", "-q")
    check_image(d)
    return d


@pytest.fixture
def small(tmp_path: Path, small_template: Path) -> Path:
    """A written (sequential fill, then random) CM6 image at 1/454."""
    return copy_image(small_template, tmp_path / "cm6s")


@pytest.fixture(scope="session")
def fresh_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A factory-fresh CM6 at 1/454: nothing written, one namespace of 9.39 GB."""
    d = tmp_path_factory.mktemp("fio-fresh") / "cm6"
    run_cli("create", d, "--model", CM6, "--scale", "1/454")
    check_image(d)
    return d


@pytest.fixture
def fresh(tmp_path: Path, fresh_template: Path) -> Path:
    """A copy of the fresh CM6 at 1/454 (tests that write it start from nothing)."""
    return copy_image(fresh_template, tmp_path / "img")


@pytest.fixture
def cm6(tmp_path: Path, cm6_template: Path) -> Path:
    return copy_image(cm6_template, tmp_path / "cm6")


@pytest.fixture
def cm6_written(tmp_path: Path, cm6_written_template: Path) -> Path:
    return copy_image(cm6_written_template, tmp_path / "cm6w")
