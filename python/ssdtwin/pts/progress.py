"""What a PTS run tells a progress display while it runs."""

from __future__ import annotations

from typing import Optional


class Events:
    """What the runner tells a progress display (the CLI's rich display implements it)."""

    def test_started(self, test: str, title: str, plan: str) -> None:
        """A test begins; ``plan`` says what it will do (e.g. "56 elements x 5-25 rounds")."""

    def step(self, test: str, what: str, frac: Optional[float], status: str) -> None:
        """Before each fio run: ``what`` ("round 3/25: RND 4KiB 0/100"), ``frac`` the share of
        the test done at most (rounds count to --max-rounds, so an ETA from it is an upper
        bound; None: unknown), ``status`` the steady-state state so far."""

    def test_done(self, test: str, status: str, message: str) -> None:
        """A test ended (steady, not steady, complete, failed or interrupted)."""
