"""The progress bar of commands whose work takes time (benchmarks, evaluations, imports, re-embedding):
rich on stderr, loaded only when a bar starts (the CLI's parser imports this module)."""

from __future__ import annotations

from typing import Any


class _Bar:
    """A rich progress bar on stderr, one task per label; a plain callback `(done, total, what)`."""

    def __init__(self) -> None:
        # start-up: rich loads when a bar starts, not when the CLI builds its parser
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self.tasks: dict[str, Any] = {}

    def __call__(self, done: int, total: int, what: str) -> None:
        if what not in self.tasks:
            self.tasks[what] = self.progress.add_task(what, total=total)
        self.progress.update(self.tasks[what], completed=done, total=total)

    def __enter__(self) -> _Bar:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


def progress_bar() -> _Bar:
    """`with progress_bar() as bar: bar(done, total, "what")` -- for commands whose work takes time."""
    return _Bar()


def progress(done: int, total: int, what: str) -> None:
    """A one-shot callback for code that reports progress without a context (a bar per call site)."""
    global _BAR
    if _BAR is None:
        _BAR = progress_bar().__enter__()
    _BAR(done, total, what)
    if done >= total:
        _BAR.__exit__(None, None, None)
        _BAR = None


_BAR: _Bar | None = None
