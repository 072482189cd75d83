"""blktrace binaries replayed by ``ssdtwin fio`` as fio 3.33 replays them (docs/fio.md
§2.10): the same I/Os in the same order with the same delays, flushes and probed queue
depth as real fio's replay (tests/fio/blktrace_conformance.py), and the same queue events
blkparse reads from the file."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import blktrace_conformance as bc
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import tracefiles as tf  # noqa: E402


@pytest.fixture(scope="module")
def fio() -> str:
    path = shutil.which("fio")
    if path is None:
        pytest.skip("the real fio binary is not installed")
    return path


@pytest.mark.parametrize("case", sorted(bc.CASES))
def test_blktrace_replay_matches_real_fio(tmp_path: Path, fio: str, case: str) -> None:
    trace, options = bc.write_case(case, tmp_path)
    real = bc.real_fio(fio, trace, options, tmp_path)
    twin = bc.twin(trace, options)
    assert len(real.ios) > 500
    # The first 100 offsets, then every I/O (direction, offset, length) in issue order.
    assert [off for _, off, _ in twin.ios[:100]] == [off for _, off, _ in real.ios[:100]]
    assert twin.ios == real.ios
    # Counts as fio's JSON reports them; bytes as fio issued them. fio 3.33's JSON leaves
    # the last I/O of a blktrace replay out of io_bytes (measured: the same I/Os as an
    # iolog count in full; its debug log shows the I/O issued and completed).
    assert {d: t[0] for d, t in twin.totals.items()} == {d: t[0] for d, t in real.totals.items()}
    assert {d: t[1] for d, t in twin.totals.items()} == twin.issued_bytes() == real.issued_bytes()
    last_dir, _, last_len = real.ios[-1]
    assert real.totals[last_dir][1] + last_len == twin.totals[last_dir][1]
    # fio's pacing: each I/O's delay (us, after the previous issue; flushes folded in).
    assert twin.paced == real.paced
    assert any(d > 0 for *_, d, _ in twin.paced) != (options.get("replay_no_stall") == "1")
    assert (twin.syncs, twin.depth) == (real.syncs, real.depth)
    assert real.depth > 1, "the trace keeps several requests in flight"
    assert twin.notes == real.notes
    zero_byte_writes_kept = "write" not in options.get("replay_skip", "")
    assert real.notes == ["blktrace: ignoring zero byte trace: action=120001"] * zero_byte_writes_kept


def test_blkparse_reads_the_queue_events_the_twin_replays(tmp_path: Path) -> None:
    blkparse = shutil.which("blkparse")
    if blkparse is None:
        pytest.skip("blkparse (Debian's blktrace package) is not installed")
    trace, options = bc.write_case("plain", tmp_path)
    out = subprocess.run([blkparse, "-i", "-"], stdin=trace.open("rb"), capture_output=True, text=True, check=True).stdout
    queued = []  # blkparse's Q events: rwbs, sector, sectors
    for line in out.splitlines():
        m = re.match(r"\s*\d+,\d+\s+\d+\s+\d+\s+[\d.]+\s+\d+\s+Q\s+(\S+)\s+(?:(\d+) \+ (\d+))?", line)
        if m:
            queued.append((m[1], int(m[2] or 0), int(m[3] or 0)))
    # fio's rules on blkparse's letters: D (discard) first, then F (flush), then W or R;
    # a zero-length read or write is dropped.
    kept = []
    for rwbs, sector, n in queued:
        kind = "trim" if "D" in rwbs else "sync" if "F" in rwbs else "write" if "W" in rwbs else "read"
        if kind != "sync" and (n or kind == "trim"):
            kept.append((kind, sector * 512, n * 512))
    twin = bc.twin(trace, options)
    assert len(queued) == 800, "every request queued once (back merges are M events)"
    assert kept == twin.ios
    assert sum(1 for rwbs, *_ in queued if "F" in rwbs) == twin.syncs


def test_a_merged_trace_replays_both_in_time_order(tmp_path: Path) -> None:
    """merge_blktrace_file: the traces' queue events by time (fio 3.33's merge is dead
    code; this is the behaviour fio documents), replayed by every clone."""
    a = tf.records(tf.np.array([100, 300]), tf.np.array([0, 8]), tf.np.array([4096, 4096]), tf.np.array([tf.TC_QUEUE | 1 | tf.TC_READ] * 2))
    b = tf.records(tf.np.array([180]), tf.np.array([16]), tf.np.array([8192]), tf.np.array([tf.TC_QUEUE | 1 | tf.TC_WRITE]))
    tf.write_blktrace(tmp_path / "a.bt", a)
    tf.write_blktrace(tmp_path / "b.bt", b)
    options = {"merge_blktrace_file": "m.bt", "merge_blktrace_scalars": "100:50"}
    twin = bc.twin(tmp_path / "a.bt:b.bt", options)  # type: ignore[arg-type]
    assert twin.ios == [("write", 8192, 8192), ("read", 0, 4096), ("read", 4096, 4096)]
    assert (tmp_path / "m.bt").stat().st_size == 3 * 48
