"""ssdtwin: a calibrated, deterministic digital twin of NVMe SSDs.

The compiled core (``ssdtwin._core``) is imported lazily so that pure-Python parts such as
the fio job parser (``ssdtwin.fio``) can be used and tested on their own.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Drive", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "Drive":
        from .drive import Drive

        return Drive
    if name == "__version__":
        from . import _core

        return _core.__version__
    raise AttributeError(f"module 'ssdtwin' has no attribute {name!r}")
