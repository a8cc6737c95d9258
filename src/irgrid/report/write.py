"""`irgrid report OUT`: the paper's tables and figures regenerated from a stored grid only, written under
OUT/report (analysis CSVs, each table alone and together in Markdown, LaTeX and HTML, figures)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from irgrid import paper as paper_mod
from irgrid.report import failures
from irgrid.report import stats as stats_mod
from irgrid.report.analyses import Analyses, analyse
from irgrid.report.figures import delta_figure, figure1, jaccard_figure, vector_copies
from irgrid.report.render import LEGEND, TEX_PACKAGES, Table, tex_escape, to_html, to_latex, to_markdown
from irgrid.report.stored import Grid, load
from irgrid.report.tables import build_tables, jaccard_square, paper_tables_for
from irgrid.util.files import slug, write_text_atomic
from irgrid.util.markdown import markdown_table


def write_report(out: str | Path, to: str | Path | None = None, n_resamples: int = stats_mod.BOOTSTRAP_B,
                 seed: int = stats_mod.BOOTSTRAP_SEED, fraction: float = 0.1, reference: str | Path | None = None,
                 paper: bool | None = None, vector: bool = False, figures: bool = True) -> list[Path]:
    """Analyse the grid stored in `out` and write every table and figure under `to` (default OUT/report).
    `paper`: the paper's tables and z-scores where the grid fills them (None), always (True) or never (False).
    `vector`: every figure also as SVG and PDF. `figures=False`: tables and text only (a paper-sized grid draws
    ~70 figures, a minute of 2 cores); figures of an earlier report are removed, not left beside the new text."""
    grid = load(out)
    to = Path(to) if to is not None else grid.out / "report"
    to.mkdir(parents=True, exist_ok=True)
    a = analyse(grid, n_resamples=n_resamples, seed=seed, fraction=fraction, reference=reference)
    shown = paper_tables_for(a, paper)
    written: list[Path] = []
    for stale in ("zscores.csv", *(f"{t}.{e}" for t in ("table2", "tableA3", "tableA4", "tableA5", "tableA6",
                                                        "tableA7") for e in ("md", "tex", "html"))):
        (to / stale).unlink(missing_ok=True)  # a paper table of an earlier report that this one leaves out
    for name, frame in a.frames().items():
        if name == "zscores" and not shown:
            continue
        path = to / f"{name}.csv"
        write_text_atomic(path, frame.to_csv(index=False))
        written.append(path)
    path = to / "fusion_pipelines.yaml"  # the suggestions as experiment items (irgrid.runner.grammar)
    write_text_atomic(path, failures.fusion_pipelines_yaml(a.fusion_suggestions, a.fusion_rrf, a.params["rrf_k"]))
    written.append(path)
    tables = build_tables(grid, a, reference, paper)
    for t in tables:
        for ext, render in (("md", to_markdown), ("tex", to_latex), ("html", to_html)):
            path = to / f"{t.stem}.{ext}"
            write_text_atomic(path, render(t))
            written.append(path)
    figures = _write_figures(grid, a, to, fraction, vector) if figures else _remove_figures(to)
    written += figures + [copy for f in figures for copy in vector_copies(f) if vector]  # PNG (+ SVG/PDF)
    checks = _write_claims_and_card(grid, to, shown, n_resamples, seed, reference)
    written += _write_documents(grid, a, tables, figures, to, legend=bool(shown), checks=checks) + checks
    return written


def _write_figures(grid: Grid, a: Analyses, to: Path, fraction: float, vector: bool) -> list[Path]:
    """Figure 1 (latency), the hard-query overlap squares and the per-query differences to the baseline."""
    figures: list[Path] = []
    if (grid.results["measure"] == "ms/query").any():
        figures.append(figure1(grid, to / "figure1.png", vector))
    for dataset in grid.datasets:
        if dataset in a.params["skipped"]:
            continue
        m = jaccard_square(a, grid, dataset)
        figures.append(jaccard_figure(m, f"Hard-query overlap (worst {fraction:.0%})\n{dataset}",
                                      to / f"jaccard-{slug(dataset)}.png", vector))
    for dataset in grid.datasets:  # per-query differences to the baseline (a mean change: few big wins or broad?)
        if dataset in paper_mod.AGGREGATES:
            continue
        delta = delta_figure(grid, dataset, to / f"delta-{slug(dataset)}.png", vector)
        if delta is not None:
            figures.append(delta)
    return figures


def _remove_figures(to: Path) -> list[Path]:
    for pattern in ("figure1.*", "jaccard-*.*", "delta-*.*"):
        for stale in to.glob(pattern):
            if stale.suffix in (".png", ".svg", ".pdf"):
                stale.unlink()
    return []


def _write_claims_and_card(grid: Grid, to: Path, paper_shown: Sequence[str], n_resamples: int, seed: int,
                           reference: str | Path | None) -> list[Path]:
    """claims.md: the recorded experiment's claims checked on this grid (`irgrid claims`); card.csv: ER and ΔRI of
    the paper's cells against BM25 from the published means (`irgrid card`), when the paper's tables are shown."""
    from irgrid.report import claims as claims_mod
    from irgrid.report import repro

    written = []
    for stale in ("claims.md", "card.csv"):
        (to / stale).unlink(missing_ok=True)  # an earlier report's, for a grid that no longer has them
    if claims_mod.recorded_claims(grid):
        try:
            claims, universe, where = claims_mod.claims_of(grid)
            text = claims_mod.to_markdown(claims_mod.evaluate(grid, claims, universe, n_resamples, seed), where)
        except claims_mod.ClaimsError as e:  # the recorded file no longer reads (a renamed entry): say so
            text = f"The recorded experiment's claims could not be checked: {e}\n"
        write_text_atomic(to / "claims.md", text)
        written.append(to / "claims.md")
    if paper_shown:
        card = repro.published_card(grid, str(reference) if reference is not None else None)
        write_text_atomic(to / "card.csv", card.to_csv(index=False))
        written.append(to / "card.csv")
    return written


def _claims_and_card_md(checks: Sequence[Path]) -> list[str]:
    """report.md's last sections: the claims checked on this grid (claims.md, `irgrid claims`) and the
    reproduction card (card.csv, `irgrid card`), so the report shows what the grid supports, not only numbers."""
    out = []
    for path in checks:
        if path.name == "claims.md":
            body = path.read_text().strip()
            if body.startswith("# "):  # its own title becomes a section of the report
                body = body.split("\n", 1)[1].strip() if "\n" in body else ""
            out += ["## Claims", "", body, ""]
        elif path.name == "card.csv":
            card = pd.read_csv(path)
            if card.empty:
                out += ["## Reproduction card", "", "No cell of this grid ran as the paper's configuration.", ""]
            else:
                out += ["## Reproduction card", "", "Effect ratio (ER) and delta relative improvement (ΔRI) against "
                        "BM25 from the published means (repro_eval's definitions; card.csv).", "",
                        markdown_table(list(card.columns), [[_fmt(v) for v in row] for row in card.itertuples(
                            index=False)]), ""]
    return out


def _fmt(v: Any) -> str:
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def _write_documents(grid: Grid, a: Analyses, tables: Sequence[Table], figures: Sequence[Path], to: Path,
                     legend: bool = False, checks: Sequence[Path] = ()) -> list[Path]:
    name = grid.manifest.get("experiment", grid.out.name)
    params = (f"bootstrap B = {a.params['B']}, seed = {a.params['seed']}; hard queries: worst {a.params['fraction']:.0%}"
              f" with failure rank capped at {a.params['depth'] + 1}; RRF k = {a.params['rrf_k']}")
    skipped = a.params.get("skipped") or []
    note = (f"Skipped (no stored runs in {grid.out / 'runs'}): failure points, hard queries, Jaccard and fusion "
            f"for {', '.join(skipped)}." if skipped else "")
    from irgrid.runner.outputs import depth_note

    deep = depth_note(grid.results)  # measures deeper than the system returns (results.csv `beyond_depth`)
    note = " ".join(n for n in (note, deep) if n)
    failed = [f for f in grid.failures if f.get("retriever") != "*" and not str(f.get("dataset", "")).startswith(
        "aggregate:") and not str(f.get("error", "")).startswith("baseline ")]
    if failed:  # cells that did not run are named, not left out silently (issue 32)
        listed = "; ".join(f"{f.get('retriever')} on {f.get('dataset')}: {str(f.get('error', '')).splitlines()[0][:160]}"
                           for f in failed[:20])
        note = (note + " " if note else "") + (f"{len(failed)} failed cell(s) (failures.json), absent from every "
                                               f"table: {listed}" + (" ..." if len(failed) > 20 else "") + ".")
    # the colour legend once, before the first of the paper's tables (none: no legend)
    first_paper = next((i for i, t in enumerate(tables) if t.stem.startswith("table")), None) if legend else None

    def ordered(render, legend_text):
        out = []
        for i, t in enumerate(tables):
            if i == first_paper:
                out.append(legend_text)
            out.append(render(t))
        return out

    md = [f"# {name}: report", "", f"From `{grid.out}` ({params}).", ""] + ([note, ""] if note else [])
    md += ordered(to_markdown, f"**Legend of the paper's tables.** {LEGEND}\n")
    md += [f"![{p.stem}]({p.name})\n" for p in figures]
    md += _claims_and_card_md(checks)
    tex = [r"\documentclass{article}", r"\usepackage[margin=2cm]{geometry}", *TEX_PACKAGES,
           r"\usepackage[table]{xcolor}", r"\begin{document}",
           rf"\section*{{{tex_escape(name)}: report}}", tex_escape(params)] + ([tex_escape(note)] if note else [])
    tex += ordered(to_latex, rf"\paragraph{{Legend of the paper's tables.}} {tex_escape(LEGEND)}" + "\n")
    tex += [rf"\begin{{figure}}[ht]\centering\includegraphics[width=\linewidth]{{{p.name}}}\end{{figure}}"
            for p in figures]
    tex.append(r"\end{document}")
    style = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto}table{border-collapse:collapse;"
             "margin-bottom:.5em}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
             "td:first-child,th:first-child{text-align:left}.note{font-size:small;color:#444}img{max-width:100%}")
    body = [f"<h1>{html.escape(name)}: report</h1>", f"<p>{html.escape(params)}</p>"]
    body += [f"<p class=\"note\">{html.escape(note)}</p>"] if note else []
    body += ordered(to_html, f"<p class=\"note\"><b>Legend of the paper's tables.</b> {html.escape(LEGEND)}</p>")
    body += [f'<figure><img src="{p.name}" alt="{p.stem}"><figcaption>{p.stem}</figcaption></figure>' for p in figures]
    doc = (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(name)}</title>"
           f"<style>{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
    paths = [to / "report.md", to / "report.tex", to / "report.html"]
    for path, text in zip(paths, ("\n".join(md), "\n".join(tex) + "\n", doc)):
        write_text_atomic(path, text)
    return paths
