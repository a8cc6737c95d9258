"""A pipeline composed in Python as a grid cell (`irgrid.run(spec, extra={name: pipeline}, keys={name: key})`):
keyed by its caller's key, since irgrid cannot see inside a Python object."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from irgrid.core.gridcell import GridCell, check_cell_name
from irgrid.runner.expressions import FORMAT, Expression
from irgrid.runner.grammar import ExpressionError
from irgrid.util.hashing import config_hash

if TYPE_CHECKING:
    from irgrid.data.datasets import Dataset
    from irgrid.store import Store


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
