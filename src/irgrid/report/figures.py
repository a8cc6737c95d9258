"""The paper's figures from a stored grid: effectiveness against query latency (Figure 1) and the Jaccard
overlap of hard queries (Figure 2/A.1), as PNG."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from irgrid.report.analyses import first_measure_values
from irgrid.report.stored import Grid
from irgrid.util.hashing import file_sha256

FAMILY_COLOURS = {"sparse": "#1f77b4", "expansion": "#2ca02c", "dense": "#d62728", "late-interaction": "#9467bd",
                  "reranker": "#8c564b", "pipeline": "#ff7f0e"}
OTHER_COLOUR = "#7f7f7f"
LATENCY_FILE = "latency.csv"  # written by `irgrid run --latency` (irgrid.runner.latency)


def latencies(grid: Grid) -> tuple[pd.DataFrame, str]:
    """Per (dataset, system): ms/query with its spread (lo, hi; NaN when there is none) and, in words, where the
    numbers come from: this grid's latency pass (one process, interleaved, warm) or each run's stored ms/query
    (measured when that run was computed, which for a cached run is another time and load)."""
    path = grid.out / LATENCY_FILE
    lat, stale = (pd.read_csv(path) if path.exists() else None), ""
    if lat is not None and ("results_sha256" not in lat
                            or set(lat["results_sha256"].astype(str)) != {file_sha256(grid.out / "results.csv")}):
        lat, stale = None, f"{LATENCY_FILE} here did not time this folder's grid (an earlier one): ignored; "
    if lat is not None:
        frame = lat.rename(columns={"median_ms": "ms", "min_ms": "lo", "max_ms": "hi"})[
            ["dataset", "system", "ms", "lo", "hi"]]
        when = ", ".join(sorted(set(lat["measured_at"].astype(str))))
        rounds = int(lat["rounds"].min()) if len(lat) else 0
        return frame, (f"latency: measured by this grid's latency pass ({when}): one process, warm, {rounds} "
                       f"interleaved rounds; median, bars min-max")
    res = grid.results[grid.results["measure"] == "ms/query"]
    frame = res.rename(columns={"value": "ms"})[["dataset", "system", "ms"]].assign(lo=np.nan, hi=np.nan)
    runs = {(d, name): info for name, e in grid.manifest.get("retrievers", {}).items()
            for d, info in (e.get("runs") or {}).items()}
    cached = sum(bool(runs.get((r.dataset, r.system), {}).get("cached")) for r in frame.itertuples())
    times = sorted(str(t) for t in (runs.get((r.dataset, r.system), {}).get("measured_at")
                                    for r in frame.itertuples()) if t)
    when = (f"measured {times[0]}" + (f" to {times[-1]}" if times[-1] != times[0] else "")) if times else \
        "measurement times not recorded"
    if cached:
        what = (f"{cached} of {len(frame)} taken from cached runs computed before this grid, at other times and "
                f"loads: not comparable")
    else:
        what = "each measured once, in sequence, by this grid"
    return frame, (f"{stale}latency: each run's stored ms/query, measured when that run was computed ({when}); "
                   f"{what}; no spread. `irgrid run --latency` re-measures them together, interleaved and repeated")


def figure1(grid: Grid, path: Path, vector: bool = False) -> Path:
    """Effectiveness (each dataset's headline measure) vs query latency (ms/query, log scale), with the latency's
    spread and source; every system kind in the legend; labels placed apart (adjustText)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from adjustText import adjust_text
    from matplotlib.ticker import FuncFormatter, NullFormatter

    datasets = grid.datasets
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.8 * len(datasets), 4.2), squeeze=False)
    families = grid.families()
    first = first_measure_values(grid)
    lat, source = latencies(grid)
    lat = lat.set_index(["dataset", "system"])
    shown: set[str] = set()
    for ax, dataset in zip(axes[0], datasets):
        block = first[first["dataset"] == dataset]
        texts, xs, ys = [], [], []
        for _, r in block.iterrows():
            key = (dataset, r["system"])
            if key not in lat.index:
                continue
            x, lo, hi = (float(lat.at[key, c]) for c in ("ms", "lo", "hi"))
            fam = families.get(r["system"], "?")
            shown.add(fam)
            colour = FAMILY_COLOURS.get(fam, OTHER_COLOUR)
            if not np.isnan(lo):
                ax.errorbar([x], [r["value"]], xerr=[[x - lo], [hi - x]], fmt="none", ecolor=colour, elinewidth=1,
                            capsize=2, zorder=2)
            ax.scatter([x], [r["value"]], color=colour, s=36, zorder=3)
            texts.append(ax.text(x, r["value"], r["system"], fontsize=7))
            xs.append(x)
            ys.append(r["value"])
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.margins(x=0.3, y=0.2)
        ax.set_xlabel("query latency (ms/query, log scale)")
        ax.set_ylabel(block["measure"].iloc[0] if len(block) else "")
        ax.set_title(dataset, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        if texts:
            adjust_text(texts, x=xs, y=ys, ax=ax, arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.5})
    kinds = [f for f in FAMILY_COLOURS if f in shown] + sorted(shown - set(FAMILY_COLOURS))
    handles = [plt.Line2D([], [], marker="o", ls="", color=FAMILY_COLOURS.get(f, OTHER_COLOUR),
                          label=f if f in FAMILY_COLOURS else f"{f} (other)") for f in kinds]
    import textwrap

    footer = textwrap.fill(source, 80 * len(datasets))
    foot = 0.012 + 0.032 * (footer.count("\n") + 1)  # figure fraction the footer takes (7 pt lines, 4.2 in high)
    fig.text(0.5, 0.01, footer, ha="center", va="bottom", fontsize=7)
    if handles:
        fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False,
                   bbox_to_anchor=(0.5, foot))
    fig.tight_layout(rect=(0, foot + (0.07 if handles else 0.01), 1, 1))
    _save(fig, path, vector)
    plt.close(fig)
    return path


