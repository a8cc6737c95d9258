"""A stored grid read back from its output folder (results.csv, perquery.csv, manifest.json, runs/, qrels/):
the only input of every analysis and report, so nothing is ever recomputed."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from irgrid.runner.outputs import OutputError
from irgrid.util.files import slug


@dataclass
class Grid:
    """An output folder of `irgrid run`."""

    out: Path
    results: pd.DataFrame
    perquery: pd.DataFrame
    manifest: dict[str, Any]

    failures: list[dict[str, Any]] = field(default_factory=list)  # failures.json: cells that did not run

    @property
    def datasets(self) -> list[str]:
        return list(dict.fromkeys(self.results["dataset"]))

    def failed(self, system: str, datasets: Iterable[str]) -> bool:
        """Whether this system failed on one of these datasets (tables say 'failed', not '–', for such cells)."""
        names = set(datasets)
        return any(f.get("retriever") == system and (f.get("dataset") in names or f.get("dataset") == "*")
                   for f in self.failures)

    def systems(self, dataset: str | None = None) -> list[str]:
        res = self.results if dataset is None else self.results[self.results["dataset"] == dataset]
        return list(dict.fromkeys(res["system"]))

    def measures(self, dataset: str) -> list[str]:
        res = self.results[(self.results["dataset"] == dataset) & (self.results["measure"] != "ms/query")]
        return list(dict.fromkeys(res["measure"]))

    @property
    def baseline(self) -> str | None:
        base = self.results["baseline"].dropna()
        return str(base.iloc[0]) if len(base) else None

    def families(self) -> dict[str, str]:
        return {name: str(e.get("family", "?")) for name, e in self.manifest.get("retrievers", {}).items()}

    def component_families(self) -> dict[str, set[str]]:
        """Per system, the families of the entries it is built from (manifest `components`; a pipeline recorded
        before components were: its own family)."""
        out = {}
        for name, e in self.manifest.get("retrievers", {}).items():
            comps = e.get("components")
            out[name] = set(comps.values()) if comps else {str(e.get("family", "?"))}
        return out

    def fused_pairs(self) -> set[frozenset[str]]:
        """Pairs of systems whose fusion the grid holds already, or nearly: pairs a system fuses (manifest `fuses`:
        rrf(a, b), a + b), each fusion with a system it is made of, and any pair whose members together are those of
        a fusion of the grid or of one of the two (manifest `fusion_members`: the fused systems' configuration
        keys, nested fusions opened): rrf(a, b) beside 0.7 * a + 0.3 * b, rrf(b, a, k=30) or rrf(rrf(a, b), c) beside
        c. Fusing such a pair again only changes order, weights or k, which says nothing new."""
        entries = self.manifest.get("retrievers", {})
        out = set()
        for name, e in entries.items():
            names = e.get("fuses") or []
            out |= {frozenset((a, b)) for i, a in enumerate(names) for b in names[i + 1:] if a != b}
            if names:
                out |= {frozenset((name, part)) for part in {*names, *(e.get("components") or {})} if part != name}
        members = {name: self._members(name, entries) for name in entries}
        fusions = {m for name, m in members.items() if entries[name].get("fuses") or entries[name].get("fusion_members")}
        systems = list(entries)
        for i, a in enumerate(systems):
            for b in systems[i + 1:]:
                both = members[a] | members[b]
                if both in fusions or both in (members[a], members[b]):
                    out.add(frozenset((a, b)))
        return out

    def _members(self, name: str, entries: dict[str, Any], seen: frozenset[str] = frozenset()) -> frozenset[str]:
        """What a system is a fusion of (configuration keys), or itself (its key) when it is no fusion. Manifests
        written before `fusion_members` was recorded: from `fuses`, the names that are systems of the grid opened."""
        e = entries.get(name) or {}
        if e.get("fusion_members"):
            return frozenset(map(str, e["fusion_members"]))
        fuses = e.get("fuses") or []
        if fuses and name not in seen:
            return frozenset().union(*(self._members(f, entries, seen | {name}) for f in fuses))
        return frozenset({str(e.get("config_hash") or name)})

    def group(self, dataset: str) -> str:
        """The dataset's group (msmarco, beir, ...; manifest `datasets`, else the catalog, else "other")."""
        recorded = self.manifest.get("datasets", {}).get(dataset, {})
        if recorded.get("group"):
            return str(recorded["group"])
        from irgrid.data.datasets import get
        from irgrid.util.registry import UnknownNameError

        try:
            return str(get(dataset).group)
        except (UnknownNameError, ValueError):
            return "other"

    def paper_names(self) -> dict[str, str | None]:
        """Our systems -> the paper's model names: from the manifest, else from the registry when the stored
        configuration hash is the registered entry's (a changed variant is a new result)."""
        out: dict[str, str | None] = {}
        for name, entry in self.manifest.get("retrievers", {}).items():
            if "paper_name" in entry:
                out[name] = entry["paper_name"]
                continue
            from irgrid.core.retrievers import get
            from irgrid.util.registry import UnknownNameError

            try:
                registered = get(name)
            except UnknownNameError:
                out[name] = None
                continue
            out[name] = registered.paper_name if registered.key() == entry.get("config_hash") else None
        return out

    def has_run(self, dataset: str, system: str) -> bool:
        """Whether the stored run is here (results.csv alone is enough for the tables; failure points, Jaccard
        and fusion need runs)."""
        return (self.out / "runs" / slug(dataset) / f"{system}.res.gz").exists()

    def run(self, dataset: str, system: str) -> pd.DataFrame:
        path = self.out / "runs" / slug(dataset) / f"{system}.res.gz"
        run = pd.read_csv(path, sep=r"\s+", header=None, names=["qid", "Q0", "docno", "rank", "score", "name"],
                          dtype={"qid": str, "docno": str})
        return run[["qid", "docno", "rank", "score"]]

    def qrels(self, dataset: str) -> pd.DataFrame:
        path = self.out / "qrels" / f"{slug(dataset)}.qrels"
        if path.exists():
            return pd.read_csv(path, sep=r"\s+", header=None, names=["qid", "iter", "docno", "label"],
                               dtype={"qid": str, "docno": str})[["qid", "docno", "label"]]
        # folders written before qrels were stored with the runs: read them from the dataset
        from irgrid.data.datasets import get

        return get(dataset).qrels()[["qid", "docno", "label"]]


def load(out: str | Path) -> Grid:
    out = Path(out)
    missing = [n for n in ("results.csv", "perquery.csv", "manifest.json") if not (out / n).exists()]
    if missing:
        raise OutputError(f"{out} is not an irgrid output folder: missing {', '.join(missing)}")
    results = pd.read_csv(out / "results.csv")
    perquery = pd.read_csv(out / "perquery.csv", dtype={"qid": str})
    failures_path = out / "failures.json"
    failures = json.loads(failures_path.read_text() or "[]") if failures_path.exists() else []
    return Grid(out, results, perquery, json.loads((out / "manifest.json").read_text()),
                [f for f in failures if isinstance(f, dict)])
