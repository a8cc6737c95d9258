"""irgrid: declarative PyTerrier experiment grids for document retrieval research.

Heavy libraries (torch, pyserini, PISA) are imported only when a retriever is built, so `import irgrid` and
`irgrid list` stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"


def _fix_irds_home() -> None:
    """ir_datasets fixes its home when first imported: point it at irgrid's writable home before anything
    (pyterrier, ir_measures, a user script) imports it. Copying a staged home happens later, on first use."""
    import os

    from irgrid import settings

    if "IR_DATASETS_HOME" not in os.environ:
        os.environ["IR_DATASETS_HOME"] = str(settings.irds_home())
        os.environ["IRGRID_IRDS_HOME_DEFAULTED"] = "1"  # ours: `irgrid run --cache` may still move it


_fix_irds_home()

if TYPE_CHECKING:
    import pandas as pd

    from irgrid.retrievers import Retriever


def run(experiment: Any, out: Any = None) -> pd.DataFrame:
    """Run an experiment file (or spec); returns the long-form results DataFrame."""
    from irgrid.grid import run as _run

    return _run(experiment, out)


def retriever(name: str) -> Retriever:
    """A registered entry by name (raises with "did you mean" for unknown names)."""
    from irgrid.retrievers import get

    return get(name)


def list_retrievers() -> list[Retriever]:
    from irgrid.retrievers import RETRIEVERS

    return list(RETRIEVERS)


__all__ = ["run", "retriever", "list_retrievers", "__version__"]
