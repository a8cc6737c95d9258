"""Declarative retriever entries.

An entry says *what* a retriever is (family, architecture, checkpoints with revisions, options) and names the
two functions that make it runnable: the document side (`IndexRecipe.build`, shared by every entry that
indexes the same way) and the query side (`Retriever.query`, which gets the opened index artifact and returns a
PyTerrier transformer). The engine never branches on a retriever: everything that differs lives here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from irgrid.core.enums import NameEnum
from irgrid.core.gridcell import check_cell_name
from irgrid.core.modelref import ModelRef, Resolved
from irgrid.core.profiles import ProfileError, Setting, check_name, dataset_values, for_entry, keyed
from irgrid.core.profiles import matches as profile_matches
from irgrid.core.profiles import values as profile_values
from irgrid.util.errors import Error
from irgrid.util.hashing import canonical, config_hash
from irgrid.util.registry import Registry

if TYPE_CHECKING:
    import pyterrier as pt


class Family(NameEnum):
    """Table 1's retriever families (the order `irgrid list` shows them in)."""

    SPARSE = "sparse"
    EXPANSION = "expansion"
    DENSE = "dense"
    LATE_INTERACTION = "late-interaction"
    RERANKER = "reranker"
    PIPELINE = "pipeline"  # a pipeline expression (irgrid.runner.expressions)


FAMILIES: tuple[Family, ...] = tuple(Family)


class EncoderWiring(Protocol):
    """An entry's encoder wiring as this layer sees it (`irgrid.dense.spec.EncoderSpec` is the one there is): a
    name, and how cache keys name it (`Retriever.keyed_options`)."""

    name: str

    def wiring_options(self) -> dict[str, Any]: ...


@dataclass
class BuildContext:
    """What an index builder gets: where to write, the documents, and resolved model paths."""

    path: Path
    params: Mapping[str, Any]
    models: Mapping[str, Resolved]  # role -> where the checkpoint loads from
    docs: Callable[[], Iterator[dict[str, str]]]  # fresh iterator of {'docno', 'text'} (flat title + text)
    docs_count: int
    device: str | None = None
    # the same documents with title and text kept apart ({'docno', 'title', 'text'}), for builders whose entry
    # declares other document fields than the flat join (irgrid.data.doc_fields); None where not available
    fielded: Callable[[], Iterator[dict[str, str]]] | None = None
    # the cache the artifact is built in (irgrid.store.Store), for stages that keep their work as they go (docT5query's
    # generations area: a killed stage resumes); None outside the grid's builders
    store: Any = None


@dataclass(frozen=True, eq=False)
class DocStage:
    """A document-side transformation whose output is cached once per corpus and reused by every index built
    from it (doc2query expansions, impact vectors): `make(ctx)` returns a PyTerrier transformer applied to
    batches of {'docno', 'text'} records; the records it returns are stored as JSON lines."""

    name: str
    make: Callable[[BuildContext], Any]
    params: Mapping[str, Any] = field(default_factory=dict)
    models: Mapping[str, ModelRef] = field(default_factory=dict)
    version: int = 1

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "make": canonical(self.make), "params": canonical(keyed(self.params)),
                "models": {k: v.config() for k, v in self.models.items()}, "version": self.version}

    def key(self) -> str:
        return config_hash(self.config())


@dataclass(frozen=True, eq=False)
class IndexRecipe:
    """The document side. Entries holding equal recipes share one index per corpus."""

    name: str
    build: Callable[[BuildContext], None]
    open: Callable[[Path, Mapping[str, Any], Mapping[str, Resolved]], Any]
    params: Mapping[str, Any] = field(default_factory=dict)
    models: Mapping[str, ModelRef] = field(default_factory=dict)
    version: int = 1  # bump when the builder's output changes for the same params
    stage: DocStage | None = None  # documents pass through this (cached) stage before the builder sees them
    # the builder can be split into encoding shards merged bit-for-bit (irgrid.cluster.sharding); not part of the key:
    # it says how an index may be built, not what it contains
    shardable: bool = False
    # build in a forked child process: a native builder that aborts or segfaults (PISA on a full disk) then fails
    # only this index, named, instead of killing the grid. Only for builders that use no JVM or GPU (fork-safe)
    isolate: bool = False

    def all_models(self) -> dict[str, ModelRef]:
        out = dict(self.stage.models) if self.stage else {}
        out.update(self.models)
        return out

    def config(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            "build": canonical(self.build),
            "params": canonical(keyed(self.params)),
            "models": {k: v.config() for k, v in self.models.items()},
            "version": self.version,
        }
        if self.stage is not None:
            out["stage"] = self.stage.config()
        return out

    def key(self) -> str:
        return config_hash(self.config())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IndexRecipe) and self.config() == other.config()

    def __hash__(self) -> int:
        return hash(self.key())


