"""Pipelines as expressions in experiment files: `bm25 % 100 >> all-minilm-l6-v2`, `rrf(bm25, splade-tiny, k=60)`,
`0.7 * bm25 + 0.3 * all-minilm-l6-v2`, cached stage by stage like any retriever.

What is ours and why (everything else is PyTerrier's, pyterrier-alpha's and pyterrier-dr's):

- the parser: a restricted grammar over Python's `ast` (never `eval`). Entry names are kebab-case
  (`all-minilm-l6-v2`), which Python would read as subtractions, so names are first swapped for placeholders;
  the tree is then checked node by node against the grammar below, with one clear message per kind of mistake;
- stage-wise caching: every sub-expression in first-stage position that names an entry (or another named
  pipeline) is a grid cell of its own, computed by the grid's `run_cell` (same cache, locks, kill safety) and
  read back from its stored run; a cut-off of it cuts the stored run. An expression's cache key hashes its operator
  tree with its parts' configurations, so a changed part changes the key, and two expressions that share a first
  stage share its stored run;
- re-ranking position: an entry on the right of `>>` scores the candidates it receives instead of retrieving.
  Dense entries do so through a pyterrier-dr `BiEncoder` over irgrid's own encoding engine (the same vectors
  the entry's index holds, documents' texts from the dataset's ir_datasets docstore), late-interaction entries
  by exact MaxSim (`late_scorer`); `reranker` entries (`pipelines/rerankers.py`: cross-encoders, monoT5) only
  re-rank. The same scorers are the entries' `.scorer(ds)` role in Python (irgrid.runner.roles).

Grammar (operators as in PyTerrier):

    expr := NAME                      a registry entry, or another item of the experiment file (its `as:` name)
          | expr >> expr              the right side re-ranks the left side's candidates
          | expr % INT                rank cut-off
          | NUMBER * expr | expr * NUMBER   weight (in a sum: the weight of that term)
          | expr + expr               normalised linear fusion: per-query min-max scores, weighted, summed
          | expr | expr               set union (candidates, no scores), expr & expr: intersection
          | rrf(expr, expr, ..., k=60, num_results=1000)   reciprocal rank fusion (pyterrier-alpha RRFusion)
          | (expr)

`+` normalises each term (per-query min-max) before its weight applies, unlike PyTerrier's raw
`Sum`: scores of a sparse and a dense retriever are on unrelated scales, so a raw sum is rarely what is meant.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from irgrid.core.gridcell import GridCell, check_cell_name
from irgrid.core.retrievers import Retriever
from irgrid.util.errors import Error
from irgrid.util.hashing import config_hash
from irgrid.util.memo import Memo
from irgrid.util.registry import UnknownNameError, did_you_mean

if TYPE_CHECKING:
    import pandas as pd

    from irgrid.data.datasets import Dataset
    from irgrid.store import Store

FORMAT = 1  # bump when compiled expressions produce other results for the same tree
OPERATORS = {ast.RShift: ">>", ast.Mod: "%", ast.Add: "+", ast.Mult: "*", ast.BitOr: "|", ast.BitAnd: "&"}
_NAME = re.compile(r"(?<![\w.])([A-Za-z_][A-Za-z0-9_]*(?:[.\-][A-Za-z0-9_]+)*)")
_PLACEHOLDER = "_irgrid_ref_"


class ExpressionError(Error, ValueError):
    """A pipeline expression that cannot be parsed, resolved or typed; the message says where and how to fix."""


class CandidateError(Error, KeyError):
    """A stage got candidate documents its corpus or index does not hold (a first stage over another corpus)."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


# -- the tree ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    name: str


@dataclass(frozen=True)
class Op:
    op: str  # '>>', '%', '+', '*', '|', '&', 'rrf'
    parts: tuple[Any, ...]  # sub-trees (Ref / Op)
    args: tuple[tuple[str, Any], ...] = ()  # numbers: the cut-off, a weight, rrf's k / num_results


@dataclass(frozen=True)
class Function:
    """A named function of the grammar: its keyword arguments with types and defaults."""

    name: str
    min_parts: int
    kwargs: Mapping[str, tuple[type, Any]]
    example: str


