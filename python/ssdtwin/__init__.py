"""ssdtwin: a calibrated, deterministic digital twin of NVMe SSDs.

The compiled core (``ssdtwin._core``) is imported lazily so that pure-Python parts such as
the fio job parser (``ssdtwin.fio``) can be used and tested on their own.
"""

from __future__ import annotations

# Nothing imported at run time: the `ssdtwin` console script imports this package before
# commands/entry.py can catch a Ctrl-C, and `typing` (not loaded by the interpreter's own
# start-up without site-packages that load it) took ~14 ms there. Type checkers treat any
# name TYPE_CHECKING as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
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
