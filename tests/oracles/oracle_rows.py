"""What the dense and the sparse oracle test modules share: rows computed once per session, the table written from
them with IRGRID_ORACLES_TABLE=1, strict xfails that name a known difference, and tiny-model mode."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any

import pytest


class Rows:
    """Each entry's comparison row, computed once (a comparison encodes with irgrid and reads the fixture)."""

    def __init__(self, compute: Callable[..., Any], entries: Iterable[str]) -> None:
        self.compute, self.entries, self.done = compute, tuple(entries), {}

    def __call__(self, name: str, **kwargs: Any) -> Any:
        if name not in self.done:
            self.done[name] = self.compute(name, **kwargs)
        return self.done[name]

    def write_table(self, write: Callable[[list[Any]], Any]) -> None:
        """`write` the rows in entry order when asked to (IRGRID_ORACLES_TABLE=1) and every entry was compared."""
        if os.environ.get("IRGRID_ORACLES_TABLE") == "1" and set(self.done) == set(self.entries):
            write([self.done[n] for n in self.entries])


def marked(name: str, known: dict[str, str]) -> Any:
    """`name` as a test parameter, a strict xfail naming its cause when `known` lists it (it flips when fixed)."""
    return pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=known[name])) if name in known else name


@pytest.fixture(autouse=True)
def tiny_models(monkeypatch):
    """The oracles compare irgrid's tiny stand-ins (IRGRID_TINY_MODELS=1), never real checkpoints."""
    monkeypatch.setenv("IRGRID_TINY_MODELS", "1")