FUNCTIONS = {
    "rrf": Function("rrf", 2, {"k": (int, 60), "num_results": (int, 1000)}, "rrf(bm25, all-minilm-l6-v2, k=60)"),
}


def parse(text: str) -> Ref | Op:
    """The checked tree of an expression (names not yet resolved)."""
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError(f"expected an expression such as 'bm25 % 100 >> all-minilm-l6-v2', got {text!r}")
    names: list[str] = []

    def swap(m: re.Match[str]) -> str:
        rest = text[m.end():].lstrip()
        if rest.startswith("(") or (rest.startswith("=") and not rest.startswith("==")):
            return m.group(0)  # a function name or a keyword argument
        names.append(m.group(1))
        return f"{_PLACEHOLDER}{len(names) - 1}"

    source = _NAME.sub(swap, text)
    if len(names) > MAX_NAMES:  # every later step recurses over the tree: Python's stack ends near 500 terms
        raise ExpressionError(f"{text[:60]!r}...: {len(names)} pipeline names in one expression; at most "
                              f"{MAX_NAMES} (fuse fewer runs, or fuse groups in named expressions)")
    try:
        tree = ast.parse(source.strip(), mode="eval").body
        return _check(tree, text, names)
    except SyntaxError as e:
        shown = repr(text) if len(text) <= 200 else f"{text[:60]!r}..."
        raise ExpressionError(f"{shown} is not a valid expression ({e.msg}); operators are >> % + * | & and "
                              f"functions {', '.join(f.example for f in FUNCTIONS.values())}") from None
    except RecursionError:  # nesting by parentheses or numbers alone
        raise ExpressionError(f"{text[:60]!r}...: nested too deeply to read; write it with fewer levels") from None


MAX_NAMES = 200
MAX_WEIGHT = 1e6  # weights are relative: a million times another term already decides alone


def _number(node: ast.AST) -> float | int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _number(node.operand)
        return None if inner is None else -inner
    return None


