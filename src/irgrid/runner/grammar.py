"""The grammar of pipeline expressions (`bm25 % 100 >> all-minilm-l6-v2`, `rrf(bm25, splade-tiny, k=60)`,
`0.7 * bm25 + 0.3 * all-minilm-l6-v2`): text -> a checked tree of `Ref` and `Op`, names not yet resolved.

A restricted grammar over Python's `ast` (never `eval`). Entry names are kebab-case (`all-minilm-l6-v2`), which
Python would read as subtractions, so names are first swapped for placeholders; the tree is then checked node by
node against the grammar below, with one clear message per kind of mistake. What the tree means (cells, stages,
caching) is irgrid.runner.expressions.

    expr := NAME                      a registry entry, or another item of the experiment file (its `as:` name)
          | expr >> expr              the right side re-ranks the left side's candidates
          | expr % INT                rank cut-off
          | NUMBER * expr | expr * NUMBER   weight (in a sum: the weight of that term)
          | expr + expr               normalised linear fusion: per-query min-max scores, weighted, summed
          | expr | expr               set union (candidates, no scores), expr & expr: intersection
          | rrf(expr, expr, ..., k=60, num_results=1000)   reciprocal rank fusion (pyterrier-alpha RRFusion)
          | (expr)
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from irgrid.util.errors import Error
from irgrid.util.registry import did_you_mean

OPERATORS = {ast.RShift: ">>", ast.Mod: "%", ast.Add: "+", ast.Mult: "*", ast.BitOr: "|", ast.BitAnd: "&"}
_NAME = re.compile(r"(?<![\w.])([A-Za-z_][A-Za-z0-9_]*(?:[.\-][A-Za-z0-9_]+)*)")
_PLACEHOLDER = "_irgrid_ref_"


class ExpressionError(Error, ValueError):
    """A pipeline expression that cannot be parsed, resolved or typed; the message says where and how to fix."""




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
        if op is None and isinstance(node.op, ast.Pow):
            raise ExpressionError(
                f"in {text!r}: '**' (PyTerrier's feature union) gives learning-to-rank features, not a ranking a "
                f"grid can evaluate; compose it in Python with a learned model after it, e.g. `cands >> "
                f"(irgrid.retriever('bm25-pisa').scorer(ds) ** irgrid.retriever('all-minilm-l6-v2').scorer(ds)) "
                f">> model` (docs/composing.md, 'Features for learning to rank')")
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
