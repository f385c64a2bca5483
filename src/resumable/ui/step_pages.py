"""Which of a run's steps its page shows: a window of the journal, and the links between windows.

A run of 100,000 steps is 1,000 pages of `STEPS_PER_PAGE`; the page a live run's
refresh follows is the newest, so it stays cheap to render however long the run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from resumable._engine.export import InputView, StepExport
from resumable.ui.html import url

Replayed = Callable[[int, int], bool]
"""(seq, position from the top) -> whether the latest execution replayed it."""

STEPS_PER_PAGE: Final = 100
"""How many steps a run page shows: a run of 100,000 steps is 1,000 pages."""


@dataclass(frozen=True, slots=True)
class StepPage:
    """Which of a run's steps a page shows: a window of its journal, by position."""

    start: int
    """The position (from 0) of the first step shown."""
    total: int
    """How many steps the run has."""

    @property
    def positions(self) -> slice:
        """The steps shown, as `Engine.export(steps=...)` takes them."""
        return slice(self.start, self.start + STEPS_PER_PAGE)

    @property
    def is_newest(self) -> bool:
        """Whether it shows the run's newest step (and so the steps still to come)."""
        return self.start + STEPS_PER_PAGE >= self.total

    def shifted(self, replayed: Replayed) -> Replayed:
        """`replayed`, asked with positions counted from the run's first step."""
        return lambda seq, position: replayed(seq, position + self.start)

    def inputs_within(
        self, inputs: list[InputView], steps: list[StepExport]
    ) -> list[InputView]:
        """The inputs sent while the steps shown ran (all of them on a single page)."""
        if not steps:
            return inputs
        first, last = steps[0].started_at, steps[-1].finished_at
        return [
            sent
            for sent in inputs
            if (self.start == 0 or sent.sent_at >= first)
            and (self.is_newest or sent.sent_at <= last)
        ]


def step_page(total: int, at: str | None) -> StepPage:
    """The page of steps that `at` (the `steps` query parameter) names.

    "oldest", the position (from 1) of its first step, or by default "newest":
    the last page, which a live run's refresh keeps following.
    """
    last = max(total - STEPS_PER_PAGE, 0)
    if at == "oldest":
        return StepPage(0, total)
    if at is not None and at.isdigit() and len(at) < 12:
        return StepPage(min(max(int(at) - 1, 0), last), total)
    return StepPage(last, total)


def asked(at: str | None) -> slice:
    """The steps `at` asks for before the run's length is known (`step_page` after).

    The newest page is the last `STEPS_PER_PAGE`, whatever their positions, so
    a live refresh reads the journal once; only a position past the end (the
    run got shorter, or a hand-written URL) asks again for the last page.
    """
    if at == "oldest":
        return slice(0, STEPS_PER_PAGE)
    if at is not None and at.isdigit() and len(at) < 12:
        start = max(int(at) - 1, 0)
        return slice(start, start + STEPS_PER_PAGE)
    return slice(-STEPS_PER_PAGE, None)


def page_links(run_id: str, shown: StepPage) -> str:
    """Oldest, older, newer and newest page links, when there is more than one page."""
    if shown.total <= STEPS_PER_PAGE:
        return ""
    older = max(shown.start - STEPS_PER_PAGE, 0) + 1
    newer = shown.start + STEPS_PER_PAGE + 1
    links = [
        ("Oldest", "oldest", shown.start > 0),
        ("Older", str(older), shown.start > 0),
        ("Newer", str(newer), not shown.is_newest),
        ("Newest", "newest", not shown.is_newest),
    ]
    parts = [
        f'<a href="{url("/run", {"id": run_id, "steps": at})}">{label}</a>'
        if live
        else f"<span>{label}</span>"
        for label, at, live in links
    ]
    end = min(shown.start + STEPS_PER_PAGE, shown.total)
    return (
        f"<nav class=pages>steps {shown.start + 1:,} to {end:,} of {shown.total:,} · "
        + " · ".join(parts)
        + "</nav>"
    )