def _check(node: ast.AST, text: str, names: list[str]) -> Ref | Op:
    def sub(n: ast.AST) -> Ref | Op:
        return _check(n, text, names)

    def show(n: ast.AST) -> str:
        src = ast.unparse(n)
        return re.sub(rf"{_PLACEHOLDER}(\d+)", lambda m: names[int(m.group(1))], src)

    if isinstance(node, ast.Name) and node.id.startswith(_PLACEHOLDER):
        return Ref(names[int(node.id[len(_PLACEHOLDER):])])
    if isinstance(node, ast.BinOp):
        op = OPERATORS.get(type(node.op))
        if op is None:
            bad = {ast.Sub: "-", ast.Div: "/", ast.FloorDiv: "//", ast.Pow: "**", ast.BitXor: "^",
                   ast.LShift: "<<", ast.MatMult: "@"}.get(type(node.op), type(node.op).__name__)
            raise ExpressionError(f"in {text!r}: operator {bad!r} is not allowed; use >> (re-rank), % (cut-off), "
                                  f"+ (normalised linear fusion), * (weight), | (union), & (intersection) or "
                                  f"rrf(...)")
        left_n, right_n = _number(node.left), _number(node.right)
        if op == "%":
            if right_n is None or not isinstance(right_n, int) or right_n < 1:
                raise ExpressionError(f"in {text!r}: '% {show(node.right)}': a cut-off takes a whole number of "
                                      f"results >= 1, e.g. 'bm25 % 100'")
            return Op("%", (sub(node.left),), (("k", right_n),))
        if op == "*":
            if (left_n is None) == (right_n is None):
                raise ExpressionError(f"in {text!r}: '{show(node)}': * weights one pipeline by a number, e.g. "
                                      f"'0.7 * bm25'; combine two pipelines with + or rrf(...)")
            weight, other = (left_n, node.right) if left_n is not None else (right_n, node.left)
            if not (math.isfinite(weight) and 0 < weight <= MAX_WEIGHT):
                raise ExpressionError(f"in {text!r}: weight {show(node.left if left_n is not None else node.right)}"
                                      f" is outside (0, {MAX_WEIGHT:g}]: fusion weights scale normalised scores, so "
                                      f"they must be positive and finite; leave a pipeline out by removing its term")
            return Op("*", (sub(other),), (("weight", float(weight)),))
        for side in (node.left, node.right):
            if _number(side) is not None:
                raise ExpressionError(f"in {text!r}: '{show(node)}': {op} combines two pipelines, not a number "
                                      f"({show(side)})")
        return Op(op, (sub(node.left), sub(node.right)))
    if isinstance(node, ast.Call):
        fname = node.func.id if isinstance(node.func, ast.Name) else None
        if fname not in FUNCTIONS:
            shown = fname or show(node.func)
            raise ExpressionError(f"in {text!r}: unknown function {shown!r};{did_you_mean(shown, list(FUNCTIONS))} "
                                  f"known: {', '.join(f.example for f in FUNCTIONS.values())}")
        fn = FUNCTIONS[fname]
        if len(node.args) < fn.min_parts:
            raise ExpressionError(f"in {text!r}: {fname}() fuses at least {fn.min_parts} pipelines, got "
                                  f"{len(node.args)}; e.g. {fn.example}")
        parts = []
        for a in node.args:
            if _number(a) is not None or isinstance(a, ast.Constant):
                raise ExpressionError(f"in {text!r}: {fname}() takes pipelines as positional arguments, got "
                                      f"{show(a)}; numbers go in keywords ({', '.join(fn.kwargs)}), e.g. {fn.example}")
            parts.append(sub(a))
        args = dict((k, default) for k, (_, default) in fn.kwargs.items())
        for kw in node.keywords:
            if kw.arg not in fn.kwargs:
                raise ExpressionError(f"in {text!r}: {fname}() has no argument {kw.arg!r}; its arguments: "
                                      f"{', '.join(fn.kwargs)}")
            typ = fn.kwargs[kw.arg][0]
            value = _number(kw.value)
            if value is None or (typ is int and not isinstance(value, int)) or value <= 0:
                raise ExpressionError(f"in {text!r}: {fname}({kw.arg}={show(kw.value)}): {kw.arg} must be a "
                                      f"{'whole ' if typ is int else ''}number > 0")
            args[kw.arg] = typ(value)
        return Op(fname, tuple(parts), tuple(sorted(args.items())))
    if _number(node) is not None:
        raise ExpressionError(f"in {text!r}: {show(node)} is a number where a pipeline is expected")
    if isinstance(node, ast.Name):  # an identifier the name scan did not take: a function without call etc.
        raise ExpressionError(f"in {text!r}: {node.id!r} is not a retriever name here; functions need "
                              f"arguments, e.g. {next(iter(FUNCTIONS.values())).example}")
    raise ExpressionError(f"in {text!r}: '{show(node)}' is not allowed; an expression combines retriever names "
                          f"with >> % + * | & and rrf(...)")


def refs(tree: Ref | Op) -> list[str]:
    if isinstance(tree, Ref):
        return [tree.name]
    return [n for p in tree.parts for n in refs(p)]


# -- resolution: names -> entries, cycles, positions -------------------------------------------------------------

# How an entry scores a given candidate set: its own `make_scorer` (an entry declares it: the re-rankers of
# pipelines/rerankers.py), else the factory registered for its query builder: query builder -> factory(entry,
# resolved models, device, index or None). Dense and late-interaction query builders are registered here
# (dense_scorer, late_scorer); `irgrid.register_scorer` lets users' own query builders score too. RERANK_ONLY:
# query builders that cannot be a first stage (an entry says so itself with `rerank_only`).
SCORERS: dict[Callable[..., Any], Callable[..., Any]] = {}
RERANK_ONLY: set[Callable[..., Any]] = set()


def register_scorer(query: Callable[..., Any], scorer: Callable[..., Any], rerank_only: bool = False) -> None:
    """Let the entries built on the query builder `query` re-rank (`>>`, `.scorer(ds)`) through `scorer`; for
    transformers of your own. An entry declared in pipelines/ says it with `Retriever(make_scorer=...)` instead."""
    SCORERS[query] = scorer
    if rerank_only:
        RERANK_ONLY.add(query)


