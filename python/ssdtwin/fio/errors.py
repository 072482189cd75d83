"""Errors raised by the fio layer.

Every problem in a job file is reported with the file, the line and the option it came
from, in one line, so that a user can jump to it (``job.fio:7: bs=4q: not a size``).
The parser collects every error of a run before raising, because fixing one typo per run
is slow; the first error's attributes are kept on the exception for programs, ``errors``
holds them all and ``lines()`` renders them one per line in file and line order (what the
CLI prints); ``str()``
stays one line: the first error and how many more there are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, Optional, TypedDict

from .limits import MAX_ERROR_LINES


class Where(TypedDict):
    """Where a problem of a job file was written: ``FioJobError``'s location, passed to it as
    ``**where``."""

    file: Optional[str]
    line: Optional[int]
    option: NotRequired[Optional[str]]
    value: NotRequired[Optional[str]]


def where(state: Mapping[str, Any], option: str, section: Any) -> Where:
    """Where ``option`` was written in a job's option state (file, line, the option and its
    value as written), else where its section (``file``, ``line``) starts."""
    written = state.get("where", {})
    if option in written:
        file, line, name, value = written[option]
        return {"file": file, "line": line, "option": name, "value": value}
    return {"file": section.file, "line": section.line}


class FioJobError(ValueError):
    """A job file (or command-line option) that ssdtwin refuses.

    Attributes:
        file: path of the job file as given (``"<cmdline>"`` for command-line options).
        line: 1-based line number, or ``None`` when the problem is not tied to a line.
        option: the option as written (alias included), or ``None``.
        value: the value as written, or ``None``.
        reason: the message without the location.
        errors: every error found in the run (this one first); ``[self]`` when single.
    """

    def __init__(
        self,
        reason: str,
        *,
        file: Optional[str] = None,
        line: Optional[int] = None,
        option: Optional[str] = None,
        value: Optional[str] = None,
    ) -> None:
        self.reason = reason
        self.file = file
        self.line = line
        self.option = option
        self.value = value
        self.errors: list[FioJobError] = [self]
        super().__init__(self._render())

    def _render(self) -> str:
        parts = []
        if self.file is not None:
            parts.append(self.file if self.line is None else f"{self.file}:{self.line}")
        if self.option is not None:
            parts.append(self.option if self.value is None else f"{self.option}={self.value}")
        parts.append(self.reason)
        return ": ".join(parts)

    def _distinct(self) -> list[FioJobError]:
        """The errors, each line once: a [global] option every job takes is found in each of
        them, at the same file, line and words (`size=100g` past the end of two jobs' target
        was two identical lines)."""
        return list({e._render(): e for e in reversed(self.errors)}.values())[::-1]

    def __str__(self) -> str:
        text = self._render()
        extra = len(self._distinct()) - 1
        if extra > 0:
            text += f" (and {extra} more error{'s' if extra > 1 else ''})"
        return text

    def lines(self, limit: Optional[int] = MAX_ERROR_LINES) -> list[str]:
        """Every error of the run, one line each (``file:line: option=value: reason``), in
        the order found. With ``limit``, the first ``limit`` and then one line
        ``... and N more errors``; the CLI prints these (docs/fio.md §2.9)."""
        # In file order (files by first appearance), then line order: the parser finds
        # some problems in a second pass (engine options, checks after a job is read).
        files: dict[Optional[str], int] = {}
        for e in self.errors:
            files.setdefault(e.file, len(files))
        ordered = sorted(self._distinct(), key=lambda e: (files[e.file], e.line or 0))
        shown = ordered if limit is None else ordered[:limit]
        out = [e._render() for e in shown]
        rest = len(ordered) - len(shown)
        if rest > 0:
            out.append(f"... and {rest} more error{'s' if rest > 1 else ''} (the first {len(shown)} are shown)")
        return out

    @classmethod
    def collect(cls, errors: Sequence[FioJobError]) -> FioJobError:
        """One exception carrying every error; its own attributes are the first one's."""
        first = errors[0]
        agg = cls(first.reason, file=first.file, line=first.line, option=first.option, value=first.value)
        agg.errors = list(errors)
        return agg


class EngineResultError(ValueError):
    """Engine output that does not follow the contract in docs/fio.md."""
