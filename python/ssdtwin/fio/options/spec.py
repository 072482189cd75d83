"""One fio option as ssdtwin treats it: the ``Option`` record the table is made of.

Every option fio 3.33 knows gets one of four treatments (docs/fio.md §2.6):

* ``SIMULATED``: its value shapes the engine input; it sets the job-state ``key`` (or the
  fields its ``handler`` names), which starts at ``default``.
* ``IGNORED``: accepted, its value checked the way fio checks it, echoed like fio, and
  listed as ignored with ``reason`` (Run.ignored, the CLI's notes, the JSON's "ssdtwin").
* ``OFF_ONLY``: accepted only at the value that turns it off (``off``); any other value
  is refused with ``reason``.
* ``REFUSED``: known to fio, refused with ``reason`` ("not supported by ssdtwin" if none).

The parser sees an ``Option`` through ``kind`` (SIM or NOOP: NOOP values are kept in the
state's ``noop`` echo), ``handler``, ``needs_value``, ``prio`` and ``engines``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from .values import Check, Handler, State, per_direction_segments, require, store_per_direction

SIMULATED = "simulated"
IGNORED = "ignored"
OFF_ONLY = "off-only"
REFUSED = "refused"

# What the parser does with an accepted option's value: SIM options change the job state,
# NOOP ones are only echoed (and listed as ignored).
SIM = "sim"
NOOP = "noop"

GENERIC_REFUSAL = "not supported by ssdtwin"


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


# The job state has no field for the option until a section sets it (the engine reads it
# with a default of its own).
ABSENT: Any = _Absent()


@dataclass(frozen=True, eq=False)
class Option:
    name: str
    treatment: str
    # How fio reads the value and its range (values.py); None for refused options and for
    # simulated ones whose handler reads the value itself.
    check: Optional[Check] = None
    reason: str = ""
    aliases: tuple[str, ...] = ()
    # True: may be written alone ("name" without "="), read as "1"; False: "name" alone
    # is an error (fio: "Option X requires an argument").
    flag: bool = False
    # An engine option: valid only with these ioengines (fio parses them in a second pass).
    engines: Optional[tuple[str, ...]] = None
    # fio registers it from a built-in profile (profiles/*.c), not options.c: not offered
    # as a "did you mean" for a typo.
    profile: str = ""
    # SIMULATED: the job-state field it sets and the fields' values before any section.
    key: str = ""
    defaults: dict[str, Any] = field(default_factory=dict)
    # SIMULATED with a per-direction value (read,write,trim): the separators fio splits at.
    directions: str = ""
    # OFF_ONLY: is the checked value the one that turns the option off?
    off: Optional[Callable[[Any], bool]] = None
    # fio applies higher prio first within a section (kb_base before sizes, filename last).
    prio: int = 0
    help: str = ""
    handler: Handler = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.handler is None and self.treatment != REFUSED:
            object.__setattr__(self, "handler", _handler(self))

    @property
    def kind(self) -> str:
        return SIM if self.treatment == SIMULATED else NOOP

    @property
    def needs_value(self) -> bool:
        return not self.flag

    @property
    def ignored_reason(self) -> str:
        """Why an accepted option has no effect (shown with every use of it)."""
        if self.treatment == OFF_ONLY:
            return f"this value has no effect (other values are refused: {self.reason})"
        return self.reason


# The parser's name for an option it applies.
OptionDef = Option


def _handler(opt: Option) -> Handler:
    check = opt.check
    assert check is not None, opt.name
    if opt.treatment == SIMULATED and opt.directions:
        return _merge_per_direction(opt.key, check, opt.directions)
    if opt.treatment == SIMULATED:
        return _set_field(opt.key, check, opt.flag)
    refusal = f"{GENERIC_REFUSAL}: {opt.reason}" if opt.treatment == OFF_ONLY else ""
    return _checked(check, opt.flag, opt.off, refusal)


def _set_field(key: str, check: Check, flag: bool) -> Handler:
    def handler(st: State, value: Optional[str]) -> None:
        st[key] = check(st, "1" if value is None and flag else require(value))

    return handler


def _merge_per_direction(key: str, check: Check, separators: str) -> Handler:
    """Directions the value names take their new value, the others keep theirs."""

    def handler(st: State, value: Optional[str]) -> None:
        target = list(st[key])
        store_per_direction(target, per_direction_segments(require(value), separators), lambda t: check(st, t))
        st[key] = target

    return handler


def _checked(check: Check, flag: bool, off: Optional[Callable[[Any], bool]], refusal: str) -> Handler:
    """Check the value like fio; with ``off``, refuse any value that does not turn it off."""

    def handler(st: State, value: Optional[str]) -> None:
        parsed = check(st, "1" if value is None and flag else require(value))
        if off is not None and not off(parsed):
            raise ValueError(refusal)

    return handler


# --- the table's vocabulary -------------------------------------------------------------


def simulated(
    name: str,
    check: Optional[Check] = None,
    *,
    default: Any = ABSENT,
    key: str = "",
    handler: Optional[Handler] = None,
    defaults: Optional[dict[str, Any]] = None,
    **kw: Any,
) -> Option:
    """A simulated option: ``check`` reads the value into state[key] (key: the option's
    name unless given), which starts at ``default``; or ``handler`` sets the fields in
    ``defaults`` itself."""
    key = key or name
    fields = dict(defaults or {})
    if default is not ABSENT:
        fields[key] = default
    return Option(name, SIMULATED, check, key=key, defaults=fields, handler=handler, **kw)  # type: ignore[arg-type]


def ignored(name: str, check: Check, reason: str, **kw: Any) -> Option:
    return Option(name, IGNORED, check, reason, **kw)


def off_only(name: str, check: Check, off: Callable[[Any], bool], reason: str, **kw: Any) -> Option:
    return Option(name, OFF_ONLY, check, reason, off=off, **kw)


def refused(name: str, reason: str = "", **kw: Any) -> Option:
    return Option(name, REFUSED, None, reason, **kw)
