"""irgrid: declarative PyTerrier experiment grids for document retrieval research.

Heavy libraries (torch, pyserini, PISA) are imported only when a retriever is built, so `import irgrid` and
`irgrid list` stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from irgrid.util import settings as _settings
from irgrid.util.errors import Error  # the base of every user-facing error (light: no side effects)

# ir_datasets fixes its home when first imported, by whichever code imports it (irgrid, pyterrier-dr,
# pyterrier-rag, a user's script): the one place that points it at irgrid's home. No variable changes here.
_settings.install_irds_home_hook()

__version__ = "0.1.0"


if TYPE_CHECKING:
    from irgrid.core.gridcell import GridCell
    from irgrid.core.retrievers import Retriever
    from irgrid.grid import GridResult


def run(experiment: Any, out: Any = None, *, extra: dict[str, Any] | None = None,
        keys: dict[str, str] | None = None) -> GridResult:
    """Run an experiment file (or spec, or dict); returns a `GridResult`: `.results` (the long-form DataFrame, one
    row per dataset, system, measure; also `.to_frame()`), `.perquery`, `.failures` and `.out`.

    `extra` adds pipelines composed in Python as cells of the grid (same cache, runs, tests and reports), each
    under the cache key given in `keys` (e.g. `extra={"mine": pipeline}, keys={"mine": "my-v1"}`); a pipeline
    may also be a function dataset name -> transformer."""
    from irgrid.grid import run as _run
    from irgrid.util import settings

    if extra or keys:
        from irgrid.runner.experiment import with_extra

        experiment = with_extra(experiment, extra, keys)
    with settings.using(settings.current()):  # read and checked once: the whole grid runs under the same settings
        return _run(experiment, out)


def retriever(name: str) -> Retriever:
    """A registered entry by name (raises with "did you mean" for unknown names)."""
    from irgrid.core.retrievers import get

    return get(name)


def pipeline(entry: str | GridCell, dataset: Any = None, names: dict[str, Any] | None = None, **kwargs: Any) -> Any:
    """The one builder for Python: a PyTerrier transformer for a dataset, for scripts and notebooks. A registry
    entry's first-stage retriever (its index built or reused from the cache; `irgrid.retriever(name).pipeline(dataset)`
    is the same call, through the same function: irgrid.runner.build.python_pipeline), or a
    pipeline expression of the experiment-file grammar, e.g. `irgrid.pipeline("bm25 % 100 >> all-minilm-l6-v2",
    "beir/scifact/test")`: the very transformer the item `{as: x, pipeline: "..."}` runs (same stages, cache keys
    and latency accounting; in `irgrid.run(..., extra={"x": it})` it is that item's cell, no key needed).
    `names` gives an expression the file's own `as:` names: `names={"casc": irgrid.pipeline("bm25 % 100 >> ...",
    ds), "k12": irgrid.retriever("bm25").with_options(k1=1.2)}`, then `irgrid.pipeline("casc % 10", ds, names)`."""
    from irgrid.runner.build import python_pipeline

    if isinstance(entry, str):
        from irgrid.runner import expressions, grammar
        from irgrid.util.registry import UnknownNameError

        named = {n: getattr(p, "expression", p) for n, p in (names or {}).items()}
        try:
            entry = named[entry] if entry in named else retriever(entry)
        except UnknownNameError:
            tree = grammar.parse(entry)
            if isinstance(tree, grammar.Ref):
                raise
            entry = expressions.expression(entry, named=named)
    return python_pipeline(entry, dataset, **kwargs)


def dataset(item: str | dict[str, Any], base: Any = ".") -> Any:
    """A dataset as an experiment file's `datasets:` / `collections:` item gives it: a name (`beir/scifact/test`,
    `vaswani@q20s1` for a query sample), `{name, queries, seed}`, or a bring-your-own collection
    `{name, docs, topics, qrels, ...}` (paths relative to `base`). Pass it wherever a dataset name goes."""
    from pathlib import Path

    from irgrid.data import byo
    from irgrid.runner.cell import dataset_of
    from irgrid.runner.experiment import ExperimentError, dataset_item

    if isinstance(item, dict) and "docs" in item:
        try:
            return byo.build(item, Path(base).resolve(), "irgrid.dataset()")
        except byo.CollectionError as e:
            raise ExperimentError(str(e)) from None
    if isinstance(item, dict):
        return dataset_item(item, "irgrid.dataset()", lambda name, where: dataset_of(name), "<python>")
    return dataset_of(item)


def __getattr__(name: str) -> Any:
    """Public transformers and scorer registry, imported on first use (`import irgrid` stays light):
    `PerQueryMinMax` (the normalisation of the grammar's `+`), `rrf` (pyterrier-alpha's RRFusion, the grammar's
    `rrf(...)`), `register_scorer` / `SCORERS` (query builder -> scorer factory: what of your own can sit after
    `>>`; entries declare theirs with `make_scorer`), `can_score` (whether an entry can)."""
    if name == "PerQueryMinMax":
        from irgrid.runner.transforms import PerQueryMinMax

        return PerQueryMinMax
    if name == "rrf":
        return _rrf
    if name in ("register_scorer", "SCORERS", "can_score"):
        from irgrid.runner import scoring

        scoring.ensure_scorers()
        return {"register_scorer": scoring.register_scorer, "SCORERS": scoring.SCORERS,
                "can_score": scoring.can_score}[name]
    raise AttributeError(f"module 'irgrid' has no attribute {name!r}")


def _rrf(*pipelines: Any, k: int = 60, num_results: int = 1000) -> Any:
    """Reciprocal rank fusion of first stages, as the grammar's `rrf(a, b, k=60, num_results=1000)`."""
    from pyterrier_alpha import RRFusion

    return RRFusion(*pipelines, k=k, num_results=num_results)


def list_retrievers() -> list[Retriever]:
    from irgrid.core.retrievers import RETRIEVERS

    return list(RETRIEVERS)


__all__ = ["run", "retriever", "pipeline", "dataset", "list_retrievers", "PerQueryMinMax", "rrf", "register_scorer",
           "SCORERS", "can_score", "Error", "__version__"]
