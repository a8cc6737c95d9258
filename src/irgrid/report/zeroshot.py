"""Zero-shot or not, per cell of a stored grid (irgrid.core.training: the collections each checkpoint was trained
on, with sources), and the paper's group aggregates twice: over all cells, and over the members each system is
known to be zero-shot on (the aggregate's weights renormalised over them)."""

from __future__ import annotations

import pandas as pd

from irgrid import paper
from irgrid.core import training
from irgrid.report.stored import Grid


def flags(grid: Grid) -> pd.DataFrame:
    """(dataset, system, flag, source) of every effectiveness cell: in-domain, zero-shot or unknown."""
    res = grid.results[(grid.results["measure"] != "ms/query") & ~grid.results["dataset"].isin(paper.AGGREGATES)]
    cells = res[["dataset", "system"]].drop_duplicates()
    return pd.DataFrame([{"dataset": d, "system": s, "flag": training.flag(s, d),
                          "source": _source(s)}
                         for d, s in zip(cells["dataset"], cells["system"])],
                        columns=["dataset", "system", "flag", "source"])


def _source(system: str) -> str:
    t = training.of(system)
    return t.source if t else "no training data declared (not a registered entry, or its package declares none)"


def aggregates(grid: Grid, names: tuple[str, ...] = paper.PAPER_AGGREGATES) -> pd.DataFrame:
    """Per (aggregate, system): its value over all members and over the zero-shot members only, with how many
    members each used (a system with a member missing from the grid gets no value)."""
    res = grid.results[grid.results["measure"] != "ms/query"]
    rows = []
    for system in dict.fromkeys(res["system"]):
        mine = res[res["system"] == system]
        values = {(paper.canonical(str(d)), str(m)): float(v) for d, m, v in
                  zip(mine["dataset"], mine["measure"], mine["value"])}
        for name in names:
            weights = paper.AGGREGATES[name].column.weights()
            if any((d, m) not in values for d, m, _ in weights):
                continue
            full = sum(w * values[(d, m)] for d, m, w in weights)
            kept = [(d, m, w) for d, m, w in weights if training.flag(system, d) == "zero-shot"]
            total = sum(w for *_, w in kept)
            zero = sum(w * values[(d, m)] for d, m, w in kept) / total * sum(w for *_, w in weights) if kept \
                else None
            rows.append({"aggregate": name, "system": system, "all": full, "zero_shot": zero,
                         "members": len(weights), "zero_shot_members": len(kept)})
    return pd.DataFrame(rows, columns=["aggregate", "system", "all", "zero_shot", "members", "zero_shot_members"])