@dataclass(frozen=True)
class QueryContext:
    """What a query-side builder gets besides the opened index artifact."""

    options: Mapping[str, Any]
    models: Mapping[str, Resolved]
    device: str | None = None
    encoder: EncoderWiring | None = None  # the entry's dense encoder spec (`Retriever.encoder`), for its query side


@dataclass(frozen=True, eq=False)
class Retriever:
    """One row of Table 1: a named, fully specified retriever. A grid cell (`irgrid.core.gridcell.GridCell`):
    `build` makes it runnable, through the runner (`irgrid.runner.build`): entries stay pure data."""

    name: str
    family: str  # a Family (its value: entries and YAML give the plain name)
    architecture: str
    query: Callable[[Any, QueryContext], pt.Transformer]
    index: IndexRecipe | None = None
    models: Mapping[str, ModelRef] = field(default_factory=dict)  # query-side checkpoints
    options: Mapping[str, Any] = field(default_factory=dict)
    paper_name: str | None = None  # the name in the paper's tables, for checks against reference scores
    extra: str | None = None  # the pip extra that installs this family's dependencies
    reference: str | None = None  # where the configuration comes from (model card, paper, code)
    version: int = 1
    # entries that wrap another entry (HyDE over a dense retriever) re-derive themselves when these options change
    derive: Callable[[Mapping[str, Any]], Retriever] | None = None
    derive_options: tuple[str, ...] = ()
    # named, sourced configurations (irgrid.core.profiles): option -> Setting; the defaults above are the card's
    profiles: Mapping[str, Mapping[str, Setting]] = field(default_factory=dict)
    profile: str | None = None  # the profile applied (not part of the key: the settings it changed are)
    # dataset -> {option: value} the applied profile sets on named datasets (ColBERTv2's query length on ArguAna):
    # applied per cell by `for_dataset`, so the value a cell runs with is in its key (this map itself is not)
    per_dataset: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # the per-dataset values `for_dataset` applied to this (cell's) entry: for the manifest (not part of the key)
    dataset_applied: Mapping[str, Any] = field(default_factory=dict)
    # this entry's own knobs, or its own meaning of a shared one: option name -> irgrid.core.options.Option (or the
    # older (type, min, max)); the shared vocabulary is irgrid.core.options.KNOBS. Not part of the key: it
    # validates and documents, never changes runs
    option_types: Mapping[str, Any] = field(default_factory=dict)
    # every checkpoint is its tiny stand-in (`with_tiny_models`); kept so that re-derived variants stay tiny
    # (not part of the key: the checkpoints' own configurations are)
    tiny_models: bool = False
    # Wiring: what ties the entry to its parts. Typed fields, never options (`options` holds only the knobs a user
    # may set); keyed under the option names they had before they left `options` (`keyed_options`), so every
    # cache key is unchanged.
    encoder: EncoderWiring | None = None  # the dense encoder spec its query side runs, by value (dense, ColBERT, HyDE)
    wraps: Retriever | None = None  # the entry this one is built over, as profiled (HyDE over a dense entry)
    head: str | None = None  # a re-ranker's scoring head, which follows its checkpoint (irgrid.cross_encoders.KINDS)
    # names a user may try to set that are wiring, not options -> what to do instead ('<value>' stands for the value
    # given): `with_options` refuses them with this hint instead of "no such option"
    wiring: Mapping[str, str] = field(default_factory=dict)
    # model roles an option may point at another checkpoint (a generator; also every role a profile sets): every
    # other role's checkpoint goes with the entry's prompts, pooling and heads, so swapping it by an option would
    # silently pair mismatched parts
    swappable: tuple[str, ...] = ()
    # how the entry scores a given candidate set (right of `>>`, `.scorer(ds)`): factory(entry, resolved models,
    # device, opened index or None) -> transformer, read by irgrid.runner.scoring (not part of the key: the
    # scorer follows the entry's configuration); `rerank_only`: it cannot retrieve (cross-encoders)
    make_scorer: Callable[..., Any] | None = None
    rerank_only: bool = False

    def __post_init__(self) -> None:
        check_cell_name(self.name)
        if self.family not in FAMILIES:
            raise EntryError(f"retriever {self.name!r}: family {self.family!r} is not one of {FAMILIES}")

    def all_models(self) -> dict[str, ModelRef]:
        out = self.index.all_models() if self.index else {}
        out.update(self.models)
        return out

    def config(self) -> dict[str, Any]:
        """Everything that determines this retriever's output; its hash keys cached runs."""
        return {
            "query": canonical(self.query),
            "index": self.index.config() if self.index else None,
            "models": {k: v.config() for k, v in self.models.items()},
            "options": canonical(keyed(self.keyed_options())),
            "version": self.version,
        }

    def keyed_options(self) -> dict[str, Any]:
        """The options as cache keys (and `irgrid list`) see them: the knobs plus the wiring under the option names
        it had when it sat in `options` (`encoder`, `query_config`, a re-ranker's `kind`, a wrapped entry's own)."""
        out = self.wraps.keyed_options() if self.wraps is not None else {}
        if self.encoder is not None:
            out.update(self.encoder.wiring_options())
        if self.head is not None:
            out["kind"] = self.head
        return {**out, **self.options}

    def key(self) -> str:
        return config_hash(self.config())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Retriever) and (self.name, self.config()) == (other.name, other.config())

    def __hash__(self) -> int:
        return hash((self.name, self.key()))

    def depth(self) -> int | None:
        """The most results it returns per query (its `num_results`); None when the entry does not declare one.
        Grids refuse deeper runs and flag measures that look deeper than this (irgrid.runner.checks)."""
        value = self.options.get("num_results")
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else None

    def with_options(self, name: str | None = None, **options: Any) -> Retriever:
        """A variant with some options changed; unknown option names are an error, not a silent no-op."""
        problem = options_problem(options, self.option_types)  # before a re-derivation reads them
        if problem:
            raise OptionValueError(self.name, problem)
        if self.derive is not None and set(options) & set(self.derive_options):
            rebuilt = self.derive({**self.options, **{k: options[k] for k in self.derive_options if k in options}})
            # a re-derived entry keeps this entry's profiles (unless it has its own) and the one applied
            rebuilt = dataclasses.replace(rebuilt, profiles=rebuilt.profiles or self.profiles, profile=self.profile,
                                          per_dataset=_without(self.per_dataset, options))
            if self.tiny_models:  # derived from registered (real) entries: the stand-ins follow this entry
                rebuilt = rebuilt.with_tiny_models()
            rest = {k: v for k, v in options.items() if k not in self.derive_options}
            return rebuilt.with_options(name=name or self.name, **rest)
        roles = set(self.all_models())
        swappable = sorted(set(self.swappable) | {k for s in self.profiles.values() for k in s if k in roles})
        settable = set(self.options) | set(self.derive_options) | set(swappable)
        wired = sorted(set(options) & set(self.wiring))
        if wired:
            value = options[wired[0]]
            raise EntryError(f"retriever {self.name!r}: option {wired[0]!r} wires the entry to its parts and cannot "
                             f"be set; {self.wiring[wired[0]].replace('<value>', str(value))}")
        unknown = sorted(set(options) - set(self.options) - roles)
        if unknown:
            raise EntryError(
                f"retriever {self.name!r} has no option(s) {', '.join(map(repr, unknown))}; "
                f"its options are: {', '.join(sorted(settable)) or '(none)'}"
                + (" (model roles take 'org/name' or 'org/name@revision')" if swappable else "")
            )
        fixed_roles = sorted(set(options) & roles - set(swappable))
        if fixed_roles:
            raise EntryError(
                f"retriever {self.name!r}: {fixed_roles[0]!r} is a model role, not an option: this entry's "
                f"checkpoints go with its prompts, pooling and heads, so an option cannot swap one. To evaluate "
                f"another checkpoint, list the registered entry for it (`irgrid list`) or register one "
                f"(pipelines/*.py)" + (f"; roles this entry lets you swap: {', '.join(swappable)}"
                                       if swappable else ""))
        swaps = {k: _model_from_option(v, self.all_models()[k], self.name, k) for k, v in options.items() if k in roles}
        merged = {**self.options, **{k: v for k, v in options.items() if k not in roles}}
        entry = dataclasses.replace(self, name=name or self.name, options=merged,
                                    models={k: swaps.get(k, v) for k, v in self.models.items()},
                                    per_dataset=_without(self.per_dataset, options))
        if entry.index is not None and swaps:
            index = entry.index
            stage = index.stage
            if stage is not None and set(swaps) & set(stage.models):
                stage = dataclasses.replace(stage, models={k: swaps.get(k, v) for k, v in stage.models.items()})
            index = dataclasses.replace(index, stage=stage,
                                        models={k: swaps.get(k, v) for k, v in index.models.items()})
            entry = dataclasses.replace(entry, index=index)
        problem = check_options(entry)  # the YAML's type and range checks, for Python callers too (issue 32)
        if problem:
            raise OptionValueError(entry.name, problem)
        return entry

    def with_tiny_models(self) -> Retriever:
        """This entry with every checkpoint that declares its architecture replaced by its tiny random-weight
        stand-in (`ModelRef.as_tiny`): other keys, so tiny indexes and runs never mix with real ones."""
        if self.tiny_models:
            return self

        def tiny(models: Mapping[str, ModelRef]) -> dict[str, ModelRef]:
            return {k: v.as_tiny() for k, v in models.items()}

        index = self.index
        if index is not None:
            stage = index.stage
            if stage is not None:
                stage = dataclasses.replace(stage, models=tiny(stage.models))
            index = dataclasses.replace(index, stage=stage, models=tiny(index.models))
        return dataclasses.replace(self, index=index, models=tiny(self.models), tiny_models=True)

    def with_profile(self, profile: str, name: str | None = None) -> Retriever:
        """This entry under a named profile ('paper' or 'card'): its settings applied as options, so the cache
        key follows the values. An entry without settings for a profile has one configuration for both."""
        check_name(profile, f"retriever {self.name!r}: ")
        settings = for_entry(profile, self.profiles.get(profile, {}), self.options)
        per_dataset = dataset_values(settings)
        try:
            entry = self.with_options(name=name, **profile_values(settings)) if settings else \
                dataclasses.replace(self, name=name or self.name)
            for values in per_dataset.values():  # each dataset's values are valid options too
                entry.with_options(**values)
        except ValueError as e:
            raise ProfileError(f"retriever {self.name!r}, profile {profile!r}: {e}") from e
        return dataclasses.replace(entry, profile=profile, per_dataset=per_dataset)

    def dataset_options(self, dataset: Any) -> dict[str, Any]:
        """The options this entry's profile sets on `dataset` (a Dataset, or its name / irds id)."""
        names = (dataset,) if isinstance(dataset, str) else (getattr(dataset, "name", None),
                                                               getattr(dataset, "irds_id", None))
        out: dict[str, Any] = {}
        for pattern, values in self.per_dataset.items():
            if profile_matches(pattern, *names):
                out.update(values)
        return out

    def for_dataset(self, dataset: Any) -> Retriever:
        """This entry as it runs on `dataset`: the profile's per-dataset values applied (the cell's key follows
        them); unchanged on every other dataset. The name stays, so results line up across datasets."""
        values = self.dataset_options(dataset)
        return dataclasses.replace(self.with_options(**values), dataset_applied=values) if values else self

    def build(self, dataset: Any, store: Any, model_map: Mapping[str, str] | None = None,
              live: bool = False) -> pt.Transformer:
        """GridCell: its query pipeline on `dataset` (a Dataset), its index built or reused in `store`, the
        dataset's policies applied (irgrid.runner.build.build_entry)."""
        return _builder().build_entry(self, dataset, store, model_map)

    # The roles an entry hands out, as PyTerrier artifacts hand out transformers, all built by the runner.
    def pipeline(self, dataset: Any = None, **kwargs: Any) -> pt.Transformer:
        """Build this retriever for a dataset (indexing it first if needed): for scripts and notebooks. The same
        call as `irgrid.pipeline(entry, dataset, **kwargs)`, the one builder (irgrid.runner.build.python_pipeline)."""
        return _builder().python_pipeline(self, dataset, **kwargs)

    def retriever(self, dataset: Any = None, **kwargs: Any) -> pt.Transformer:
        """The first-stage retriever (same as `pipeline`). Given a result frame (a `docno` column) it re-ranks
        exactly those candidates when the entry can score them, and raises otherwise: it never retrieves anew."""
        return _builder().python_pipeline(self, dataset, **kwargs)

    def scorer(self, dataset: Any = None, **kwargs: Any) -> pt.Transformer:
        """A transformer that re-scores the candidates it receives (`bm25 % 100 >> dense.scorer(ds)`), as on the
        right of `>>` in an experiment's pipeline expression; an error for entries that cannot score."""
        return _builder().scorer_role(self, dataset, **kwargs)

    def indexer(self, dataset: Any = None, **kwargs: Any) -> Any:
        """An indexer whose `index()` builds (or reuses) this entry's index of the dataset's corpus in the cache."""
        return _builder().indexer_role(self, dataset, **kwargs)