def scorer_factory(cell: GridCell) -> Callable[..., Any] | None:
    """The factory that makes an entry a scorer of given candidates (None: it cannot score, as a pipeline)."""
    if not isinstance(cell, Retriever):
        return None
    ensure_scorers()
    return cell.make_scorer or SCORERS.get(cell.query)


def rerank_only(cell: GridCell) -> bool:
    """Whether the entry only scores given candidates (it cannot be a first stage); False for a pipeline."""
    if not isinstance(cell, Retriever):
        return False
    ensure_scorers()
    return cell.rerank_only or cell.query in RERANK_ONLY


def ensure_scorers() -> None:
    from irgrid.core import entries

    entries.load()
    from irgrid.dense import entry as dense_entry

    SCORERS.setdefault(dense_entry.dense_query, dense_scorer)
    SCORERS.setdefault(dense_entry.late_query, late_scorer)


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
        return _Composed(inner, parts, self)


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
                                  f"interaction entries and the 'reranker' family (see `irgrid list`). Fuse first stages with + or rrf(...)")
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


def extra_pipeline(name: str, pipeline: Any, key: str | None) -> GridCell:
    """A pipeline composed in Python (`irgrid.run(spec, extra={name: pipeline}, keys={name: key})`) as a grid
    cell. irgrid cannot see inside a Python object, so its cache key is the caller's `key`: change it whenever the
    pipeline changes. `pipeline` is a PyTerrier transformer, or a function dataset-name -> transformer for grids
    over several datasets."""
    expression = getattr(pipeline, "expression", None)
    if isinstance(expression, Expression):  # irgrid.pipeline("EXPR", ds): the YAML item's cell, under its own key
        try:
            return dataclasses.replace(expression, name=name)
        except ValueError as e:
            raise ExpressionError(f"extra pipeline: {e}") from None
    if not key or not isinstance(key, str):
        raise ExpressionError(f"extra pipeline {name!r} needs a cache key: keys={{{name!r}: 'my-v1'}} (irgrid cannot "
                              f"hash a Python object; change the key whenever you change the pipeline)")
    import pyterrier as pt

    if not (isinstance(pipeline, pt.Transformer) or callable(pipeline)):
        raise ExpressionError(f"extra pipeline {name!r}: expected a PyTerrier transformer or a function "
                              f"dataset name -> transformer, got {type(pipeline).__name__}")
    try:
        return PythonPipeline(name=name, pipeline=pipeline, cache_key=key)
    except ValueError as e:
        raise ExpressionError(f"extra pipeline: {e}") from None


@dataclass(frozen=True, eq=False)
class PythonPipeline:
    """A pipeline composed in Python as a grid cell (`extra_pipeline`): keyed by its caller's `key`."""

    name: str
    pipeline: Any  # a PyTerrier transformer, or a function dataset name -> transformer
    cache_key: str

    family = "pipeline"
    architecture = "python"
    reference = "composed in Python"
    index = None
    profile = None
    paper_name = None

    def __post_init__(self) -> None:
        check_cell_name(self.name)

    @property
    def models(self) -> Mapping[str, Any]:
        return {}

    def config(self) -> dict[str, Any]:
        return {"python": self.cache_key, "format": FORMAT}

    def key(self) -> str:
        return config_hash(self.config())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PythonPipeline) and (self.name, self.key()) == (other.name, other.key())

    def __hash__(self) -> int:
        return hash((self.name, self.key()))

    def all_models(self) -> dict[str, Any]:
        return {}  # irgrid cannot see inside a Python object

    def depth(self) -> int | None:
        return None

    def for_dataset(self, dataset: Any) -> PythonPipeline:
        return self

    def build(self, dataset: Dataset, store: Store, model_map: Mapping[str, str] | None = None,
              live: bool = False) -> Any:
        import pyterrier as pt

        from irgrid.runner.cell import DatasetName

        p = self.pipeline
        # the function gets the name, which still knows the grid's Dataset (a query sample, a collection): passed to
        # `.pipeline(name)` / `irgrid.pipeline(..., name)` it is that very dataset
        if not isinstance(p, pt.Transformer):
            p = p(DatasetName(dataset))
            if not isinstance(p, pt.Transformer):
                raise ExpressionError(f"extra pipeline {self.name!r}: its function returned {type(p).__name__} "
                                      f"for dataset {dataset.name!r}, not a PyTerrier transformer; it must return "
                                      f"one for every dataset of the grid, e.g. lambda ds: "
                                      f"irgrid.retriever('bm25-pisa').pipeline(ds) % 10")
        if isinstance(getattr(p, "expression", None), Expression):  # irgrid.pipeline("EXPR", name): this grid's cache
            p = p.expression.compose(dataset, store, model_map)
        if dataset.drop_self_matches:  # the dataset's policy applies to every cell (entries get it in build_entry)
            from irgrid.runner.transforms import DropSelfMatches

            p = p >> DropSelfMatches()
        return p


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
            stage = _scorer(entry, dataset, store, model_map)
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