def jaccard_figure(matrix: pd.DataFrame, title: str, path: Path, vector: bool = False) -> Path:
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
    _save(fig, path, vector)
    plt.close(fig)
    return path


VECTOR_FORMATS = ("svg", "pdf")  # beside every PNG: papers take vector figures


def vector_copies(path: Path) -> list[Path]:
    """The SVG and PDF written beside a figure's PNG."""
    return [path.with_suffix(f".{ext}") for ext in VECTOR_FORMATS]


def _save(fig, path: Path, vector: bool) -> None:
    """The PNG; with `vector`, also SVG and PDF for papers (opt-in: a paper-sized grid has dozens of figures and
    the PDF backend draws every marker, minutes on 2 cores)."""
    fig.savefig(path, dpi=150)
    for copy in vector_copies(path) if vector else ():
        fig.savefig(copy, metadata={"Date": None} if copy.suffix == ".svg" else {"CreationDate": None})


# above this many systems one strip per system instead of a panel each: a paper-sized grid (32 systems x 34
# datasets) spent ~7 minutes of 2 cores in matplotlib's per-axes tick and layout machinery
MAX_DELTA_PANELS = 9


def delta_figure(grid: Grid, dataset: str, path: Path, vector: bool = False) -> Path | None:
    """Per-query differences to the baseline on the dataset's first measure, sorted per system: whether a mean
    change is a few large wins or a broad shift (the paper's tables show means only). Up to MAX_DELTA_PANELS
    systems a panel each; beyond, one row per system in a single heat strip. None without a baseline or another
    system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    base = grid.baseline
    measure = grid.measures(dataset)[0]
    pq = grid.perquery[(grid.perquery["dataset"] == dataset) & (grid.perquery["measure"] == measure)]
    wide = pq.pivot_table(index="qid", columns="system", values="value")
    others = [s for s in grid.systems(dataset) if s != base and s in wide.columns]
    if base is None or base not in wide.columns or not others:
        return None
    deltas = {s: (wide[s] - wide[base]).dropna().sort_values() for s in others}
    counts = {s: f"{int((d > 0).sum())} up, {int((d < 0).sum())} down, {int((d == 0).sum())} tied"
              for s, d in deltas.items()}
    fig = _delta_panels(plt, deltas, counts, base, measure) if len(others) <= MAX_DELTA_PANELS else \
        _delta_strips(plt, deltas, counts, base, measure)
    fig.suptitle(f"Per-query differences to the baseline: {dataset}", fontsize=9)
    fig.tight_layout()
    _save(fig, path, vector)
    plt.close(fig)
    return path


def _delta_panels(plt, deltas: dict, counts: dict, base: str, measure: str):
    cols = min(3, len(deltas))
    rows_n = -(-len(deltas) // cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(4.2 * cols, 3.0 * rows_n), sharey=True, squeeze=False)
    for ax, (system, delta) in zip(axes.flat, deltas.items()):
        values = delta.to_numpy()
        x = np.arange(len(values))
        # two filled step areas, not one bar patch per query
        ax.fill_between(x, 0, values, where=values < 0, step="mid", color="tab:red", linewidth=0)
        ax.fill_between(x, 0, values, where=values > 0, step="mid", color="tab:green", linewidth=0)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_title(f"{system} − {base}\n{counts[system]}", fontsize=8)
        ax.set_xlabel("queries, sorted", fontsize=8)
    for ax in list(axes.flat)[len(deltas):]:
        ax.axis("off")
    axes[0][0].set_ylabel(f"Δ {measure}", fontsize=8)
    return fig


def _delta_strips(plt, deltas: dict, counts: dict, base: str, measure: str):
    """One row per system, its queries sorted by Δ left to right, colour = Δ (red worse, green better): one axes,
    so the cost does not grow with the number of systems the way panels do."""
    width = max(len(d) for d in deltas.values())
    grid_values = np.full((len(deltas), width), np.nan)
    for i, delta in enumerate(deltas.values()):  # centred, so rows of different lengths line up at their middles
        offset = (width - len(delta)) // 2
        grid_values[i, offset:offset + len(delta)] = delta.to_numpy()
    bound = float(np.nanmax(np.abs(grid_values))) if np.isfinite(grid_values).any() else 1.0
    fig, ax = plt.subplots(figsize=(9.0, 0.9 + 0.28 * len(deltas)))
    image = ax.imshow(grid_values, aspect="auto", cmap="RdYlGn", vmin=-(bound or 1.0), vmax=bound or 1.0,
                      interpolation="nearest")
    ax.set_yticks(range(len(deltas)), [f"{s} ({counts[s]})" for s in deltas], fontsize=7)
    ax.set_xticks([])
    ax.set_xlabel(f"queries, sorted by Δ {measure} (each row: system − {base})", fontsize=8)
    fig.colorbar(image, ax=ax, label=f"Δ {measure}", fraction=0.03, pad=0.01)
    return fig
