"""The docs site's generated pages, written from the code at build time (docs/gen/pages.py runs this under
mkdocs-gen-files; tests/unit/test_docs.py calls it directly): the experiment-file reference from the schemas,
the registry and dataset catalog as `irgrid list` / `irgrid datasets` print them, the fidelity tables as
`irgrid list --profiles --format markdown` prints them, the CLI's `--help`, the module layout from the module
docstrings and the layer contract, and one API page per package for mkdocstrings.

Nothing here imports torch or reads staged data: the registry, schemas and catalog are light by design, and
module docstrings are read with `ast`, not by importing the modules."""

from __future__ import annotations

import ast
import contextlib
import csv
import io
import re
from pathlib import Path

import tomllib

from irgrid.util import markdown as md

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "irgrid"
PIPELINES = ROOT / "pipelines"


def _cli(*argv: str) -> str:
    """What `irgrid ARGV` prints (run in process: the CLI's light commands import no torch)."""
    from irgrid.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            code = main(list(argv))
        except SystemExit as e:  # --help exits 0
            code = e.code
    if code not in (0, None):
        raise RuntimeError(f"irgrid {' '.join(argv)} exited {code}")
    return out.getvalue()


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: list[dict[str, str]], code: tuple[str, ...] = ()) -> str:
    """A Markdown table of rows (first row's keys are the columns); columns in `code` are shown as code."""
    cols = list(rows[0])
    # cells escaped here, not by the renderer: a `|` inside a code span stays bare (Python-Markdown keeps it in the cell)
    cells = [[f"`{row[c]}`" if c in code and row[c] not in ("", "-") else _cell(str(row[c])) for c in cols]
             for row in rows]
    return md.markdown_table(cols, cells, spaced=True) + "\n"


def _csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