def _builder() -> Any:
    """irgrid.runner.build, which builds entries: a layer above this one. The declarative layer's one upward
    import, lazy (entries stay data; `irgrid list` imports no runner) and declared in the import contract
    (pyproject.toml, `ignore_imports`)."""
    from irgrid.runner import build

    return build


# an error's example value per option (BM25's and QLD's usual settings)
OPTION_EXAMPLES: dict[str, Any] = {"k1": 0.9, "b": 0.4, "mu": 1000.0, "c": 1.0}


class EntryError(Error, ValueError):
    """An entry (in pipelines/, or a user's own) or its options describe something irgrid cannot build: a bad
    name, family, pooling, template, rule or parameter; the message names the entry and what is allowed."""


class OptionValueError(Error, ValueError):
    """An option value of the wrong type or out of range (`check_options`), raised by `with_options`."""

    def __init__(self, entry: str, problem: str):
        super().__init__(f"retriever {entry!r}: {problem}")
        self.entry, self.problem = entry, problem


def check_options(entry: Retriever) -> str | None:
    """Why an entry's option values are unusable (None: they are fine): typed, in range and among the choices its
    knobs declare (irgrid.core.options), checked before any cell runs instead of failing inside a library."""
    return options_problem(entry.options, getattr(entry, "option_types", None))


