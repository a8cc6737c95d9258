"""Experiment files (YAML, data only) -> a validated ExperimentSpec. Every error names the file and the key."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from irgrid.core import retrievers as r_mod
from irgrid.core.gridcell import GridCell
from irgrid.core.profiles import DEFAULT_PROFILE, ProfileError, check_name
from irgrid.core.schema import Key, Schema
from irgrid.core.significance import (
    COMPARISONS,
    CORRECTIONS,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    TESTS,
    PairedTest,
)
from irgrid.data import datasets as ds_mod
from irgrid.data.errors import InputError
from irgrid.util.errors import Error
from irgrid.util.registry import UnknownNameError

TEST_SCHEMA = Schema({"name": Key(str, required=True, hint=f"one of {list(TESTS)}"),
                      "permutations": Key(int, hint="a whole number >= 100 (randomization test)"),
                      "resamples": Key(int, hint="a whole number >= 100 (bootstrap test)"),
                      "seed": Key(int, hint="a whole number >= 0")})
SCHEMA = Schema({
    "name": Key(), "description": Key(),
    "datasets": Key(list, required=True, nonempty=True, hint="a non-empty list"),
    "retrievers": Key(list, required=True, nonempty=True, hint="a non-empty list"),
    "measures": Key(list, nonempty=True, hint="a non-empty list, or left out to use each dataset's own measures "
                                              "(see `irgrid datasets`)"),
    "baseline": Key(), "test": Key((str, dict), hint="a test name or {name, permutations|resamples, seed}"),
    "correction": Key(), "comparisons": Key(str, hint=f"one of {list(COMPARISONS)}"),
    "models": Key(dict, hint="a mapping of model ids to local folders"), "latency_sample": Key(),
    "collections": Key(list, hint="a list of {name, docs, topics, qrels}"),
    "aggregates": Key(list, hint="a list of aggregate names"), "profile": Key(), "self_matches": Key(),
    "claims": Key(list, hint="a list of claims, each {text, source, <form>: {...}} (docs/claims.md)"),
})
# catalog: each dataset's own policy (ArguAna, Quora drop a query's own document); paper: additionally, on every
# dataset a document whose id equals the query id is removed at evaluation unless judged relevant (irgrid.paper)
SELF_MATCH_RULES = ("catalog", "paper")
RETRIEVER_SCHEMA = Schema({"name": Key(required=True), "as": Key(), "profile": Key(),
                           "options": Key(dict, hint="a mapping of option names to values")})
DATASET_SCHEMA = Schema({"name": Key(required=True), "queries": Key(), "seed": Key()})


class ExperimentError(Error, ValueError):
    pass


@dataclass
class ExperimentSpec:
    name: str
    datasets: list[ds_mod.Dataset]
    retrievers: list[GridCell]  # entries (with options, profiles) and pipeline expressions
    measures: list[Any]  # ir_measures objects; empty: each dataset's own (catalog) measures
    baseline: str | None = None
    test: str = "t"  # irgrid.core.significance.TESTS
    correction: str | None = None
    test_resamples: int = DEFAULT_RESAMPLES  # permutations (randomization) or resamples (bootstrap)
    test_seed: int = DEFAULT_SEED
    comparisons: str = "baseline"  # or all-pairs (every pair of systems; in the report)
    models: dict[str, str] = field(default_factory=dict)
    description: str = ""
    source: str = "<dict>"
    latency_sample: int = 50  # queries timed one at a time for p50/p95 latency
    aggregates: list[str] = field(default_factory=list)  # the paper's aggregate columns (BEIR, LoTTE, ...)
    self_matches: str = "catalog"  # SELF_MATCH_RULES
    claims: list[Any] = field(default_factory=list)  # irgrid.core.claims.Claim; checked by `irgrid claims OUT`

    def cells_on(self, dataset: ds_mod.Dataset) -> list[GridCell]:
        """The grid's cells on `dataset`, each bound to it (a profile's per-dataset values applied, so its key, run
        and index folder are the ones it runs with). Everything that plans, checks, runs, evaluates or times a cell
        takes it from here (or `cells`): binding in one place is what keeps the dry run's keys the grid's."""
        return [r.for_dataset(dataset) for r in self.retrievers]

    def cells(self, datasets: Collection[str] | None = None) -> Iterator[tuple[ds_mod.Dataset, GridCell]]:
        """(dataset, cell bound to it) for every cell of the grid, dataset by dataset in the file's order;
        `datasets`: only those datasets' cells."""
        for dataset in self.datasets:
            if datasets is None or dataset.name in datasets:
                for cell in self.cells_on(dataset):
                    yield dataset, cell

    def measures_for(self, dataset: ds_mod.Dataset) -> list[Any]:
        if self.measures:
            return self.measures
        return [parse_measure(m, f"{self.source}: measures of dataset {dataset.name}") for m in dataset.measures]

    def paired_test(self) -> PairedTest:
        return PairedTest(self.test, self.test_resamples, self.test_seed)

    def config(self) -> dict[str, Any]:
        extra: dict[str, Any] = {}  # only when set: the keys of experiments without them stay as they were
        if self.paired_test().resampling:
            extra["test_options"] = {"resamples": self.test_resamples, "seed": self.test_seed}
        if self.comparisons != "baseline":
            extra["comparisons"] = self.comparisons
        return {
            **extra,
            "name": self.name,
            "datasets": [d.config() for d in self.datasets],
            "retrievers": {r.name: r.config() for r in self.retrievers},
            "measures": [str(m) for m in self.measures] or "per-dataset",
            "aggregates": list(self.aggregates),
            "self_matches": self.self_matches,
            "baseline": self.baseline,
            "test": self.test,
            "correction": self.correction,
        }