# -- the experiment-file reference -----------------------------------------------------------------------------
# What each key means, in words; the types and whether a key is required come from the schemas themselves. A key
# the schema has and this table lacks (or the reverse) fails the build, so the page cannot drift from the code.
DESCRIPTIONS: dict[str, dict[str, str]] = {
    "experiment": {
        "name": "the experiment's name (default: the file's stem); recorded in the manifest",
        "description": "free text, recorded in the manifest",
        "datasets": "catalog ids (`irgrid datasets`), any ir_datasets id, names of `collections:` entries, or "
                    "`{name, queries, seed}` for a fixed-seed query subset",
        "retrievers": "registry names (`irgrid list`), `{name, as, profile, options}` variants, or "
                      "`{as, pipeline}` expressions (see Composing pipelines)",
        "measures": "ir_measures names plus irgrid's own (Robustness@10, og:/changed:, p-MRR, p-MRR-paper); "
                    "left out: each dataset's own measures",
        "baseline": "the system every other is tested against (a name or an `as:` name)",
        "test": "the paired test: `t` (default), `wilcoxon`, or a mapping `{name: randomization, permutations: N, "
                "seed: S}` / `{name: bootstrap, resamples: N, seed: S}`",
        "comparisons": "`baseline` (default: every system against the baseline) or `all-pairs` (every pair, "
                       "corrected together)",
        "correction": "multiple-testing correction, statsmodels names: `holm`, `bonferroni`, `fdr_bh`, ... or "
                      "`none`",
        "models": "model id (`org/name[@revision]`) -> local folder, for air-gapped use",
        "latency_sample": "queries timed one at a time for p50/p95 latency (default 50)",
        "collections": "bring-your-own collections from local files (next table)",
        "aggregates": "the paper's averaged columns: BEIR, CQADupStack, LoTTE, FollowIR-Score, FollowIR-p-MRR, "
                      "FollowIR-Score-original, FollowIR-p-MRR-MTEB",
        "profile": "`card` (default) or `paper`: the profile every retriever item uses unless it sets its own",
        "self_matches": "`catalog` (default: each dataset's policy) or `paper` (a document whose id is the query's "
                        "is removed on every dataset unless judged relevant)",
        "claims": "statements to check on the grid (`irgrid claims OUT`), each `{id, text, source, alpha, <form>: "
                  "{...}}` with a form of beats, best, equivalent, beats_on_average, rank, latency, jaccard "
                  "(Claims and diffs)",
    },
    "retriever item": {
        "name": "a registry entry",
        "as": "the system's name in results (needed when one entry appears twice)",
        "profile": "`card` or `paper` for this item",
        "options": "option values on top of the profile; each changes the cache key",
    },
    "dataset item": {
        "name": "a dataset id or collection name",
        "queries": "a fixed-seed sample of this many queries (CI-sized checks)",
        "seed": "the sample's seed (default 0)",
    },
    "collection (bring your own)": {
        "name": "the dataset's name, usable in `datasets:`",
        "docs": "documents: JSONL (`_id`/`doc_id`/`docno`, `title`, `text`) or TSV (`id<TAB>[title<TAB>]text`); "
                "`.gz` accepted; relative to the experiment file",
        "topics": "queries: TSV (`qid<TAB>text`) or TREC topics (`<top><num><title>`)",
        "qrels": "relevance judgements, TREC format: `qid 0 docid label`",
        "docs_format": "`jsonl` or `tsv` when the extension does not tell",
        "topics_format": "`tsv` or `trec` when the extension does not tell",
        "fields": "document fields joined into the indexed text (default `[title, text]`)",
        "query_field": "which topic field is the query text",
        "drop_self_matches": "drop a query's own document from its ranking (as ArguAna and Quora do)",
        "allow_unjudged_qrels": "accept qrels query ids that no topic has (refused by default: topics and qrels "
                                "numbered differently; still named in a warning)",
        "measures": "the collection's own measures (used when the experiment lists none)",
        "notes": "free text, shown by `irgrid datasets`",
    },
    "expected scores (`EXPERIMENT.expected.yaml`)": {
        "expected": "a list of cells, each as in the next table",
    },
    "expected cell": {
        "dataset": "dataset id", "system": "system name (as in results.csv)", "measure": "measure name",
        "value": "the expected value", "tolerance": "allowed absolute difference (default 0.0005)",
        "source": "where the value comes from (a paper, a leaderboard)",
    },
    "cluster config (`--executor-config`)": {
        "executor": "`local`, `ray` or `slurm`",
        "shards": "encode each dense index as up to N shard jobs, merged into one index",
        "slurm": "the Slurm section (next table)",
        "ray": "the Ray section (next table)",
    },
    "QA experiment (`irgrid qa`)": {
        "name": "the experiment's name", "description": "free text",
        "task": "`mcq` or `oe` (shorthand for one task)",
        "tasks": "`{mcq: {n, seed, stratify}, oe: {...}}`: which tasks, how many questions",
        "readers": "reader names (`irgrid.qa.readers`) or `{replay: MODEL}` for released answers",
        "settings": "evidence settings: `base`, `golden`, `mix`, `retrieved` (with a retriever and top-k)",
        "collection": "`{scope: subset|full, distractors: N}`: what the Retrieved setting indexes",
        "generation": "decoding settings for live readers",
        "measures": "per task, e.g. `{oe: [ROUGE-L, BLEU-4, BERTScore-F1, KeypointCoverage]}`",
        "bertscore": "BERTScore encoder settings",
        "coverage": "key-point coverage judge: `{method: lexical|hybrid, threshold}` or `SCORER@THRESHOLD`",
        "retrieval_measures": "measures of the Retrieved settings' rankings",
        "baseline": "the setting paired tests compare against",
        "test": "`t` or `wilcoxon` (accuracy uses exact McNemar)",
        "correction": "multiple-testing correction (statsmodels names)",
        "bootstrap": "bootstrap resamples for confidence intervals (or `{n, seed}`)",
        "models": "model id -> local folder",
        "templates": "reader prompt templates replacing the paper's",
    },
}
CLUSTER_SECTION_WORDS = {
    "gpus_per_job": "GPUs for each job that runs a neural model (BM25 jobs get none)",
    "cpus_per_job": "CPUs per job", "mem_gb": "memory per job, GB", "time_min": "time limit per job, minutes",
    "max_retries": "resubmissions of a job whose process died", "poll_seconds": "how often job states are polled",
    "partition": "Slurm partition", "account": "Slurm account", "qos": "Slurm QOS",
    "cluster": "submitit cluster (`local` runs the job scripts as local processes)",
    "folder": "where Slurm's own output goes (default OUT/slurm)",
    "setup": "shell lines run before each job (e.g. activating the environment)",
    "additional": "extra sbatch parameters", "max_parallel": "jobs running at once (submitit's local cluster)",
    "address": "an existing Ray cluster (`auto`, `ray://head:10001`); left out: a local one",
    "num_cpus": "CPUs of a local Ray cluster",
}


def _schemas() -> dict[str, object]:
    from irgrid.cluster.config import ExecutorConfig
    from irgrid.data import byo
    from irgrid.report import check
    from irgrid.runner import experiment

    out = {"experiment": experiment.SCHEMA, "retriever item": experiment.RETRIEVER_SCHEMA,
           "dataset item": experiment.DATASET_SCHEMA, "collection (bring your own)": byo.SCHEMA,
           "expected scores (`EXPERIMENT.expected.yaml`)": check.FILE, "expected cell": check.ENTRY,
           "cluster config (`--executor-config`)": ExecutorConfig.FILE}
    with contextlib.suppress(ImportError):  # the QA grid needs pyterrier (the `qa` extra), not torch
        from irgrid.qa import grid as qa_grid

        out["QA experiment (`irgrid qa`)"] = qa_grid.SCHEMA
    return out


