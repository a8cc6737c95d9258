"""irgrid: declarative PyTerrier experiment grids for document retrieval research.

Heavy libraries (torch, pyserini, PISA) are imported only when a retriever is built, so `import irgrid` and
`irgrid list` stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from irgrid.core.errors import Error  # the base of every user-facing error (light: no side effects)

__version__ = "0.1.0"


if TYPE_CHECKING:
    import pandas as pd

    from irgrid.core.retrievers import Retriever


def run(experiment: Any, out: Any = None, *, extra: dict[str, Any] | None = None,
        keys: dict[str, str] | None = None) -> pd.DataFrame:
    """Run an experiment file (or spec, or dict); returns the long-form results DataFrame.

    `extra` adds pipelines composed in Python as cells of the grid (same cache, runs, tests and reports), each
    under the cache key given in `keys` (e.g. `extra={"mine": pipeline}, keys={"mine": "my-v1"}`); a pipeline
    may also be a function dataset name -> transformer."""
    from irgrid.core import settings
    from irgrid.grid import run as _run

    settings.use_irds_home()  # on first use, never at import (importing irgrid changes no environment variable)
    if extra or keys:
        from irgrid.runner.experiment import with_extra

        experiment = with_extra(experiment, extra, keys)
    return _run(experiment, out)


def retriever(name: str) -> Retriever:
    """A registered entry by name (raises with "did you mean" for unknown names)."""
    import irgrid.runner.cell  # noqa: F401  (lets the entry's `.pipeline()` build through the runner)
    from irgrid.core.retrievers import get

    return get(name)


def pipeline(entry: str | Retriever, dataset: Any = None, **kwargs: Any) -> Any:
    """A retriever built for a dataset (its index built or reused from the cache) as a PyTerrier transformer:
    for scripts and notebooks. `irgrid.retriever(name).pipeline(dataset)` is the same call."""
    from irgrid.core import settings
    from irgrid.runner.cell import build_pipeline

    settings.use_irds_home()
    return build_pipeline(retriever(entry) if isinstance(entry, str) else entry, dataset, **kwargs)


def list_retrievers() -> list[Retriever]:
    import irgrid.runner.cell  # noqa: F401  (lets the entries' `.pipeline()` build through the runner)
    from irgrid.core.retrievers import RETRIEVERS

    return list(RETRIEVERS)


__all__ = ["run", "retriever", "pipeline", "list_retrievers", "Error", "__version__"]