def options_problem(options: Mapping[str, Any], option_types: Mapping[str, Any] | None) -> str | None:
    """`check_options` on given values against an entry's declared knobs (names it does not declare pass)."""
    from irgrid.core.options import declared as declared_options

    declared = declared_options(option_types)
    for name, value in options.items():
        odd = _non_finite(value)
        if odd is not None:  # NaN compares false with every bound, so the range check alone let it through
            kind = declared[name].kind if name in declared else float
            example = OPTION_EXAMPLES.get(name, 10 if kind is int else 1.0)
            return (f"option {name}: {odd} is not a finite number (YAML's .nan / .inf, or float('nan') / "
                    f"float('inf') in Python); give a {'whole number' if kind is int else 'number'} such as "
                    f"{example}")
        option = declared.get(name)
        if option is None or option.kind is None or (value is None and option.nullable):
            continue
        problem = _option_problem(option, value)
        if problem:
            return f"option {name}: {problem} ({option.description})" if option.description else \
                f"option {name}: {problem}"
    return None


def _option_problem(option: Any, value: Any) -> str | None:
    kind = option.kind
    if kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        want = "a whole number"
    elif kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        want = "a number"
    elif kind in (tuple, list):
        ok, want = isinstance(value, (tuple, list)), "a list"
    elif kind is dict:
        ok, want = isinstance(value, Mapping), "a mapping"
    else:
        ok, want = isinstance(value, kind), f"a {option.type_text().split(' ')[0]}"
    if not ok:
        return f"expected {want}, got {value!r}"
    if option.choices and value not in option.choices:
        from irgrid.util.registry import did_you_mean

        hint = did_you_mean(str(value), [str(c) for c in option.choices]) if isinstance(value, str) else ""
        return f"{value!r} is not one of {list(option.choices)}.{hint}".rstrip(".") + "."
    low, high = option.low, option.high
    if kind in (int, float) and ((low is not None and value < low) or (high is not None and value > high)):
        return f"{value!r} is outside [{low if low is not None else '-inf'}, {high if high is not None else 'inf'}]"
    return None


