"""fio compatibility: job-file parser, engine contract and fio-format output.

See docs/fio.md for the rules, the engine contract and what was measured on fio 3.33.
"""

from .errors import EngineResultError, FioJobError
from .parser import Clone, Job, Run, parse, parse_string

__all__ = ["parse", "parse_string", "Run", "Job", "Clone", "FioJobError", "EngineResultError"]