def _schema_rows(schema, words: dict[str, str], title: str) -> list[dict[str, str]]:
    keys = dict(schema.keys)
    missing, stale = sorted(set(keys) - set(words)), sorted(set(words) - set(keys))
    if missing or stale:
        raise RuntimeError(f"docs/gen/render.py DESCRIPTIONS[{title!r}] out of date with the schema: keys without "
                           f"a description {missing}, descriptions of keys the schema lacks {stale}")
    return [{"key": k, "required": "yes" if key.required else "", "value": key.describe(), "meaning": words[k]}
            for k, key in keys.items()]


def experiment_reference() -> str:
    import dataclasses

    from irgrid.cluster.config import ExecutorConfig

    types = {f.name: str(f.type) for f in dataclasses.fields(ExecutorConfig)}

    parts = ["# Experiment-file reference\n",
             "Generated from the schemas the readers check (`irgrid.core.schema`): every key an irgrid YAML file "
             "may hold, its type and whether it is required. An unknown key is an error with a \"did you mean\", "
             "naming the file and the entry. The meaning of values (names, ranges) is checked by each reader; see "
             "[Writing experiment files](../experiments.md).\n"]
    for title, schema in _schemas().items():
        parts.append(f"## {title[0].upper() + title[1:]}\n")
        parts.append(markdown_table(_schema_rows(schema, DESCRIPTIONS[title], title), code=("key",)))
    for section, keys in ExecutorConfig.SECTIONS.items():
        parts.append(f"## Cluster config: `{section}:` section\n")
        rows = [{"key": k, "type": types[k], "meaning": CLUSTER_SECTION_WORDS[k]} for k in keys]
        parts.append(markdown_table(rows, code=("key", "type")))
    return "\n".join(parts)


# -- registry, catalog, fidelity, CLI ---------------------------------------------------------------------------
def registry_page() -> str:
    rows = _csv_rows(_cli("list", "--format", "csv"))
    for row in rows:
        row.pop("options", None)  # long; `irgrid list` shows them
    return ("# Registry and profiles\n\nGenerated from the registry: what `irgrid list --format csv` prints "
            "(options left out here; `irgrid list` shows them). Every entry with a `paper` profile has its "
            "differences to the `card` profile on [Fidelity to the paper](../fidelity.md).\n\n"
            + markdown_table(rows, code=("name",)))


def catalog_table() -> str:
    rows = _csv_rows(_cli("datasets", "--format", "csv", "--catalog-only"))  # not this machine's staged data
    for row in rows:
        for col in ("ir_datasets", "corpus", "counts_source"):
            row.pop(col, None)
    return markdown_table(rows, code=("id",))


FIDELITY_GROUPS = {"dense": ("dense", "late-interaction"), "sparse": ("sparse", "expansion")}


def fidelity_tables(group: str) -> str:
    """`irgrid list --profiles --format markdown --family F` for each family of the group, as printed."""
    return "".join(_cli("list", "--profiles", "--format", "markdown", "--family", f)
                   for f in FIDELITY_GROUPS[group])


def unlinked(markdown: str) -> str:
    """Sources such as `models.py d['gritlm']['query_instruction']` read as Markdown reference links ([a][b]):
    escape `][` outside code spans, so the page shows them as printed."""
    def line(text: str) -> str:
        parts = text.split("`")
        return "`".join(p.replace("][", "]\\[") if i % 2 == 0 else p for i, p in enumerate(parts))

    return "\n".join(line(t) for t in markdown.split("\n"))


def cli_commands() -> list[str]:
    """The subcommands `irgrid --help` lists, in its order."""
    found = re.search(r"\{([\w,-]+)\}", _cli("--help"))
    assert found, "irgrid --help lists no subcommands"
    return found.group(1).split(",")


def cli_reference() -> str:
    parts = ["# Command line\n", "Generated: what `irgrid --help` and each subcommand's `--help` print.\n",
             "```text\n" + _cli("--help") + "```\n"]
    commands = []
    for c in cli_commands():  # a command, then its own subcommands (`qa run|replay|judges`)
        commands.append([c])
        nested = re.search(rf"^usage: irgrid {c} .*?\{{([\w,-]+)\}}", _cli(c, "--help"), re.M)
        commands += [[c, s] for s in nested.group(1).split(",")] if nested else []
    for argv in commands:
        parts.append(f"## `irgrid {' '.join(argv)}`\n\n```text\n" + _cli(*argv, "--help") + "```\n")
    return "\n".join(parts)


# -- layout and API pages ---------------------------------------------------------------------------------------
def modules() -> dict[str, Path]:
    """Every module of the package (and the entries in pipelines/), by dotted name."""
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    for path in sorted(PIPELINES.glob("*.py")):
        name = "irgrid.pipelines" + ("" if path.stem == "__init__" else f".{path.stem}")
        out[name] = path
    return out


