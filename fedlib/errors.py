"""How errors reach a user: one line in a notebook or under papermill (:class:`OneLineError`), and
hints written the way the user typed the command (:func:`as_typed`: ``make gpu-check SMOKE=1`` under
make, ``--smoke`` else)."""

from __future__ import annotations

import os

__all__ = ["OneLineError", "as_typed"]


class OneLineError(Exception):
    """An error whose message says everything: IPython (a notebook, papermill's output) shows it as
    its one line, ``<type>: <message>``, without the frames of the library that raised it."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


def as_typed(flag: str, make: str) -> str:
    """``make`` (e.g. ``"make gpu-check SMOKE=1"``) when this process runs under make
    (``$MAKELEVEL`` set), else ``flag`` (``"--smoke"``): the form of an option that the user can
    type again."""
    return make if os.environ.get("MAKELEVEL") else flag
