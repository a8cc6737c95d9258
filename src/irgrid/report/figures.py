"""The paper's figures from a stored grid: effectiveness against query latency (Figure 1) and the Jaccard
overlap of hard queries (Figure 2/A.1), as PNG."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from irgrid.report.analyses import _first_measure_values
from irgrid.report.stored import Grid

FAMILY_COLOURS = {"sparse": "#1f77b4", "expansion": "#2ca02c", "dense": "#d62728", "late-interaction": "#9467bd"}


def figure1(grid: Grid, path: Path) -> Path:
    """Effectiveness (each dataset's headline measure) vs mean query latency (ms/query, log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    datasets = grid.datasets
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.2 * len(datasets), 3.6), squeeze=False)
    families = grid.families()
    first = _first_measure_values(grid)
    lat = grid.results[grid.results["measure"] == "ms/query"].set_index(["dataset", "system"])["value"]
    for ax, dataset in zip(axes[0], datasets):
        block = first[first["dataset"] == dataset]
        for _, r in block.iterrows():
            x = float(lat.get((dataset, r["system"]), np.nan))
            fam = families.get(r["system"], "?")
            ax.scatter([x], [r["value"]], color=FAMILY_COLOURS.get(fam, "grey"), s=36, zorder=3)
            ax.annotate(r["system"], (x, r["value"]), textcoords="offset points", xytext=(4, 4), fontsize=7)
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.margins(x=0.25, y=0.15)
        ax.set_xlabel("query latency (ms/query, log scale)")
        ax.set_ylabel(block["measure"].iloc[0] if len(block) else "")
        ax.set_title(dataset, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    handles = [plt.Line2D([], [], marker="o", ls="", color=c, label=f) for f, c in FAMILY_COLOURS.items()
               if f in set(families.values())]
    if handles:
        fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.08 if handles else 0, 1, 1))
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path


def jaccard_figure(matrix: pd.DataFrame, title: str, path: Path) -> Path:
    """A Figure 2 style heatmap of pairwise Jaccard similarity."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(matrix)
    fig, ax = plt.subplots(figsize=(max(4.5, 1.6 + 0.6 * n), max(3.8, 1.4 + 0.55 * n)))
    im = ax.imshow(matrix.to_numpy(dtype=float), vmin=0, vmax=1, cmap="viridis")
    ax.set_xticks(range(n), matrix.columns, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(n), matrix.index, fontsize=8)
    for i in range(n):
        for j in range(n):
            v = float(matrix.iat[i, j])
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="white" if v < 0.6 else "black")
    ax.set_title(title, fontsize=9)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="Jaccard")
    fig.tight_layout()
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return path