def _non_finite(value: Any) -> float | None:
    """The first NaN or infinity in an option value (a number, or one inside a list or mapping), else None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else value
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        for v in value:
            odd = _non_finite(v)
            if odd is not None:
                return odd
    return None


def _without(per_dataset: Mapping[str, Mapping[str, Any]], options: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per-dataset values minus the options just set: an option given explicitly holds on every dataset."""
    out = {ds: {k: v for k, v in values.items() if k not in options} for ds, values in per_dataset.items()}
    return {ds: values for ds, values in out.items() if values}


def _model_from_option(value: Any, current: ModelRef, entry: str, role: str) -> ModelRef:
    """'org/name' or 'org/name@revision' replaces the checkpoint of a role (the architecture hint is kept)."""
    if isinstance(value, ModelRef):
        return value
    if not isinstance(value, str) or "/" not in value:
        raise EntryError(f"retriever {entry!r}: model role {role!r} takes 'org/name[@revision]', got {value!r}")
    model_id, _, revision = value.partition("@")
    return dataclasses.replace(current, id=model_id, revision=revision or None)


def _load_entries() -> None:
    from irgrid.core import entries

    entries.load()


# Names a PyTerrier user types for what one entry here implements (not registered: a name keys caches and runs;
# the error names the entry to write instead). The paper's names (`paper_name`) and other cases are found too.
ALIASES: dict[str, tuple[str, str]] = {
    "doc2query": ("doct5query", "documents expanded by doc2query/msmarco-t5-base-v1 questions, then indexed for "
                                "BM25: PyTerrier's `Doc2Query(...) >> indexer` is this one entry, so "
                                "'doc2query >> BM25' is written 'doct5query'"),
    "doc2query-t5": ("doct5query", "docT5query (doc2query with T5)"),
    "bm25-lucene": ("bm25", "Lucene BM25, the paper's"),
    "terrier-bm25": ("bm25", "Terrier does not run offline here; Lucene BM25 (the paper's) or PISA's 'bm25-pisa'"),
}


