"""Trace files the trace tests write (docs/traces.md): blktrace binaries (the records
blkparse and fio read), and the MSR Cambridge, Alibaba and Tencent CSVs, all from numpy
arrays (no loop per I/O)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

# blktrace_api.h
MAGIC = 0x65617407
TC_READ, TC_WRITE, TC_FLUSH, TC_SYNC, TC_QUEUE = 1 << 16, 1 << 17, 1 << 18, 1 << 19, 1 << 20
TC_ISSUE, TC_COMPLETE, TC_NOTIFY, TC_DISCARD = 1 << 22, 1 << 23, 1 << 26, 1 << 29
TA_QUEUE, TA_BACKMERGE, TA_ISSUE, TA_COMPLETE = 1, 2, 7, 8
TN_PROCESS = 0 | TC_NOTIFY
DEV = (259 << 20) | 1

RECORD = np.dtype(
    [
        ("magic", "<u4"),
        ("sequence", "<u4"),
        ("time", "<u8"),
        ("sector", "<u8"),
        ("bytes", "<u4"),
        ("action", "<u4"),
        ("pid", "<u4"),
        ("device", "<u4"),
        ("cpu", "<u4"),
        ("error", "<u2"),
        ("pdu_len", "<u2"),
    ]
)


def records(time: np.ndarray, sector: np.ndarray, nbytes: np.ndarray, action: np.ndarray, device: int | np.ndarray = DEV) -> np.ndarray:
    """blk_io_trace records (no payloads), numbered in order."""
    n = len(time)
    r = np.zeros(n, RECORD)
    r["magic"] = MAGIC
    r["sequence"] = np.arange(1, n + 1)
    r["time"], r["sector"], r["bytes"], r["action"], r["device"] = time, sector, nbytes, action, device
    r["pid"] = 4242
    return r


def blktrace_bytes(r: np.ndarray, big_endian: bool = False, pdus: dict[int, bytes] | None = None) -> bytes:
    """The records as a file; ``pdus`` gives some records (by index) a payload."""
    arr = r.astype(RECORD.newbyteorder(">")) if big_endian else r
    if not pdus:
        return arr.tobytes()
    arr = arr.copy()
    for i, p in pdus.items():
        arr["pdu_len"][i] = len(p)
    parts, start = [], 0
    for i in sorted(pdus):
        parts += [arr[start : i + 1].tobytes(), pdus[i]]
        start = i + 1
    parts.append(arr[start:].tobytes())
    return b"".join(parts)


def block_trace(n: int, seed: int, qd: int = 4, span_sectors: int = 1 << 20) -> np.ndarray:
    """A block layer's view of ``n`` requests in blktrace events, time-sorted: each request
    queued (Q), issued (D) and completed (C), at most ``qd`` in flight; 60 % reads, 30 %
    writes, 6 % discards, 2 % flushes (no data), 2 % zero-byte writes; some requests back-
    merged into their predecessor; a process notification at the start."""
    rng = np.random.default_rng(seed)
    kind = rng.choice(5, size=n, p=[0.60, 0.30, 0.06, 0.02, 0.02])
    sectors = rng.integers(0, span_sectors // 8, size=n) * 8
    nbytes = rng.choice([512, 4096, 8192, 65536, 131072], size=n, p=[0.05, 0.55, 0.2, 0.1, 0.1]).astype(np.uint64)
    act = np.select(
        [kind == 0, kind == 1, kind == 2, kind == 3, kind == 4],
        [TC_READ, TC_WRITE, TC_WRITE | TC_DISCARD, TC_WRITE | TC_FLUSH | TC_SYNC, TC_WRITE],
    ).astype(np.uint64)
    nbytes = np.where(kind >= 3, 0, nbytes)
    gaps = rng.exponential(20_000, size=n).astype(np.uint64) + 1  # ns
    gaps[rng.random(n) < 0.2] = 0  # bursts: several queued at once
    q = 1_000 + np.cumsum(gaps)
    service = rng.integers(30_000, 200_000, size=n).astype(np.uint64)
    # At most qd in flight: request i completes no earlier than request i - qd.
    c = q + service
    for k in range(qd, n, qd):  # a loop over blocks of qd, not per I/O
        c[k : k + qd] = np.maximum(c[k : k + qd], c[k - qd] + 1)
    d = q + 500
    merged = (rng.random(n) < 0.05) & (kind < 2)
    ev_time = np.concatenate([q, d, c, q[merged] + 100])
    ev_sector = np.concatenate([sectors, sectors, sectors, sectors[merged]])
    ev_bytes = np.concatenate([nbytes, nbytes, nbytes, nbytes[merged]])
    ev_act = np.concatenate(
        [act | TC_QUEUE | TA_QUEUE, act | TC_ISSUE | TA_ISSUE, act | TC_COMPLETE | TA_COMPLETE, act[merged] | TC_QUEUE | TA_BACKMERGE]
    )
    order = np.argsort(ev_time, kind="stable")
    ev = records(ev_time[order], ev_sector[order], ev_bytes[order], ev_act[order])
    notify = records(np.array([0]), np.array([0]), np.array([0]), np.array([TN_PROCESS]))
    return np.concatenate([notify, ev])


def write_blktrace(path: Path, r: np.ndarray, **kw: object) -> Path:
    path.write_bytes(blktrace_bytes(r, **kw))  # type: ignore[arg-type]
    return path


def workload(n: int, seed: int, span_bytes: int = 1 << 30) -> dict[str, np.ndarray]:
    """``n`` I/Os of a small database volume: time (ns from 0), write flag, offset and length
    in bytes (4 KiB aligned), volume number (0 or 1)."""
    rng = np.random.default_rng(seed)
    write = rng.random(n) < 0.4
    hot = rng.random(n) < 0.7
    blocks = span_bytes // 4096
    offset = np.where(hot, rng.integers(0, blocks // 10, size=n), rng.integers(0, blocks, size=n)) * 4096
    length = rng.choice([4096, 8192, 16384, 65536], size=n, p=[0.6, 0.2, 0.1, 0.1])
    offset = np.minimum(offset, span_bytes - length)
    time = np.cumsum(rng.exponential(250_000, size=n)).astype(np.int64)  # ns: ~4,000 IOPS
    volume = (rng.random(n) < 0.1).astype(np.int64)
    return {"time": time, "write": write, "offset": offset.astype(np.int64), "length": length.astype(np.int64), "volume": volume}


def _csv(path: Path, cols: list[np.ndarray]) -> Path:
    text = np.char.add(np.asarray(cols[0]).astype(str), "")
    for c in cols[1:]:
        text = np.char.add(np.char.add(text, ","), np.asarray(c).astype(str))
    path.write_text("\n".join(text.tolist()) + "\n")
    return path


MSR_EPOCH = 128166372000000000  # 2007-02-22, in 100 ns units since 1601 (the traces' week)
UNIX_EPOCH_US = 1577808000000000  # 2020-01-01 in microseconds (Alibaba's traces)
TENCENT_EPOCH_S = 1538323200  # 2018-10-01 (Tencent's traces)


def write_msr(path: Path, w: dict[str, np.ndarray]) -> Path:
    ts = MSR_EPOCH + w["time"] // 100
    host = np.where(w["volume"] == 0, "src1", "src2")
    kind = np.where(w["write"], "Write", "Read")
    return _csv(path, [ts, host, np.zeros_like(ts), kind, w["offset"], w["length"], np.full_like(ts, 1234)])


def write_alibaba(path: Path, w: dict[str, np.ndarray]) -> Path:
    ts = UNIX_EPOCH_US + w["time"] // 1000
    return _csv(path, [w["volume"], np.where(w["write"], "W", "R"), w["offset"], w["length"], ts])


def write_tencent(path: Path, w: dict[str, np.ndarray]) -> Path:
    ts = TENCENT_EPOCH_S + w["time"] // 1_000_000_000
    return _csv(path, [ts, w["offset"] // 512, w["length"] // 512, w["write"].astype(int), w["volume"] + 1000])
