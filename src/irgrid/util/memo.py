"""Per-process memo of computed scores or vectors that accounts for the time a reuse saves (latency honesty)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


class Memo:
    """Scores or vectors computed once per process and reused; a reuse declares the time the first computation
    took (`latency_seconds()`, read by the grid's latency accounting), so single-query latency after a batch
    run is not understated."""

    def __init__(self) -> None:
        self.values: dict[Any, Any] = {}
        self.cost: dict[Any, float] = {}
        self.served = 0.0

    def get_many(self, keys: list[Any], compute: Callable[[list[Any]], list[Any]]) -> list[Any]:
        todo = [k for k in dict.fromkeys(keys) if k not in self.values]
        self.served += sum(self.cost[k] for k in dict.fromkeys(keys) if k in self.values)
        if todo:
            start = time.perf_counter()
            values = compute(todo)
            each = (time.perf_counter() - start) / len(todo)
            for k, v in zip(todo, values):
                self.values[k], self.cost[k] = v, each
        return [self.values[k] for k in keys]