def _alias_hint(name: str, known: list[str]) -> str | None:
    """'It is the entry X here (why)' for an alias, another case of a name, or the paper's name of an entry."""
    key = name.strip().lower()
    if key in ALIASES:
        target, why = ALIASES[key]
        return f"It is the entry {target!r} here: {why}."
    same = [k for k in known if k.lower() == key]
    if same:
        return f"Names are lower case: write {same[0]!r}."
    paper = [r.name for r in RETRIEVERS if (r.paper_name or "").lower() == key]
    if paper:
        return f"{name!r} is the paper's name of the entry {paper[0]!r}: write {paper[0]!r}."
    return None


RETRIEVERS: Registry[Retriever] = Registry("retriever", populate=_load_entries, hint=_alias_hint)


def register(entry: Retriever) -> Retriever:
    return RETRIEVERS.register(entry.name, entry)


def register_lazy(name: str, make: Callable[[], Retriever]) -> None:
    """Register an entry built on first lookup: for entries that wrap another entry by name (HyDE over a dense
    entry), which then resolves after every entry module is imported, whatever their import order."""
    RETRIEVERS.register_lazy(name, make)


def get(name: str, tiny: bool | None = None) -> Retriever:
    """A registered entry; with `tiny` (default: tiny-model mode, `irgrid.util.settings.tiny_models()`, read
    here and nowhere else) its checkpoints are tiny stand-ins, which its keys then say."""
    from irgrid.util import settings

    entry = RETRIEVERS.get(name)
    return entry.with_tiny_models() if (settings.tiny_models() if tiny is None else tiny) else entry
