"""PTS tests at once on a twin (``--jobs``): each test in a process of its own on an
in-memory copy of the image; the parent owns pts.json and the progress display."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from .folder import PtsResult, load, render_report
from .progress import Events
from .records import TestStatus
from .settings import Settings
from .suite import Runner
from .target import PtsError

if TYPE_CHECKING:
    from multiprocessing.context import SpawnProcess


@contextlib.contextmanager
def _no_writer(path: Path, jobs: int) -> Iterator[None]:
    """A shared lock on the image's LOCK for the whole run: refused at once (a one-line
    PtsError) while a writer (``ssdtwin serve``, a CLI command) holds it, and no writer can
    take it until the run ends. Each test opens the image when its process starts: beside a
    writer every test would start from a different state, and the image would change under
    the report that says it stayed unchanged."""
    import fcntl

    try:
        f = open(path / "LOCK")  # noqa: SIM115 (held for the with block)
    except FileNotFoundError:
        yield  # never opened for writing: nobody is writing it
        return
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = f.read().strip() or "unknown"
            raise PtsError(
                f"{path}: in use by another ssdtwin process (pid {pid}, e.g. ssdtwin serve): --jobs {jobs} runs each test on "
                "a copy of the image taken when the test starts, and that process is changing it; stop it first "
                "(or run one test at a time against its NBD export)"
            ) from None
        yield


def run_parallel(
    spec: str, names: list[str], folder: Path, cfg: Settings, events: Optional[Events], jobs: int, namespace: Optional[int], render: bool
) -> PtsResult:
    """Tests at once on a twin: each in a process of its own (``spawn``) on an in-memory copy
    of the image, the parent owning pts.json and the progress display. A test's results do
    not depend on which tests run beside it or before it: every one starts from the image as
    it was (with --jobs 1 a test starts from the state the previous one left, wear included).
    The image is held against writers for the whole run (:func:`_no_writer`)."""
    from .twin import split_spec

    with _no_writer(split_spec(spec)[0], jobs):
        return _run_parallel(spec, names, folder, cfg, events, jobs, namespace, render)


def _run_parallel(
    spec: str, names: list[str], folder: Path, cfg: Settings, events: Optional[Events], jobs: int, namespace: Optional[int], render: bool
) -> PtsResult:
    import multiprocessing as mp
    import queue as queue_mod
    import signal

    from .twin import TwinTarget

    events = events or Events()
    probe = TwinTarget(
        spec, namespace=namespace, seed=cfg.seed, purge=cfg.purge, writable=False, converge=cfg.converge
    )  # checks, and the header
    # The state every test starts from: a writer in another process (a served image) may
    # commit while the tests start, and a test that opened a later generation would not.
    generation = probe.drive.generation()
    try:
        cfg.check_block_sizes(names, probe.info.lba_bytes, probe.info.capacity_bytes, probe.info.uri)
        if folder.is_dir() and any(folder.iterdir()):
            shutil.rmtree(folder)
        folder.mkdir(parents=True, exist_ok=True)
        parent = Runner(probe, folder, cfg, events)
        parent.start_manifest(names)
    finally:
        probe.close()
    parent.manifest["settings"]["jobs"] = jobs
    parent.manifest["settings"]["image"] = "unchanged: each test ran on an in-memory copy of the image (--jobs)"
    parent.save_manifest()
    ctx = mp.get_context("spawn")
    messages: Any = ctx.Queue()
    pending = costliest_first(names)
    running: dict[str, SpawnProcess] = {}
    finished: set[str] = set()
    interrupted = False
    # The loop runs inside the try, not the try inside the loop: CPython raises a pending
    # KeyboardInterrupt where it checks for signals, and the loop's own jump back is such a
    # place, so an interrupt landing there escaped a try inside the loop and left pts.json
    # without "interrupted". After one, the loop goes on waiting for the tests' processes.
    while True:
        try:
            # After an interrupt the tests still pending never start: only the running ones
            # are waited for (waiting on the pending ones too spun for ever).
            while (pending and not interrupted) or running:
                while pending and len(running) < jobs and not interrupted:
                    test = pending.pop(0)
                    proc = ctx.Process(target=_parallel_worker, args=(spec, namespace, cfg, str(folder), test, messages, generation))
                    proc.start()
                    running[test] = proc
                with contextlib.suppress(queue_mod.Empty):
                    _dispatch(messages.get(timeout=0.2), parent, events, finished)
                _reap(running, messages, parent, events, finished)
            break
        except KeyboardInterrupt:
            interrupted = True
            for proc in running.values():  # Ctrl-C at a terminal reached them too; a kill -INT of the parent did not
                if proc.is_alive() and proc.pid:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(proc.pid, signal.SIGINT)
    _drain(messages, parent, events, finished)
    if interrupted:
        for t in names:
            if t not in finished:
                parent.manifest["tests"][t]["status"] = "not run" if t in pending else "interrupted"
        parent.manifest["interrupted"] = True
    else:
        parent.manifest["complete"] = True
    parent.close_manifest()
    if render:
        with contextlib.suppress(PtsError) if interrupted else contextlib.nullcontext():
            render_report(folder)
    if interrupted:
        raise KeyboardInterrupt
    return load(folder)


def _reap(running: dict[str, SpawnProcess], messages: Any, parent: Runner, events: Events, finished: set[str]) -> None:
    """Join the tests' processes that have ended; a test whose process died without a word
    (killed, out of memory) is marked failed."""
    for test, proc in list(running.items()):
        if not proc.is_alive() and proc.exitcode is not None:
            _drain(messages, parent, events, finished)
            proc.join()
            del running[test]
            if test not in finished:
                _mark(parent, test, "failed", f"the test's process ended with exit code {proc.exitcode}")
                events.test_done(test, "failed", parent.manifest["tests"][test]["message"])
                finished.add(test)


# The tests by what they cost on a twin with converging rounds, the costliest first
# (docs/performance.md, "The whole Enterprise suite"): HIR's 3,600 write bursts and the IOPS
# test's mixes (timed in full) take minutes each, the others seconds to a minute.
_COST_RANK = ("hir", "iops", "dirth", "cbw", "xsr", "curve", "tp", "lat", "wsat")


def costliest_first(names: list[str]) -> list[str]:
    """The order tests start in with --jobs: the longest first, so the short ones fill the
    cores beside them and the suite ends with the longest test rather than after it (the
    report keeps the order asked for)."""
    return sorted(names, key=lambda t: _COST_RANK.index(t) if t in _COST_RANK else len(_COST_RANK))


def _mark(parent: Runner, test: str, status: TestStatus, message: str) -> None:
    m = parent.manifest["tests"][test]
    m["status"], m["message"] = status, message
    parent.save_manifest()


def _dispatch(msg: tuple[Any, ...], parent: Runner, events: Events, finished: set[str]) -> None:
    """One message from a test's process: a progress event, or its manifest entry."""
    kind, test, payload = msg
    if kind == "event":
        method, args = payload
        if method == "test_started":
            events.test_started(*args)
        elif method == "step":
            events.step(*args)
        elif method == "test_done":
            events.test_done(*args)
            finished.add(test)
    elif kind == "manifest":
        entry, purge = payload
        parent.manifest["tests"][test].update(entry)
        if purge:
            parent.manifest["settings"]["purge"] = purge
        parent.save_manifest()


