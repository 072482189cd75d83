"""SNIA PTS Enterprise on a twin or a real device (docs/pts.md).

``ssdtwin.pts.run(target, tests=[...], report=...)`` runs the tests and returns a
:class:`PtsResult` (pandas frames per test); ``ssdtwin.pts.load(folder)`` reads a report
folder back. The CLI is ``ssdtwin pts``.
"""

from __future__ import annotations

from .folder import PtsResult, load
from .progress import Events
from .runner import run
from .settings import Settings
from .target import DeviceInfo, PtsError, PtsTarget

__all__ = ["run", "load", "PtsResult", "Settings", "Events", "PtsError", "PtsTarget", "DeviceInfo"]