def summary(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return " ".join(doc.split("\n\n")[0].split())


def layers() -> list[str]:
    """The import contract's layers, top to bottom (pyproject.toml, checked by `make lint`)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    contract = next(c for c in config if c["type"] == "layers")
    return contract["layers"]


def layout_page() -> str:
    mods = modules()
    parts = ["# Layout\n",
             "Generated from the module docstrings (their first paragraph) and the import contract in "
             "`pyproject.toml`. `src/irgrid/` is in layers, top to bottom: a module imports only from the layers "
             "below its own (checked by `make lint` with import-linter; `tests/unit/test_architecture.py` also "
             "finds any import cycle, function-level imports included). The entries (`pipelines/`) are a layer "
             "too: they wire the backends below them and extend the engine only through declared seams. The one "
             "upward edge is declared in the contract: an entry's `.pipeline(ds)` reaches `irgrid.runner.build` by "
             "a lazy import. Each module links to its API page.\n"]
    placed: set[str] = set()
    for layer in layers():
        names = [n.strip() for n in layer.split("|")]
        parts.append(f"## Layer: {' · '.join(f'`{n}`' for n in names)}\n")
        for top in names:
            full = f"irgrid.{top}"
            for mod in [m for m in mods if m == full or m.startswith(full + ".")]:
                depth = "  " if mod != full else ""
                parts.append(f"{depth}- [`{mod}`](../api/{_api_page(mod)}.md): {summary(mods[mod])}")
                placed.add(mod)
        parts.append("")
    rest = [m for m in mods if m not in placed]
    parts.append("## Outside the layers\n")
    parts.append("`irgrid` itself (the public functions). The layer `pipelines` is the top-level `pipelines/` "
                 "folder, the retriever entries (installed as `irgrid.pipelines`, one file per Table 1 family, "
                 "loaded by `irgrid.core.entries` through the `irgrid.entries` entry points; "
                 "`src/irgrid/pipelines` links to it so that the contract checks it).\n")
    for mod in rest:
        parts.append(f"- [`{mod}`](../api/{_api_page(mod)}.md): {summary(mods[mod])}")
    parts.append("\nOther top-level folders: `experiments/` (YAML), `tests/` in tiers (`unit/`, `integration/`, "
                 "`system/`), `notebooks/`, `benchmarks/`, `docs/` (this site), `.ci/run` (CI: `make lint`, "
                 "`make docs`, `make test`).\n")
    return "\n".join(parts)


def _api_page(module: str) -> str:
    """The API page a module is documented on: one per package below `irgrid` (`irgrid` itself: index)."""
    parts = module.split(".")
    return "index" if len(parts) == 1 else parts[1]


def api_pages() -> dict[str, str]:
    """{path under docs/api/: Markdown}: one page per subpackage (or top-level module), each module a
    mkdocstrings block, plus SUMMARY.md for the navigation."""
    pages: dict[str, list[str]] = {}
    for mod in modules():
        pages.setdefault(_api_page(mod), []).append(mod)
    out, nav = {}, []
    for page, mods in pages.items():
        title = "irgrid (public functions)" if page == "index" else f"irgrid.{page}"
        body = [f"# {title}\n"]
        # griffe reads the entries from the pipelines/ folder (installed as irgrid.pipelines)
        body += [f"::: {m.replace('irgrid.pipelines', 'pipelines')}\n    options:\n      show_root_heading: true\n      heading_level: 2\n" for m in mods]
        out[f"{page}.md"] = "\n".join(body)
        nav.append((page != "index", title, f"{page}.md"))
    out["SUMMARY.md"] = "\n".join(f"* [{t}]({p})" for _, t, p in sorted(nav)) + "\n"
    return out


MARKER = re.compile(r"<!-- generated: ([\w-]+)(?: (\w+))? -->")


def fill_markers(text: str) -> str:
    """Replace `<!-- generated: NAME [ARG] -->` in a hand-written page by the generated content."""
    makers = {"fidelity": lambda group: unlinked(fidelity_tables(group)), "catalog": lambda _=None: catalog_table()}

    def one(match: re.Match) -> str:
        name, arg = match.group(1), match.group(2)
        if name not in makers:
            raise RuntimeError(f"unknown generated block {name!r}; known: {sorted(makers)}")
        return makers[name](arg) if arg else makers[name]()

    return MARKER.sub(one, text)


def generated_pages() -> dict[str, str]:
    """Every page written from the code: {path under docs/: Markdown}."""
    pages = {"reference/experiment-file.md": experiment_reference(), "reference/registry.md": registry_page(),
             "reference/cli.md": cli_reference(), "reference/layout.md": layout_page()}
    pages.update({f"api/{k}": v for k, v in api_pages().items()})
    return pages