def _profile_name(value: Any, where: str) -> str:
    """A profile name (irgrid.core.profiles.PROFILES) from an experiment file, with "did you mean" otherwise."""
    try:
        return check_name(str(value), where)
    except ProfileError as e:
        raise ExperimentError(str(e)) from None


def parse_measure(text: str, where: str):
    from irgrid import measures

    try:
        return measures.parse(text)
    except Exception as e:  # ir_measures raises ValueError / NameError variants
        raise ExperimentError(
            f"{where}: {text!r} is not a measure ir_measures understands ({e}) nor one of irgrid's "
            f"({', '.join(measures.NAMES)}); examples: nDCG@10, R@1000, RR@10, AP, Success@5, Robustness@10, p-MRR"
        ) from None


def dataset_item(item: Any, where: str, lookup: Callable[[str, str], ds_mod.Dataset], source: str) -> ds_mod.Dataset:
    """A dataset name, or {name, queries, seed} for a fixed random subset of its queries."""
    if isinstance(item, dict):
        files = sorted({"docs", "topics", "qrels"} & set(item))
        if files:  # a bring-your-own collection put under datasets: (it was "Did you mean 'queries'?", issue 41)
            name = item.get("name", "my-collection")
            raise ExperimentError(
                f"{source}: {where}: {', '.join(files)} belong to a collection of your own files: declare it under "
                f"`collections:` ({{name: {name}, docs: ..., topics: ..., qrels: ...}}) and name it in `datasets:` "
                f"(datasets: [{name}])")
        DATASET_SCHEMA.check(item, f"{source}: {where}", ExperimentError)
        ds = lookup(str(item["name"]), where)
        if "queries" not in item:
            return ds
        n = _non_negative_int(item["queries"], f"{source}: {where}: queries")
        if n == 0:
            raise ExperimentError(f"{source}: {where}: queries: 0 selects no query; give a number >= 1 or leave "
                                  f"'queries' out for all of them")
        return ds.with_sample(n, _non_negative_int(item.get("seed", 0), f"{source}: {where}: seed"))
    return lookup(str(item), where)


def _pipeline_item(item: dict, where: str) -> tuple[str, str, str]:
    """{as: NAME, pipeline: "EXPRESSION"} (grammar: irgrid.runner.grammar) -> (name, expression, where)."""
    extra = sorted(set(item) - {"as", "pipeline"})
    if extra or not item.get("as") or not isinstance(item.get("pipeline"), str):
        raise ExperimentError(f"{where}: a pipeline item is {{as: NAME, pipeline: \"EXPRESSION\"}}, e.g. "
                              f"{{as: bm25-minilm, pipeline: \"bm25 % 100 >> all-minilm-l6-v2\"}}; got {item!r}")
    return str(item["as"]), item["pipeline"], where