def _drain(messages: Any, parent: Runner, events: Events, finished: set[str]) -> None:
    import queue as queue_mod

    while True:
        try:
            _dispatch(messages.get(timeout=0.05), parent, events, finished)
        except queue_mod.Empty:
            return


class _QueueEvents(Events):
    """A test process's progress, sent to the parent's display."""

    def __init__(self, messages: Any) -> None:
        self.messages = messages

    def test_started(self, test: str, title: str, plan: str) -> None:
        self.messages.put(("event", test, ("test_started", (test, title, plan))))

    def step(self, test: str, what: str, frac: Optional[float], status: str) -> None:
        self.messages.put(("event", test, ("step", (test, what, frac, status))))

    def test_done(self, test: str, status: str, message: str) -> None:
        self.messages.put(("event", test, ("test_done", (test, status, message))))


class _WorkerRunner(Runner):
    """The runner of one test in its own process: pts.json is the parent's, so its manifest
    updates go to the parent as messages."""

    messages: Any = None

    def save_manifest(self) -> None:
        if self._manifest is None:
            return
        for t, tr in self.tests.items():
            m = self.manifest["tests"][t]
            self.update_entry(m, tr)
            self.messages.put(("manifest", t, (dict(m), self.manifest["settings"].get("purge") if tr.purge_method else None)))


def _parallel_worker(
    spec: str, namespace: Optional[int], settings: Settings, folder: str, test: str, messages: Any, generation: int
) -> None:
    """A test process (``_run_parallel``): the test on an in-memory copy of the image, which
    must be at ``generation``, the one the run started from."""
    from .twin import TwinTarget

    def refuse(message: str) -> None:
        messages.put(("manifest", test, ({"status": "failed", "message": message}, None)))
        messages.put(("event", test, ("test_done", (test, "failed", message))))

    try:
        tgt = TwinTarget(spec, namespace=namespace, seed=settings.seed, purge=settings.purge, writable=False, converge=settings.converge)
    except PtsError as e:
        return refuse(str(e))
    now = tgt.drive.generation()
    if now != generation:
        tgt.drive.close()
        return refuse(
            f"{tgt.path}: the image moved from generation {generation} (when the run started) to {now}: another process"
            " commits it (a served image?), and every test must start from the same state; run on a copy, or stop the writer"
        )
    try:
        r = _WorkerRunner(tgt, Path(folder), settings, _QueueEvents(messages))
        r.messages = messages
        r.run([test])
    except KeyboardInterrupt:
        pass  # Runner.run marked the test interrupted and told the parent
    finally:
        tgt.close()
