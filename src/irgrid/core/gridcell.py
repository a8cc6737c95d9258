"""What a grid cell runs: the one protocol the engine (store, planning, cluster graph, grid, runner, reports) types
against. Registry entries (`irgrid.core.retrievers.Retriever`, pure data) and pipeline expressions
(`irgrid.runner.expressions.Expression`, built from other cells' stored runs) implement it separately, so the
engine never asks which kind of cell it holds.

PyTerrier has no such notion (a transformer has no identity, no cache key, no checkpoints to resolve): this is
the part of a grid cell that PyTerrier's `Transformer` is not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from irgrid.util.errors import Error

if TYPE_CHECKING:
    from irgrid.core.modelref import ModelRef

_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789-.")


@runtime_checkable
class GridCell(Protocol):
    """A named, keyed, runnable system of a grid: what one (system, dataset) cell computes.

    `dataset` and `store` below are `irgrid.data.datasets.Dataset` and `irgrid.store.Store` (layers above this
    one: named, not imported)."""

    @property
    def name(self) -> str:
        """Names its runs and result rows; a file name, so kebab-case (`check_cell_name`)."""

    @property
    def family(self) -> str:
        """A `irgrid.core.retrievers.Family` value ('pipeline' for expressions)."""

    @property
    def architecture(self) -> str: ...

    @property
    def reference(self) -> str | None:
        """Where its configuration comes from (an entry's source, an expression's text)."""

    @property
    def profile(self) -> str | None:
        """The profile applied (irgrid.core.profiles), None when none was."""

    @property
    def paper_name(self) -> str | None: ...

    @property
    def index(self) -> Any:
        """The document side it builds (an `irgrid.core.retrievers.IndexRecipe`, shared by cells with equal
        recipes); None: it indexes nothing itself."""

    @property
    def models(self) -> Mapping[str, ModelRef]:
        """Its own query-side checkpoints (the cost model's per-query work; a pipeline's parts are cells of their
        own: none)."""

    def config(self) -> dict[str, Any]:
        """Everything that determines its output; `key()` hashes it and keys its stored runs."""

    def key(self) -> str: ...

    def all_models(self) -> dict[str, ModelRef]:
        """Every checkpoint it loads, by role (resolved and checked before anything runs)."""

    def depth(self) -> int | None:
        """The most results it returns per query; None when it does not say."""

    def for_dataset(self, dataset: Any) -> GridCell:
        """This cell as it runs on `dataset` (a profile's per-dataset values applied: its key follows them)."""

    def build(self, dataset: Any, store: Any, model_map: Mapping[str, str] | None = None, live: bool = False) -> Any:
        """The PyTerrier transformer it runs on `dataset`, artifacts built or reused in `store`. The Python door is
        `irgrid.pipeline(cell, dataset)` (irgrid.runner.cell.build_pipeline), which calls this. `live` (the latency
        pass): every stage runs as it would uncached, none reads a stored run (cells that read none ignore it)."""


class CellNameError(Error, ValueError):
    """A grid cell's name that cannot name its files (an entry's, an `as:` name, an extra pipeline's)."""


def check_cell_name(name: str, what: str = "retriever") -> str:
    """A cell's name as given, or CellNameError: it becomes a file name."""
    if not name or set(name) - _NAME_CHARS or name[0] in "-.":
        raise CellNameError(f"{what} name {name!r} must be kebab-case (a-z, 0-9, '-', '.'): it becomes a file name")
    return name
