"""Summary tables and their files, shared by live QA experiments (`grid`) and replayed readers (`replay`), so
that both report means, bootstrap CIs and paired tests between settings the same way and write them alike."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from irgrid.core import significance
from irgrid.qa import answer_measures as measures
from irgrid.util.files import write_text_atomic


def summary(df: pd.DataFrame, task: str, columns: Sequence[str], by: list[str], samples: int, seed: int
            ) -> pd.DataFrame:
    """One row per group and measure: task, *by, measure, value (mean), ci_low, ci_high, n (NaN rows skipped)."""
    rows = []
    for m in columns:
        s = measures.summarize(df.dropna(subset=[m]), m, by, samples, seed)
        s.insert(0, "task", task)
        s.insert(1 + len(by), "measure", m)
        rows.append(s)
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def paired_tests(df: pd.DataFrame, task: str, columns: Sequence[str], who: str,
                 pairs: Sequence[tuple[str, str]], test: str, correction: str | None) -> pd.DataFrame:
    """Paired tests between settings on the same items per `who` (reader or model) and measure: exact McNemar
    for accuracy, `test` otherwise; p-values corrected over the pairs of each (who, measure) family."""
    out = []
    for m in columns:
        for name in df[who].unique():
            block = df[df[who] == name].pivot_table(index="qid", columns="setting", values=m, aggfunc="first")
            rows, ps = [], []
            for a, b in pairs:
                if a not in block or b not in block:
                    continue
                pair = block[[a, b]].dropna()
                p = measures.paired_p(pair[a].to_numpy(), pair[b].to_numpy(), test, binary=(m == "accuracy"))
                ps.append(p)
                rows.append({"task": task, who: name, "measure": m, "setting_a": a, "setting_b": b,
                             "mean_a": float(pair[a].mean()), "mean_b": float(pair[b].mean()), "n": int(len(pair)),
                             "test": "mcnemar-exact" if m == "accuracy" else test, "p_value": p})
            for row, p, pc in zip(rows, ps, significance.correct(ps, correction)):
                out.append({**row, "p_value_corrected": None if p is None else float(pc), "correction": correction})
    return pd.DataFrame(out)


def write(out: str | Path, tables: dict[str, pd.DataFrame], markdown: str, manifest: dict[str, Any],
          extra: dict[str, Any] | None = None) -> Path:
    """The output folder of a QA run: NAME.csv per table, results.md, manifest.json and `extra` JSON files
    (NAME.json), each written atomically."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        write_text_atomic(out / f"{name}.csv", table.to_csv(index=False))
    for name, obj in (extra or {}).items():
        write_text_atomic(out / f"{name}.json", json.dumps(obj, indent=2, default=float))
    write_text_atomic(out / "results.md", markdown)
    write_text_atomic(out / "manifest.json", json.dumps(manifest, indent=2, default=str))
    return out