def CachedRun(entry: GridCell, dataset: Dataset, store: Store, model_map: Mapping[str, str]) -> Any:  # noqa: N802
    return _classes()["CachedRun"](entry, dataset, store, model_map)


def MinMax() -> Any:  # noqa: N802
    from irgrid.runner.transforms import PerQueryMinMax

    return PerQueryMinMax()


def DocText(dataset: Dataset, document: Callable[[Mapping[str, str]], str] | None = None) -> Any:  # noqa: N802
    return _classes()["DocText"](dataset, document)


def with_doc_text(scorer: Any, dataset: Dataset) -> Any:
    """A scorer that reads candidates' texts behind the DocText that gives them: the text its index encoded (the
    scorer's `document`, when its entry joins a document's fields its own way), or none when it needs none."""
    if getattr(scorer, "needs_text", True) is False:
        return scorer
    return DocText(dataset, getattr(scorer, "document", None)) >> scorer


def _Composed(inner: Any, parts: list[Any], expression: Expression) -> Any:  # noqa: N802
    return _classes()["Composed"](inner, parts, expression)


@functools.cache
def _classes() -> dict[str, type]:
    """The transformers, defined on first use: `irgrid list` must not import PyTerrier."""
    import pandas as pd
    import pyterrier as pt

    class _CachedRun(pt.Transformer):
        """A first stage read from its grid cell's stored run (computed by the grid's `run_cell` if missing, over
        the dataset's whole query set, so it is the very cell a grid listing this entry has). The stored run's
        measured time per query is declared through `latency_seconds()`, so the expression's latency includes it."""

        def __init__(self, entry: GridCell, dataset: Dataset, store: Store, model_map: Mapping[str, str]):
            self.entry, self.dataset, self.store, self.model_map = entry, dataset, store, model_map
            self._run: pd.DataFrame | None = None
            self._ms = 0.0
            self._served = 0.0

        def _load(self) -> pd.DataFrame:
            if self._run is None:
                from irgrid.runner.cell import run_cell

                cell = run_cell(self.entry, self.dataset, self.dataset.topics(), self.store, dict(self.model_map))
                self._run = cell.res[["qid", "docno", "score", "rank"]].astype({"qid": str, "docno": str})
                self._ms = float(cell.meta.get("ms_per_query") or 0.0)
            return self._run

        def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
            run = self._load()
            topics = inp.drop(columns=[c for c in ("docno", "score", "rank", "text") if c in inp.columns])
            topics = topics.drop_duplicates("qid").astype({"qid": str})
            self._served += self._ms * len(topics) / 1000
            out = topics.merge(run, on="qid", how="inner")
            return out.sort_values(["qid", "rank"], kind="stable").reset_index(drop=True)

        def latency_seconds(self) -> float:
            return self._served

        def __repr__(self) -> str:
            return f"StoredRun({self.entry.name!r}, {self.dataset.name!r})"

    class _DocText(pt.Transformer):
        """Adds each candidate's text: the entry's indexing text, from the ir_datasets docstore. By default the
        dataset's fields joined ("flat", the rule of `Dataset.docs`); `document` (an entry that joins fields its
        own way, e.g. `title [SEP] text`) makes it from the fields as `irgrid.data.doc_fields` yields them. So a
        dense re-ranker sees exactly the text its index encoded."""

        def __init__(self, dataset: Dataset, document: Callable[[Mapping[str, str]], str] | None = None):
            self.dataset, self.document = dataset, document
            self._store: Any = None
            self._all: dict[str, str] | None = None  # collections without a docstore (bring-your-own files)
            self._fields: list[str] = []

        def _texts(self, docnos: list[str]) -> dict[str, str]:
            if self._store is None and self._all is None:
                from irgrid.data.datasets import irds_load

                corpus = self.dataset.corpus_dataset()
                irds = irds_load(corpus)
                names = irds.docs_cls()._fields
                self._fields = [f for f in corpus.fields if f in names]
                try:
                    self._store = irds.docs_store()
                except AttributeError:  # read once into memory: such collections are small files
                    if self.document is None:
                        self._all = {d["docno"]: d["text"] for d in corpus.docs()}
                    else:
                        from irgrid.data.doc_fields import fielded_docs

                        self._all = {d["docno"]: self.document(d) for d in fielded_docs(self.dataset)}
            if self._all is not None:
                return {d: self._all[d] for d in docnos if d in self._all}
            docs = self._store.get_many(docnos)
            if self.document is not None:  # the fields as irgrid.data.doc_fields.fielded_docs gives them
                return {d: self.document({f: getattr(doc, f) or "" for f in self._fields}) for d, doc in docs.items()}
            return {d: " ".join(t for t in (getattr(doc, f) for f in self._fields) if t) for d, doc in docs.items()}

        def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
            if "text" in inp.columns:
                return inp
            if len(inp) == 0:
                return inp.assign(text=pd.Series([], dtype=object))
            text = self._texts(list(dict.fromkeys(inp["docno"].astype(str))))
            missing = sorted(set(inp["docno"].astype(str)) - set(text))
            if missing:
                raise CandidateError(f"{self.dataset.corpus}: {len(missing)} candidate document(s) not in the corpus, "
                                     f"e.g. {missing[:3]}")
            return inp.assign(text=inp["docno"].astype(str).map(text))

        def __repr__(self) -> str:
            return f"DocText({self.dataset.corpus!r})"

    class _Composed(pt.Transformer):
        """The compiled expression; sums the latency its stored stages and memoised scorers declare."""

        def __init__(self, inner: Any, parts: list[Any], expression: Expression):
            self._inner, self._parts, self.expression = inner, parts, expression
            self.source = expression.source

        def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
            if "docno" in inp.columns:  # its first stages serve stored runs per qid: they would retrieve anew
                raise ExpressionError(
                    f"pipeline {self.source!r} is a first stage: it retrieves for each query, and received a result "
                    f"frame (a 'docno' column). To re-rank candidates use a scorer, e.g. "
                    f"irgrid.retriever('all-minilm-l6-v2').scorer(ds), or put the whole cascade in one expression")
            out = self._inner.transform(inp)
            if len(out) == 0:
                return out
            out = out.sort_values(["qid", "score"], ascending=[True, False], kind="stable")
            return pt.model.add_ranks(out.reset_index(drop=True))

        def latency_seconds(self) -> float:
            from irgrid.runner.transforms import latency_accounting

            return latency_accounting(*self._parts)()

        def __repr__(self) -> str:
            return f"Expression({self.source!r}: {self._inner!r})"

    return {"CachedRun": _CachedRun, "DocText": _DocText, "Composed": _Composed}


