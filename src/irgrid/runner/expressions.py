"""Pipelines as expressions in experiment files: `bm25 % 100 >> all-minilm-l6-v2`, `rrf(bm25, splade-tiny, k=60)`,
`0.7 * bm25 + 0.3 * all-minilm-l6-v2`, cached stage by stage like any retriever.

What is ours and why (everything else is PyTerrier's, pyterrier-alpha's and pyterrier-dr's):

- the parser (irgrid.runner.grammar): a restricted grammar over Python's `ast` (never `eval`), one clear message
  per kind of mistake;
- stage-wise caching: every sub-expression in first-stage position that names an entry (or another named
  pipeline) is a grid cell of its own, computed by the grid's `run_cell` (same cache, locks, kill safety) and
  read back from its stored run (irgrid.runner.stages); a cut-off of it cuts the stored run. An expression's cache
  key hashes its operator tree with its parts' configurations, so a changed part changes the key, and two
  expressions that share a first stage share its stored run;
- re-ranking position: an entry on the right of `>>` scores the candidates it receives instead of retrieving,
  through the scorer the entry declares (irgrid.runner.scoring; the dense and late-interaction scorers are
  irgrid.dense.scorers, the re-rankers' irgrid.cross_encoders). The same scorers are the entries' `.scorer(ds)`
  role in Python (irgrid.runner.roles).

This module resolves an expression's names into an `Expression` cell, checks what may retrieve and what may
re-rank, and compiles the tree to PyTerrier. Operators (as in PyTerrier): `>>` re-rank, `% N` cut-off, `N *`
weight, `+` normalised linear fusion, `|` / `&` union / intersection of candidates, `rrf(...)` reciprocal rank
fusion. `+` normalises each term (per-query min-max) before its weight applies, unlike PyTerrier's raw
`Sum`: scores of a sparse and a dense retriever are on unrelated scales, so a raw sum is rarely what is meant.
A pipeline composed in Python is a cell of its own kind: irgrid.runner.python_pipeline.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from irgrid.core.gridcell import GridCell, check_cell_name
from irgrid.runner.grammar import ExpressionError, Op, Ref, parse, refs
from irgrid.runner.scoring import ensure_scorers, entry_scorer, rerank_only, scorer_factory
from irgrid.runner.stages import CachedRun, Composed, MinMax
from irgrid.util.hashing import config_hash
from irgrid.util.registry import UnknownNameError

if TYPE_CHECKING:
    from irgrid.data.datasets import Dataset
    from irgrid.store import Store

FORMAT = 1  # bump when compiled expressions produce other results for the same tree


@dataclass(frozen=True, eq=False)
class Expression:
    """A named pipeline expression: a grid cell (`GridCell`) of its own, built from its parts' cells. It holds its
    parts (composition), it is not an entry: no options, profiles or index of its own."""

    name: str
    source: str  # the expression's text
    tree: Ref | Op
    # every name the tree uses -> its entry or pipeline (tiny-model mode, profiles and options are the parts' own)
    parts: Mapping[str, GridCell] = field(default_factory=dict)

    family = "pipeline"  # irgrid.core.retrievers.Family.PIPELINE
    architecture = "expression"
    index = None  # builds no index itself: its parts' cells do
    profile = None  # its parts carry theirs
    paper_name = None

    def __post_init__(self) -> None:
        check_cell_name(self.name)

    @property
    def reference(self) -> str:
        return self.source

    @property
    def models(self) -> Mapping[str, Any]:
        return {}  # its parts' checkpoints run in their own cells (all_models lists them)

    def config(self) -> dict[str, Any]:
        return {"expression": _tree_config(self.tree, self.parts, "first"), "format": FORMAT}

    def key(self) -> str:
        return config_hash(self.config())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Expression) and (self.name, self.config()) == (other.name, other.config())

    def __hash__(self) -> int:
        return hash((self.name, self.key()))

    def all_models(self) -> dict[str, Any]:
        out = {}
        for name, part in self.parts.items():
            out.update({f"{name}:{role}": ref for role, ref in part.all_models().items()})
        return out

    def depth(self) -> int | None:
        return _depth(self.tree, self.parts)

    def for_dataset(self, dataset: Any) -> Expression:
        """Its parts as they run on `dataset` (their profiles' per-dataset values), so its key follows them;
        itself when no part has any (keys unchanged)."""
        parts = {name: part.for_dataset(dataset) for name, part in self.parts.items()}
        if all(parts[name] is part for name, part in self.parts.items()):
            return self
        return dataclasses.replace(self, parts=parts)

    def build(self, dataset: Dataset, store: Store, model_map: Mapping[str, str] | None = None,
              live: bool = False) -> Any:
        """GridCell: the runnable pipeline (`compose`)."""
        return self.compose(dataset, store, model_map, live)

    def compose(self, dataset: Dataset, store: Store, model_map: Mapping[str, str] | None = None,
                live: bool = False) -> Any:
        """The runnable pipeline on a dataset: first stages read their cells' stored runs (computed if missing);
        `live` (the latency pass) runs them as retrievers instead, so the whole expression is timed as run."""
        parts: list[Any] = []
        inner = _compile(self.tree, self.parts, "first", dataset, store, dict(model_map or {}), parts, live)
        return Composed(inner, parts, self)


def _depth(tree: Ref | Op, parts: Mapping[str, GridCell]) -> int | None:
    """Most results per query: a cut-off's k, a cascade its candidates', fusions the union's (rrf: num_results)."""
    if isinstance(tree, Ref):
        return parts[tree.name].depth()
    depths = [_depth(p, parts) for p in tree.parts]
    args = dict(tree.args)
    if tree.op == "%":
        return int(args["k"]) if depths[0] is None else min(int(args["k"]), depths[0])
    if tree.op == "rrf":
        known = None if None in depths else sum(depths)  # type: ignore[arg-type]
        return int(args["num_results"]) if known is None else min(int(args["num_results"]), known)
    if tree.op in (">>", "*"):
        return depths[0]
    if None in depths:
        return None
    return min(depths) if tree.op == "&" else sum(depths)  # type: ignore[arg-type]


def components(retriever: GridCell) -> dict[str, str]:
    """The registry entries (or `as:` variants) a retriever is built from, with their families: itself for an
    entry, the leaves of its tree for a pipeline (nested pipelines opened). Fusion suggestions compare these, so
    a cascade ending in MiniLM and MiniLM itself share the dense family."""
    if not isinstance(retriever, Expression):
        return {retriever.name: retriever.family}
    out: dict[str, str] = {}
    for part in retriever.parts.values():
        out.update(components(part))
    return out


def fused(retriever: GridCell) -> list[str] | None:
    """The names a pipeline fuses at its top (rrf(a, b, ...) or a weighted a + b, weights and cut-offs of the
    operands set aside), or None when it is not a fusion of named systems."""
    tree = getattr(retriever, "tree", None)
    if not isinstance(tree, Op) or tree.op not in ("rrf", "+"):
        return None
    terms = _sum_terms(tree) if tree.op == "+" else [(1.0, p) for p in tree.parts]
    names = []
    for _, term in terms:
        while isinstance(term, Op) and term.op in ("*", "%") and len(term.parts) == 1:
            term = term.parts[0]
        if not isinstance(term, Ref):
            return None
        names.append(term.name)
    return names


def fusion_members(retriever: GridCell) -> list[str] | None:
    """The systems a fusion fuses, as their configuration keys (sorted, no repeats), nested fusions opened (a term
    that is itself a fusion, inline or a named pipeline, gives its own members) and weights, cut-offs and rrf's k
    set aside; None when it is not a fusion of named systems. Two fusions with the same members are near-duplicates
    for fusion suggestions (irgrid.report.stored.Grid.fused_pairs), whatever their order, weights or k; keys, not
    names, so an `as:` name of an unchanged entry is the entry."""
    tree = getattr(retriever, "tree", None)
    if not isinstance(retriever, Expression) or not isinstance(tree, Op) or tree.op not in ("rrf", "+"):
        return None
    members = _fusion_members(tree, retriever.parts)
    return sorted(members) if members is not None else None


def _fusion_members(tree: Ref | Op, parts: Mapping[str, GridCell]) -> set[str] | None:
    terms = _sum_terms(tree) if tree.op == "+" else [(1.0, p) for p in tree.parts]  # type: ignore[union-attr]
    out: set[str] = set()
    for _, term in terms:
        while isinstance(term, Op) and term.op in ("*", "%") and len(term.parts) == 1:
            term = term.parts[0]
        if isinstance(term, Op) and term.op in ("rrf", "+"):
            inner = _fusion_members(term, parts)
        elif isinstance(term, Ref):
            inner = fusion_members(parts[term.name])
            inner = set(inner) if inner is not None else {parts[term.name].key()}
        else:
            return None
        if inner is None:
            return None
        out |= inner
    return out


def positions(tree: Ref | Op, mode: str = "first") -> list[tuple[str, str]]:
    """Each name of the tree with its position: 'first' (it retrieves: its stored run is read) or 'rerank' (it
    scores the candidates of the left side of >>), in the order they appear."""
    if isinstance(tree, Ref):
        return [(tree.name, mode)]
    modes = ("first" if mode == "first" else "rerank", "rerank") if tree.op == ">>" else (mode,) * len(tree.parts)
    return [p for t, m in zip(tree.parts, modes) for p in positions(t, m)]


def _tree_config(tree: Ref | Op, parts: Mapping[str, GridCell], mode: str) -> Any:
    """What determines the expression's output: operators, numbers and the parts' full configurations (their
    keys): a first stage is keyed by its run's configuration, a re-ranker by its scorer's."""
    if isinstance(tree, Ref):
        return {"run" if mode == "first" else "scorer": parts[tree.name].config()}
    modes = ("first", "rerank") if tree.op == ">>" else (mode,) * len(tree.parts)
    return {"op": tree.op, "args": [list(a) for a in tree.args],
            "parts": [_tree_config(p, parts, m) for p, m in zip(tree.parts, modes)]}


def compile_items(items: list[tuple[str, str, str]], named: Mapping[str, GridCell],
                  lookup: Callable[[str], GridCell]) -> dict[str, Expression]:
    """Resolve the `pipeline:` items of one experiment file: (name, expression, where) each. Names resolve to
    the file's own items first (`as:` variants with their options and profile, other pipelines), then to the
    registry. Returns name -> Expression; raises ExpressionError naming the item."""
    trees: dict[str, Ref | Op] = {}
    wheres: dict[str, str] = {}
    for name, text, where in items:
        try:
            trees[name] = parse(text)
        except ExpressionError as e:
            raise ExpressionError(f"{where}: pipeline: {e}") from None
        wheres[name] = where
        try:
            check_cell_name(name)
        except ValueError as e:
            raise ExpressionError(f"{where}: as: {e}") from None
    done: dict[str, Expression] = {}

    def resolve(name: str, stack: tuple[str, ...], where: str) -> GridCell:
        if name in trees:
            if name in stack:
                cycle = " -> ".join([*stack[stack.index(name):], name])
                raise ExpressionError(f"{wheres[stack[0]]}: pipeline {stack[0]!r} refers to itself through "
                                      f"{cycle}; a pipeline cannot contain itself")
            if name not in done:
                done[name] = build(name, (*stack, name))
            return done[name]
        if name in named:
            return named[name]
        try:
            return lookup(name)
        except UnknownNameError as e:
            raise ExpressionError(f"{where}: pipeline: {e} (names in a pipeline are registry entries or the "
                                  f"'as:' names of this file's retrievers)") from None

    def build(name: str, stack: tuple[str, ...]) -> Expression:
        where = wheres[name]
        parts = {n: resolve(n, stack, where) for n in refs(trees[name])}
        return make_expression(name, _text(items, name), trees[name], parts, where)

    for name, _, _ in items:
        resolve(name, (), wheres[name])
    return done


def _text(items: list[tuple[str, str, str]], name: str) -> str:
    return next(t for n, t, _ in items if n == name)


def make_expression(name: str, text: str, tree: Ref | Op, parts: Mapping[str, GridCell], where: str) -> Expression:
    """Check positions (what may retrieve, what may re-rank) and wrap the tree as a grid cell."""
    ensure_scorers()
    _check_positions(tree, parts, "first", where, text)
    return Expression(name=name, source=text, tree=tree, parts=dict(parts))


def _check_positions(tree: Ref | Op, parts: Mapping[str, GridCell], mode: str, where: str, text: str,
                     candidates_ok: bool = False) -> None:
    """`candidates_ok`: the node feeds the left of >>, where a set without scores (| or &) is fine."""
    if isinstance(tree, Op) and tree.op in ("|", "&") and not candidates_ok:
        raise ExpressionError(f"{where}: pipeline {text!r}: {tree.op} gives a candidate set without scores; "
                              f"re-rank it, e.g. '(bm25 {tree.op} splade-tiny) >> all-minilm-l6-v2'")
    if isinstance(tree, Ref):
        entry = parts[tree.name]
        if mode == "first" and rerank_only(entry):
            raise ExpressionError(f"{where}: pipeline {text!r}: {tree.name!r} is a re-ranker: it scores a "
                                  f"candidate set, so it goes after >>, e.g. 'bm25 % 100 >> {tree.name}'")
        if mode == "rerank" and scorer_factory(entry) is None:
            kind = "a pipeline" if isinstance(entry, Expression) else f"a {entry.family} entry"
            raise ExpressionError(f"{where}: pipeline {text!r}: {tree.name!r} ({kind}) cannot re-rank the "
                                  f"candidates of the left side of >>; re-rankers are dense bi-encoders, late-"
                                  f"interaction entries, the 'reranker' family and the lexical BM25 entries (see `irgrid list`). Fuse first stages with + or rrf(...)")
        return
    modes = ("first", "rerank") if tree.op == ">>" else (mode,) * len(tree.parts)
    feeds = (True, False) if tree.op == ">>" else (tree.op in ("|", "&"),) * len(tree.parts)
    for p, m, ok in zip(tree.parts, modes, feeds):
        _check_positions(p, parts, m, where, text, ok)


def expression(text: str, name: str = "pipeline", profile: str | None = None,
               named: Mapping[str, Any] | None = None) -> Expression:
    """A pipeline expression over registry entries, as the experiment item `{as: NAME, pipeline: TEXT}` of a file
    without `profile:` resolves it (same entries, same tree, hence the same cache keys). `named`: the file's own
    `as:` names (entries with options, other expressions), each renamed to its name as an item would be."""
    from irgrid.core import retrievers as r_mod
    from irgrid.core.profiles import DEFAULT_PROFILE

    where = f"irgrid.pipeline({text!r})"
    own = {}
    for n, part in (named or {}).items():
        if not isinstance(part, GridCell):
            raise ExpressionError(f"{where}: names[{n!r}] is a {type(part).__name__}; give an entry "
                                  f"(irgrid.retriever(...), with options) or irgrid.pipeline('EXPR', ds)")
        own[n] = dataclasses.replace(part, name=n)
    return compile_items([(name, text, where)], own,
                         lambda n: r_mod.get(n).with_profile(profile or DEFAULT_PROFILE))[name]


# -- compilation to PyTerrier ------------------------------------------------------------------------------------


def _compile(tree: Ref | Op, parts: Mapping[str, GridCell], mode: str, dataset: Dataset, store: Store,
             model_map: dict[str, str], accounted: list[Any], live: bool = False) -> Any:
    def sub(t: Ref | Op, m: str = mode) -> Any:
        return _compile(t, parts, m, dataset, store, model_map, accounted, live)

    if isinstance(tree, Ref):
        entry = parts[tree.name]
        if mode == "first" and live:
            from irgrid.runner.cell import build_pipeline

            stage = build_pipeline(entry, dataset, store, model_map)
        elif mode == "first":
            stage = CachedRun(entry, dataset, store, model_map)
        else:
            stage = entry_scorer(entry, dataset, store, model_map)
        accounted.append(stage)
        return stage
    args = dict(tree.args)
    if tree.op == ">>":
        return sub(tree.parts[0], "first" if mode == "first" else "rerank") >> sub(tree.parts[1], "rerank")
    if tree.op == "%":
        return sub(tree.parts[0]) % int(args["k"])
    if tree.op == "*":
        return sub(tree.parts[0]) * float(args["weight"])
    if tree.op == "+":
        terms = []
        for weight, t in _sum_terms(tree):
            term = sub(t) >> MinMax()
            terms.append(term if weight == 1.0 else term * weight)
        return functools.reduce(operator.add, terms)
    if tree.op == "|":
        return sub(tree.parts[0]) | sub(tree.parts[1])
    if tree.op == "&":
        return sub(tree.parts[0]) & sub(tree.parts[1])
    if tree.op == "rrf":
        from pyterrier_alpha import RRFusion

        return RRFusion(*[sub(p) for p in tree.parts], k=int(args["k"]), num_results=int(args["num_results"]))
    raise AssertionError(f"unchecked operator {tree.op!r}")


def _sum_terms(tree: Ref | Op) -> list[tuple[float, Ref | Op]]:
    """a + b + c with weights: a flat list of (weight, term), so nested sums do not normalise twice."""
    if isinstance(tree, Op) and tree.op == "+":
        return [t for p in tree.parts for t in _sum_terms(p)]
    if isinstance(tree, Op) and tree.op == "*":
        return [(float(dict(tree.args)["weight"]), tree.parts[0])]
    return [(1.0, tree)]
