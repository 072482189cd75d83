"""The live state a running ``ssdtwin serve`` publishes in ``DIR/live.json`` (docs/nbd.md).

The document is the core's ``LiveSnapshot``: the serving session around a drive view,
the same structure ``Drive.view()`` returns for an image that is not being served, so a
read-only command shows either through one code path. This module only finds out whether
the snapshot is current (the server holding the image lock wrote it recently); it prints
nothing.
"""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from . import _core
from .core_types import LiveSnapshot

__all__ = ["LiveState", "live_state", "lock_holder"]


@dataclass(frozen=True)
class LiveState:
    """A current ``live.json``: the whole document and the drive view inside it."""

    doc: LiveSnapshot
    view: _core.DriveView

    @property
    def pid(self) -> int:
        return int(self.doc["pid"])

    @property
    def age_s(self) -> float:
        """Seconds since the server wrote it (wall clock: this is about the server, not the model)."""
        return max(0.0, time.time() - int(self.doc["time_unix_ms"]) / 1000)


PathLike = Union[str, "os.PathLike[str]"]


def lock_holder(path: PathLike) -> Optional[int]:
    """The pid of the process holding the image lock, or None if nobody holds it."""
    lock = Path(path) / "LOCK"
    try:
        with open(lock) as f:
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
                return None  # released when the file closes
            except BlockingIOError:
                pass
            text = f.read().strip()
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return None  # not an image (or not readable): the open that follows says what is wrong
    return int(text) if text.isdigit() else -1


def live_state(path: PathLike, max_age_s: float = 10.0, newer_than: Optional[float] = None, wait_s: float = 3.0) -> Optional[LiveState]:
    """The snapshot a running ``ssdtwin serve`` keeps in ``DIR/live.json``, if the image is
    locked by that server and the snapshot is fresh; else None (use the committed state).
    With ``newer_than`` (a ``time.time()``), wait up to ``wait_s`` for a snapshot taken
    after it (the server writes one a second)."""
    deadline = time.monotonic() + wait_s
    while True:
        pid = lock_holder(path)
        if pid is None:
            return None
        found = _core.read_live_snapshot(path)
        if found is None:
            return None
        doc, view = found
        fresh = doc["serving"] is True and doc["pid"] == pid and time.time() * 1000 - doc["time_unix_ms"] <= max_age_s * 1000
        if not fresh:
            return None
        if newer_than is None or doc["time_unix_ms"] >= newer_than * 1000:
            return LiveState(doc, view)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)