def _non_negative_int(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ExperimentError(f"{where}: expected a whole number >= 0, got {value!r}")
    return value


def load(path: str | Path) -> ExperimentSpec:
    from irgrid.util import yamlsafe

    if not isinstance(path, (str, os.PathLike)):  # irgrid.run(None), irgrid.run(5): was a bare TypeError
        raise ExperimentError(f"an experiment is an experiment file's path, a dict of its keys or an ExperimentSpec; "
                              f"got {type(path).__name__} {path!r}, e.g. irgrid.run('experiments/quickstart.yaml') "
                              f"or irgrid.run({{'datasets': ['vaswani'], 'retrievers': ['bm25-pisa']}})")
    path = Path(path)
    if not path.exists():
        raise ExperimentError(f"experiment file {path} does not exist")
    if not path.is_file():
        raise ExperimentError(f"experiment file {path} is not a file")
    try:
        data = yamlsafe.load_file(path)
    except yamlsafe.YamlError as e:
        raise ExperimentError(str(e)) from None
    return from_dict(data, source=str(path))


def _collections(items: list[Any], source: str) -> dict[str, ds_mod.Dataset]:
    """The file's own (bring-your-own) collections by name; read without registering anything anywhere."""
    from irgrid.data import byo

    base = Path(source).resolve().parent if source != "<dict>" else Path.cwd()  # paths: relative to the YAML
    found: dict[str, ds_mod.Dataset] = {}
    for i, item in enumerate(items):
        try:
            ds = byo.build(item, base, f"{source}: collections[{i}]")
        except byo.CollectionError as e:
            raise ExperimentError(str(e)) from None
        if ds.name in found and found[ds.name].config() != ds.config():
            raise ExperimentError(f"{source}: collections[{i}]: dataset name {ds.name!r} is already registered "
                                  f"(with other files or policies); give the collection another name")
        found.setdefault(ds.name, ds)
    return found


def from_dict(data: Any, source: str = "<dict>") -> ExperimentSpec:
    """The validated spec; no global state changes (its own collections travel inside its datasets)."""
    SCHEMA.check(data, source, ExperimentError)

    def lookup_retriever(name: str, where: str) -> r_mod.Retriever:
        try:
            return r_mod.get(name)
        except UnknownNameError as e:
            raise ExperimentError(f"{source}: {where}: {e}") from None

    local = _collections(data.get("collections") or [], source)

    def lookup_dataset(name: str, where: str) -> ds_mod.Dataset:
        if name in local:
            return local[name]
        try:
            return ds_mod.get(name)
        except (UnknownNameError, InputError) as e:  # InputError: a query sample of no queries (NAME@q0s1)
            raise ExperimentError(f"{source}: {where}: {e}") from None

    datasets = [dataset_item(d, f"datasets[{i}]", lookup_dataset, source) for i, d in enumerate(data["datasets"])]
    default_profile = _profile_name(data.get("profile", DEFAULT_PROFILE), f"{source}: profile: ")
    seen_ds: dict[str, int] = {}
    for i, d in enumerate(datasets):
        if d.name in seen_ds:
            raise ExperimentError(f"{source}: datasets[{i}]: {d.name!r} is already datasets[{seen_ds[d.name]}]; "
                                  f"list each dataset once")
        seen_ds[d.name] = i
    retrievers: list[GridCell] = []
    pipelines: dict[int, tuple[str, str, str]] = {}  # {as, pipeline} items: compiled once all names are known
    for i, item in enumerate(data["retrievers"]):
        where = f"retrievers[{i}]"
        if isinstance(item, dict) and "pipeline" in item:
            pipelines[i] = _pipeline_item(item, f"{source}: {where}")
            retrievers.append(None)  # type: ignore[arg-type]
            continue
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict) or "name" not in item:
            raise ExperimentError(f"{source}: {where}: expected a name, {{name, as, options, profile}} or "
                                  f"{{as, pipeline}}, got {item!r}")
        RETRIEVER_SCHEMA.check(item, f"{source}: {where}", ExperimentError)
        base = lookup_retriever(item["name"], where)
        profile = _profile_name(item.get("profile", default_profile), f"{source}: {where}: profile: ")
        options = item.get("options") or {}
        try:  # the profile's settings first, then this item's options on top
            entry = base.with_profile(profile, name=item.get("as"))
            retrievers.append(entry.with_options(**options) if options else entry)
        except r_mod.OptionValueError as e:  # the same words as check_options below
            raise ExperimentError(f"{source}: {where} ({e.entry}): {e.problem}") from None
        except ValueError as e:
            raise ExperimentError(f"{source}: {where}: {e}") from None
    if pipelines:
        from irgrid.runner import expressions
        from irgrid.runner.grammar import ExpressionError

        named = {r.name: r for r in retrievers if r is not None}
        try:
            compiled = expressions.compile_items(list(pipelines.values()), named,
                                                  lambda n: r_mod.get(n).with_profile(default_profile))
        except ExpressionError as e:
            raise ExperimentError(str(e)) from None
        for i, (name, _, _) in pipelines.items():
            retrievers[i] = compiled[name]
    for i, r in enumerate(retrievers):
        problem = r_mod.check_options(r) if isinstance(r, r_mod.Retriever) else None  # pipelines have none
        if problem:
            raise ExperimentError(f"{source}: retrievers[{i}] ({r.name}): {problem}")
    names = [r.name for r in retrievers]
    import collections

    dupes = sorted(n for n, count in collections.Counter(names).items() if count > 1)  # linear: 18,000 variants
    if dupes:
        raise ExperimentError(f"{source}: retriever name(s) {dupes} appear twice; give variants a distinct 'as:' name")
    measures = [parse_measure(str(m), f"{source}: measures[{i}]") for i, m in enumerate(data.get("measures") or [])]
    aggregates = data.get("aggregates") or []
    if aggregates:
        from irgrid.measures import aggregates as known_aggregates

        unknown_aggs = [a for a in aggregates if a not in known_aggregates()]
        if unknown_aggs:
            raise ExperimentError(f"{source}: unknown aggregate(s) {unknown_aggs}; known: {list(known_aggregates())}")
    baseline = data.get("baseline", names[0])
    if baseline is not None and baseline not in names:
        raise ExperimentError(f"{source}: baseline {baseline!r} is not one of the retrievers {names}")
    test, resamples, seed = _test(data.get("test", "t"), source)
    comparisons = data.get("comparisons", "baseline")
    if comparisons not in COMPARISONS:
        raise ExperimentError(f"{source}: comparisons: {comparisons!r} is not one of {list(COMPARISONS)} (baseline: "
                              f"each system against the baseline; all-pairs: every pair, corrected together)")
    correction = data.get("correction")
    if correction is not None and correction not in CORRECTIONS:
        raise ExperimentError(f"{source}: correction {correction!r} is not one of {CORRECTIONS}")
    self_matches = data.get("self_matches", "catalog")
    if self_matches not in SELF_MATCH_RULES:
        from irgrid.util.registry import did_you_mean

        raise ExperimentError(f"{source}: self_matches: {self_matches!r} is not one of {SELF_MATCH_RULES}."
                              f"{did_you_mean(str(self_matches), list(SELF_MATCH_RULES))}")
    models = {str(k): str(v) for k, v in (data.get("models") or {}).items()}
    retrievers = _mapped(retrievers, models, source)
    claims = _claims(data.get("claims"), names, [d.name for d in datasets], source)
    return ExperimentSpec(
        name=str(data.get("name") or Path(source).stem),
        datasets=datasets,
        retrievers=retrievers,
        measures=measures,
        baseline=baseline,
        test=test,
        test_resamples=resamples,
        test_seed=seed,
        comparisons=comparisons,
        correction=None if correction == "none" else correction,
        models=models,
        description=str(data.get("description", "")),
        aggregates=[str(a) for a in aggregates],
        latency_sample=_non_negative_int(data.get("latency_sample", 50), f"{source}: latency_sample"),
        self_matches=self_matches,
        source=source,
        claims=claims,
    )


