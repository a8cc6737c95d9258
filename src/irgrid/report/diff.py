"""`irgrid diff A B`: what changed between two stored grids (paper vs release profile, CPU vs GPU, batch 32 vs 256,
last month vs today), as conclusions rather than numbers: every claim verdict, significance mark against the
baseline, rank order and best system per (dataset, measure) that changed, and the cells whose difference exceeds
its bootstrap SE. Markdown and JSON; `changed_claims` is what the CLI turns into exit status 1 (a CI gate).

Only what both grids hold is compared (a cell in one grid only is listed under `only_in`). The SE of a cell's
difference is the bootstrap SE of the mean of its per-query differences when both grids scored the same queries
(paired), else sqrt(SE_A² + SE_B²) of the two means; cells without per-query values are listed as untested.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from irgrid.core.claims import Claim
from irgrid.core.significance import BOOTSTRAP_B, BOOTSTRAP_SEED, bootstrap_se
from irgrid.report import claims as claims_mod
from irgrid.report.stored import Grid, load


@dataclass
class GridDiff:
    a: str
    b: str
    claims: list[dict[str, Any]] = field(default_factory=list)
    significance: list[dict[str, Any]] = field(default_factory=list)
    ranks: list[dict[str, Any]] = field(default_factory=list)
    best: list[dict[str, Any]] = field(default_factory=list)
    cells: list[dict[str, Any]] = field(default_factory=list)
    only_in: dict[str, list[str]] = field(default_factory=dict)
    untested: list[str] = field(default_factory=list)
    claims_from: str = ""
    compared: dict[str, int] = field(default_factory=dict)

    @property
    def changed_claims(self) -> list[dict[str, Any]]:
        return self.claims

    def empty(self) -> bool:
        return not (self.claims or self.significance or self.ranks or self.best or self.cells)

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "claims_from": self.claims_from, "compared": self.compared,
                "claims": self.claims, "significance": self.significance, "ranks": self.ranks, "best": self.best,
                "cells": self.cells, "only_in": self.only_in, "untested": self.untested}


def _mark(r: pd.Series, base: float | None) -> str:
    sig = r["significant"] is True or str(r["significant"]).lower() == "true"
    if not sig or base is None or pd.isna(r["value"]):
        return ""
    return "▲" if r["value"] > base else "▼" if r["value"] < base else ""


def _marks(grid: Grid) -> dict[tuple[str, str, str], str]:
    res = grid.results[(grid.results["measure"] != "ms/query") & grid.results["baseline"].notna()]
    values = {(d, s, m): v for d, s, m, v in zip(res["dataset"], res["system"], res["measure"], res["value"])}
    out = {}
    for _, r in res.iterrows():
        if r["system"] == r["baseline"] or "significant" not in r or pd.isna(r.get("p_value")):
            continue
        out[(r["dataset"], r["system"], r["measure"])] = _mark(r, values.get((r["dataset"], r["baseline"],
                                                                              r["measure"])))
    return out


def _values(grid: Grid) -> dict[tuple[str, str, str], float]:
    res = grid.results[grid.results["measure"] != "ms/query"]
    return {(str(d), str(s), str(m)): float(v) for d, s, m, v in
            zip(res["dataset"], res["system"], res["measure"], res["value"]) if not pd.isna(v)}


def _order(values: dict[tuple[str, str, str], float], d: str, m: str, systems: Sequence[str]) -> list[str]:
    return sorted(systems, key=lambda s: (-values[(d, s, m)], s))


def diff(a: Grid, b: Grid, claims: Sequence[Claim] = (), universe: Sequence[str] = (), claims_from: str = "",
         bootstrap: int = BOOTSTRAP_B, seed: int = BOOTSTRAP_SEED) -> GridDiff:
    out = GridDiff(str(a.out), str(b.out), claims_from=claims_from)
    # claims
    if claims:
        va = claims_mod.evaluate(a, claims, universe, bootstrap, seed)
        vb = claims_mod.evaluate(b, claims, universe, bootstrap, seed)
        for x, y in zip(va, vb):
            if x.verdict != y.verdict:
                out.claims.append({"id": x.id, "text": x.text, "source": x.source, "a": x.verdict, "b": y.verdict,
                                   "effect_a": x.effect, "effect_b": y.effect, "p_a": x.p, "p_b": y.p})
    # significance marks
    ma, mb = _marks(a), _marks(b)
    for key in sorted(set(ma) & set(mb)):
        if ma[key] != mb[key]:
            out.significance.append({"dataset": key[0], "system": key[1], "measure": key[2], "a": ma[key] or "·",
                                     "b": mb[key] or "·"})
    # ranks and best systems, over the systems both grids hold for each (dataset, measure)
    va_, vb_ = _values(a), _values(b)
    shared = set(va_) & set(vb_)
    out.only_in = {"a": sorted(" ".join(k) for k in set(va_) - set(vb_)),
                   "b": sorted(" ".join(k) for k in set(vb_) - set(va_))}
    groups: dict[tuple[str, str], list[str]] = {}
    for d, s, m in sorted(shared):
        groups.setdefault((d, m), []).append(s)
    for (d, m), systems in groups.items():
        if len(systems) < 2:
            continue
        oa, ob = _order(va_, d, m, systems), _order(vb_, d, m, systems)
        if oa != ob:
            pos_b = {s: i for i, s in enumerate(ob)}
            swapped = [(x, y) for i, x in enumerate(oa) for y in oa[i + 1:] if pos_b[x] > pos_b[y]]
            out.ranks.append({"dataset": d, "measure": m, "a": oa, "b": ob,
                              "swapped": [f"{x} > {y} became {y} > {x}" for x, y in swapped]})
        if oa[0] != ob[0]:
            out.best.append({"dataset": d, "measure": m, "a": oa[0], "b": ob[0], "value_a": va_[(d, oa[0], m)],
                             "value_b": vb_[(d, ob[0], m)]})
    out.compared = {"cells": len(shared), "rankings": len(groups), "claims": len(claims)}
    # cells whose difference exceeds its bootstrap SE
    pa, pb = _perquery(a), _perquery(b)
    for key in sorted(shared):
        delta = vb_[key] - va_[key]
        x, y = pa.get(key), pb.get(key)
        if x is None or y is None:
            if delta != 0:
                out.untested.append(" ".join(key))
            continue
        common = x.index.intersection(y.index)
        if len(common) == len(x) == len(y) and len(common) > 0:
            d = (y.loc[common] - x.loc[common]).to_numpy(dtype=float)
            if not np.any(d):
                continue
            se = bootstrap_se(d, bootstrap, [seed, zlib.crc32(" ".join(key).encode())])
            kind = "paired"
        else:
            se = math.hypot(bootstrap_se(x.to_numpy(dtype=float), bootstrap, seed),
                            bootstrap_se(y.to_numpy(dtype=float), bootstrap, seed))
            kind = "unpaired"
        if abs(delta) > se:
            out.cells.append({"dataset": key[0], "system": key[1], "measure": key[2], "a": va_[key], "b": vb_[key],
                              "difference": delta, "se": se, "se_kind": kind})
    return out


def _perquery(grid: Grid) -> dict[tuple[str, str, str], pd.Series]:
    pq = grid.perquery
    if pq.empty:
        return {}
    return {(str(d), str(s), str(m)): block.set_index("qid")["value"].dropna()
            for (d, s, m), block in pq.groupby(["dataset", "system", "measure"], sort=False)}


def to_markdown(d: GridDiff) -> str:
    from irgrid.util.markdown import markdown_table

    def f(x: Any) -> str:
        return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else (f"{x:.4f}" if isinstance(x, float)
                                                                                     else str(x))

    parts = [f"# irgrid diff\n\nA: `{d.a}`  \nB: `{d.b}`\n\nCompared {d.compared.get('cells', 0)} cells, "
             f"{d.compared.get('rankings', 0)} rankings, {d.compared.get('claims', 0)} claims"
             + (f" (from {d.claims_from})" if d.claims_from else "") + "."]
    if d.empty():
        parts.append("Nothing changed: no claim verdict, significance mark, rank order or best system, and no "
                     "cell differs by more than its bootstrap SE.")
    sections = [
        ("Claims whose verdict changed", d.claims, ["id", "a", "b", "effect_a", "effect_b", "source", "text"]),
        ("Significance marks against the baseline", d.significance, ["dataset", "system", "measure", "a", "b"]),
        ("Best system per dataset", d.best, ["dataset", "measure", "a", "b", "value_a", "value_b"]),
        ("Cells whose difference exceeds its bootstrap SE", d.cells,
         ["dataset", "system", "measure", "a", "b", "difference", "se", "se_kind"]),
    ]
    for title, rows, cols in sections:
        if rows:
            parts.append(f"## {title} ({len(rows)})\n\n" + markdown_table(
                cols, [[f(r[c]) for c in cols] for r in rows], escape=True))
    if d.ranks:
        lines = [f"- {r['dataset']} {r['measure']}: " + "; ".join(r["swapped"][:10])
                 + (f" (+{len(r['swapped']) - 10} more)" if len(r["swapped"]) > 10 else "") for r in d.ranks]
        parts.append(f"## Rank orders that changed ({len(d.ranks)})\n\n" + "\n".join(lines))
    for side in ("a", "b"):
        if d.only_in.get(side):
            parts.append(f"Only in {side.upper()} ({len(d.only_in[side])} cells): "
                         + ", ".join(d.only_in[side][:20]) + (" ..." if len(d.only_in[side]) > 20 else ""))
    if d.untested:
        parts.append(f"Changed but without per-query values (no SE): {', '.join(d.untested[:20])}")
    return "\n\n".join(parts) + "\n"


def to_json(d: GridDiff) -> str:
    return json.dumps(d.to_dict(), indent=2, default=lambda x: x.item() if hasattr(x, "item") else str(x))


def run(a: str | Path, b: str | Path, claims_file: str | Path | None = None, bootstrap: int = BOOTSTRAP_B,
        seed: int = BOOTSTRAP_SEED) -> GridDiff:
    """Both grids loaded; the claims from --claims, else A's recorded experiment, else B's, else none."""
    claims_mod.check_bootstrap(bootstrap)
    ga, gb = load(a), load(b)
    claims: list[Claim] = []
    universe: list[str] = []
    where = ""
    if claims_file is not None:
        claims, universe, where = claims_mod.claims_of(ga, claims_file)
    else:
        recorded = next((g for g in (ga, gb) if claims_mod.recorded_claims(g)), None)
        if recorded is not None:
            claims, universe, where = claims_mod.claims_of(recorded)
    return diff(ga, gb, claims, universe, where, bootstrap, seed)
