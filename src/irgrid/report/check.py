"""`irgrid check OUT`: compare a grid's scores with the expected scores stored next to its experiment.

In the style of Pyserini's two-click reproductions: `experiments/NAME.yaml` has `experiments/NAME.expected.yaml`,

    expected:
      - {dataset: beir/scifact/test, system: bm25, measure: nDCG@10, value: 0.6789, tolerance: 0.0005,
         source: "Pyserini 2CR beir.yaml (flat)"}

and every entry is one OK/FAIL line; an expected cell the grid did not produce is a FAIL.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from irgrid.core.schema import NUMBER, Key, Schema
from irgrid.util.errors import Error
from irgrid.util.yamlsafe import read_yaml

DEFAULT_TOLERANCE = 0.0005
FILE = Schema({"expected": Key(list, required=True, nonempty=True,
                               hint="a non-empty list of {dataset, system, measure, value, tolerance, source}")})
ENTRY = Schema({"dataset": Key(required=True), "system": Key(required=True), "measure": Key(required=True),
                "value": Key(NUMBER, required=True), "tolerance": Key(NUMBER), "source": Key()})


class CheckError(Error, ValueError):
    pass


@dataclass(frozen=True)
class Expected:
    dataset: str
    system: str
    measure: str
    value: float
    tolerance: float = DEFAULT_TOLERANCE
    source: str = ""


@dataclass(frozen=True)
class Outcome:
    expected: Expected
    actual: float | None

    @property
    def ok(self) -> bool:
        # a little slack for the float rounding of value ± tolerance itself
        return self.actual is not None and abs(self.actual - self.expected.value) <= self.expected.tolerance + 1e-12

    def line(self) -> str:
        e = self.expected
        got = "missing" if self.actual is None else f"{self.actual:.4f}"
        delta = "" if self.actual is None else f" (Δ {self.actual - e.value:+.4f})"
        src = f"  [{e.source}]" if e.source else ""
        return (f"{'OK  ' if self.ok else 'FAIL'}  {e.dataset}  {e.system}  {e.measure}: {got}, expected "
                f"{e.value} ± {e.tolerance}{delta}{src}")


def expected_file_for(experiment: str | Path) -> Path:
    path = Path(experiment)
    return path.with_name(f"{path.stem}.expected.yaml")


def load_expected(path: str | Path) -> list[Expected]:

    path = Path(path)
    if not path.exists():
        raise CheckError(f"expected-scores file {path} does not exist")
    items = FILE.check(read_yaml(path, CheckError), str(path), CheckError)["expected"]
    out = []
    for i, item in enumerate(items):
        where = f"{path}: expected[{i}]"
        ENTRY.check(item, where, CheckError)
        tol = DEFAULT_TOLERANCE if item.get("tolerance") is None else float(item["tolerance"])
        value = float(item["value"])
        if not (math.isfinite(value) and tol >= 0):
            raise CheckError(f"{where}: value must be finite and tolerance >= 0")
        out.append(Expected(str(item["dataset"]), str(item["system"]), str(item["measure"]), value, tol,
                            str(item.get("source", ""))))
    return out


def locate_expected(out: Path) -> Path:
    """The expected file next to the experiment recorded in OUT/manifest.json."""
    manifest_path = out / "manifest.json"
    if not manifest_path.exists():
        raise CheckError(f"{out} has no manifest.json: is it an `irgrid run --out` folder?")
    manifest = json.loads(manifest_path.read_text())
    candidates = [manifest.get("source_path"), manifest.get("source")]
    for c in candidates:
        if c and c != "<dict>":
            path = expected_file_for(c)
            if path.exists():
                return path
    tried = ", ".join(str(expected_file_for(c)) for c in candidates if c and c != "<dict>") or "none recorded"
    raise CheckError(f"no expected-scores file for {out} (tried {tried}); pass --expected FILE")


def check(out: str | Path, expected: str | Path | None = None) -> list[Outcome]:
    out = Path(out)
    if not (out / "results.csv").exists():
        raise CheckError(f"{out} has no results.csv: is it an `irgrid run --out` folder?")
    items = load_expected(expected if expected is not None else locate_expected(out))
    results = pd.read_csv(out / "results.csv")
    value = results.set_index(["dataset", "system", "measure"])["value"]
    outcomes = []
    for e in items:
        key = (e.dataset, e.system, e.measure)
        outcomes.append(Outcome(e, float(value[key]) if key in value.index else None))
    return outcomes