# -- scorers ------------------------------------------------------------------------------------------------------


def _scorer(entry: Retriever, dataset: Dataset, store: Store, model_map: Mapping[str, str]) -> Any:
    """The entry in re-ranking position. Scorer factories get (entry, resolved models, device, index): `index`
    is the entry's opened index when the cache already holds it for this corpus (never built for this), else
    None; a factory that needs texts gets them from the dataset's docstore (DocText)."""
    from irgrid.runner.cell import open_index, resolve_models
    from irgrid.util import settings

    entry = entry.for_dataset(dataset)  # a profile's per-dataset values (a re-ranker's query length on ArguAna)
    factory = scorer_factory(entry)
    if factory is None:
        raise ExpressionError(_scorer_hint(entry))
    index = open_index(entry, dataset, store, dict(model_map)) \
        if entry.index is not None and store.index_ready(entry.index, dataset) else None
    scorer = factory(entry, resolve_models(entry.all_models(), dict(model_map)), settings.device(), index)
    return with_doc_text(scorer, dataset)


def dense_scorer(entry: Retriever, models: Mapping[str, Any], device: str | None, index: Any = None) -> Any:
    """A dense entry as a re-ranker, scoring the candidates by the dot product of the entry's own vectors:

    - its index is in the cache: the query encoder (irgrid's engine) >> pyterrier-dr's FlexIndex scorer over the
      indexed vectors (exactly the scores of the entry's full run for those documents);
    - otherwise: pyterrier-dr's BiEncoder text scorer over irgrid's engine for this entry (checkpoints, pooling,
      prompts, lengths), encoding only the candidates' texts, no index built. The vectors equal the indexed ones
      up to float rounding of batch composition (tests/integration/test_expressions.py compares the two paths).
    """
    import numpy as np
    import pyterrier_dr

    from irgrid.dense.engine import engine_for, make_query_encoder
    from irgrid.dense.entry import spec_of

    # the entry's own spec as profiled / optioned (not the registered one: a `paper` profile's prompts and lengths
    # would otherwise score differently from the entry's own retrieval)
    spec, d_spec = spec_of(entry, "q"), spec_of(entry, "d")
    batch = int(entry.options["batch_size"])
    q_engine = engine_for(spec, "q", models["query"], device, batch)
    if index is not None:
        scorer = make_query_encoder(q_engine) >> index.scorer()
        return _with_latency(scorer, None, needs_text=False)
    d_engine = engine_for(d_spec, "d", models["doc"], device, batch)

    class EngineBiEncoder(pyterrier_dr.BiEncoder):
        def __init__(self) -> None:
            super().__init__(batch_size=batch, text_field="text")
            self.docs = Memo()

        def encode_queries(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
            return q_engine.encode(list(texts))

        def encode_docs(self, texts: list[str], batch_size: int | None = None) -> np.ndarray:
            vecs = self.docs.get_many(list(texts), lambda todo: list(d_engine.encode(todo)))
            return np.stack(vecs) if vecs else np.zeros((0, 0), dtype=np.float32)

        def latency_seconds(self) -> float:
            return self.docs.served

        def __repr__(self) -> str:
            return f"EngineBiEncoder({spec.name!r})"

    bi = EngineBiEncoder()
    out = _with_latency(bi.text_scorer(), bi)
    out.document = None if d_spec.flat_documents else d_spec.document  # the text its index encoded (DocText)
    return out


def _with_latency(scorer: Any, owner: Any, needs_text: bool = True) -> Any:
    """The scorer, exposing its owner's memo latency (pyterrier-dr's scorer hides the encoder from walkers);
    accepts the empty frames of warm-up calls, and drops query vectors from its output."""
    import pyterrier as pt

    class _Scorer(pt.Transformer):
        def transform(self, inp: Any) -> Any:
            if len(inp) == 0:
                return inp.assign(score=[], rank=[]) if "score" not in inp.columns else inp
            # `docid`: a first stage's own document ids (another index's numbering): never look vectors up by it
            out = scorer.transform(inp.drop(columns=["score", "rank", "docid"], errors="ignore"))
            out = out.drop(columns=[c for c in ("query_vec", "doc_vec", "docid") if c in out.columns])
            return pt.model.add_ranks(out)

        def latency_seconds(self) -> float:
            return owner.latency_seconds() if owner is not None else 0.0

        def __repr__(self) -> str:
            return repr(scorer)

    out = _Scorer()
    out.needs_text = needs_text
    return out


def late_scorer(entry: Retriever, models: Mapping[str, Any], device: str | None, index: Any = None) -> Any:
    """A late-interaction entry (ColBERT) as a re-ranker: exact MaxSim of the query's token vectors against each
    candidate's, read from the entry's index when the cache holds it (the very scores of its full run: its
    retriever scores candidates by exact MaxSim over the same fp16 vectors), otherwise encoded from the
    candidates' texts by the entry's engine (float32: equal up to fp16 rounding). pyterrier-colbert's text scorer
    does the latter but needs colbert-ai, which fails on the pinned transformers (irgrid.dense.entry)."""
    import numpy as np
    import pyterrier as pt

    from irgrid.dense.engine import engine_for, make_query_encoder
    from irgrid.dense.entry import spec_of

    batch = int(entry.options["batch_size"])
    q_engine = engine_for(spec_of(entry, "q"), "q", models["query"], device, batch)
    encode_queries = make_query_encoder(q_engine)
    stored = index.retriever() if index is not None else None
    row_of = {d: i for i, d in enumerate(stored.docnos)} if stored is not None else None
    d_engine = None if stored is not None else engine_for(spec_of(entry, "d"), "d", models["doc"], device, batch)
    memo = Memo()

    def maxsim(q: np.ndarray, docs: list[np.ndarray]) -> np.ndarray:
        return np.array([float((q @ np.asarray(d, dtype=np.float32).T).max(axis=1).sum()) if len(d) else 0.0
                         for d in docs], dtype=np.float32)

    class _LateScorer(pt.Transformer):
        def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
            if len(inp) == 0:
                return inp.assign(score=[], rank=[]) if "score" not in inp.columns else inp
            out = encode_queries.transform(inp.drop(columns=["score", "rank"], errors="ignore")
                                           .reset_index(drop=True))
            scores = np.zeros(len(out), dtype=np.float32)
            for _, rows in out.groupby("qid", sort=False).indices.items():
                q = np.asarray(out["query_embs"].iloc[rows[0]], dtype=np.float32)
                docnos = out["docno"].iloc[rows].astype(str).tolist()
                if stored is not None:
                    missing = [d for d in docnos if d not in row_of]
                    if missing:
                        raise CandidateError(f"{entry.name}: {len(missing)} candidate(s) not in its index, e.g. "
                                             f"{missing[:3]}")
                    scores[rows] = stored.maxsim(q, np.array([row_of[d] for d in docnos], dtype=np.int64))
                else:
                    texts = out["text"].iloc[rows].tolist()
                    scores[rows] = maxsim(q, memo.get_many(texts, lambda todo: list(d_engine.encode(todo))))
            out = out.drop(columns=["query_embs"]).assign(score=scores.astype(float))
            return pt.model.add_ranks(out)

        def latency_seconds(self) -> float:
            return memo.served

        def __repr__(self) -> str:
            return f"LateInteractionScorer({entry.name!r}, {'index' if stored is not None else 'texts'})"

    scorer = _LateScorer()
    scorer.needs_text = stored is None
    return scorer


# -- the scorer role in Python (`irgrid.retriever(name).scorer(ds)`, irgrid.runner.roles) --------------------------


def can_score(entry: GridCell) -> bool:
    """Whether the entry can re-rank a candidate set (a scorer is declared or registered for it)."""
    return scorer_factory(entry) is not None


def _scorer_hint(entry: Retriever) -> str:
    kinds = sorted({f"{e.family}" for e in _registered() if can_score(e)})
    return (f"{entry.name!r} ({entry.family}) cannot score given candidates; the entries that can re-rank are "
            f"of the families {', '.join(kinds)} (`irgrid list`); fuse first stages with "
            f"irgrid.PerQueryMinMax / irgrid.rrf instead")


def _registered() -> list[Retriever]:
    from irgrid.core.retrievers import RETRIEVERS

    return list(RETRIEVERS)


def build_scorer(entry: Retriever, dataset: Any, store: Store | None = None,
                 model_map: Mapping[str, str] | None = None) -> Any:
    """The entry in re-ranking position on a dataset: the very scorer a pipeline expression uses after `>>`
    (the entry's indexed vectors when its index is in the cache, else the candidates' texts)."""
    from irgrid import store as store_mod
    from irgrid.runner.cell import dataset_of
    from irgrid.runner.roles import RoleError, Scorer

    if dataset is None:
        raise RoleError(f"{entry.name}.scorer() needs a dataset, e.g. 'beir/scifact/test'")
    ds = dataset_of(dataset)
    if not can_score(entry):
        raise RoleError(f"{entry.name}.scorer(): {_scorer_hint(entry)}")
    return Scorer(entry, _scorer(entry, ds, store or store_mod.current(), dict(model_map or {})))