def _claims(items: Any, systems: list[str], datasets: list[str], source: str) -> list[Any]:
    """The `claims:` block checked against this experiment's names, each claim's measure a known one."""
    from irgrid.core.claims import ClaimError, parse
    from irgrid.measures import aggregates

    try:
        claims = parse(items, systems, datasets, list(aggregates()), source)
    except ClaimError as e:
        raise ExperimentError(str(e)) from None
    for c in claims:
        for t in c.targets:
            if t.measure is not None:
                parse_measure(t.measure, f"{c.where}: {c.form}: measure")
    return claims


def _test(value: Any, source: str) -> tuple[str, int, int]:
    """`test: t` or `test: {name: randomization, permutations: 10000, seed: 0}` -> (name, resamples, seed)."""
    from irgrid.core.significance import ALIASES
    from irgrid.util.registry import did_you_mean

    item = TEST_SCHEMA.check(value, f"{source}: test", ExperimentError) if isinstance(value, dict) else {"name": value}
    name = ALIASES.get(str(item["name"]), str(item["name"]))
    if name not in TESTS:
        raise ExperimentError(f"{source}: test {item['name']!r} is not one of {list(TESTS)} (or "
                              f"{sorted(ALIASES)}).{did_you_mean(str(item['name']), list(TESTS))}")
    key = {"randomization": "permutations", "bootstrap": "resamples"}.get(name)
    for other in ("permutations", "resamples"):
        if other in item and other != key:
            raise ExperimentError(f"{source}: test: {other!r} does not apply to the {name} test"
                                  + (f"; it takes {key!r}" if key else " (only randomization and bootstrap resample)"))
    resamples = item.get(key, DEFAULT_RESAMPLES) if key else DEFAULT_RESAMPLES
    seed = item.get("seed", DEFAULT_SEED)
    if key is None and "seed" in item:
        raise ExperimentError(f"{source}: test: 'seed' does not apply to the {name} test (it is not resampled)")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 100:
        raise ExperimentError(f"{source}: test: {key} must be a whole number >= 100, got {resamples!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ExperimentError(f"{source}: test: seed must be a whole number >= 0, got {seed!r}")
    return name, resamples, seed


def with_extra(spec: Any, extra: Mapping[str, Any] | None, keys: Mapping[str, str] | None) -> Any:
    """The spec with Python-composed pipelines appended as cells (see `extra_pipeline`)."""
    from irgrid.runner.grammar import ExpressionError
    from irgrid.runner.python_pipeline import extra_pipeline

    if isinstance(spec, dict):
        spec = from_dict(spec)
    spec = spec if isinstance(spec, ExperimentSpec) else load(spec)
    keys = dict(keys or {})
    unknown = sorted(set(keys) - set(extra or {}))
    if unknown:  # checked before `extra` may be empty: an orphan key was silently ignored (issue 32)
        raise ExpressionError(f"keys {unknown} name no extra pipeline; extra pipelines: {sorted(extra or {})}")
    if not extra:
        return spec
    names = {r.name for r in spec.retrievers}
    clash = sorted(set(extra) & names)
    if clash:
        raise ExpressionError(f"extra pipeline name(s) {clash} already name retrievers of {spec.source}; "
                              f"choose other names")
    added = [extra_pipeline(n, p, keys.get(n)) for n, p in extra.items()]
    return dataclasses.replace(spec, retrievers=[*spec.retrievers, *added])


def _mapped(retrievers: list[GridCell], models: dict[str, str], source: str) -> list[GridCell]:
    """The cells with their mapped checkpoints keyed by the mapped folders' content (irgrid.models.resolver
    .with_mapping); a `models:` value that names a file which is not a model (a pickle...) is refused here, at
    validation, as is an IRGRID_MODELS naming no file."""
    from irgrid.models import resolver

    for model_id, folder in models.items():
        problem = resolver.mapped_path_problem(Path(folder).expanduser())
        if problem:
            raise ExperimentError(f"{source}: models: {model_id!r} is mapped to {folder}, {problem}")
    try:
        mark = resolver.mapping_marker(models)
        return [mark(r) for r in retrievers]
    except resolver.ModelMappingError as e:
        raise ExperimentError(f"{source}: {e}") from None
