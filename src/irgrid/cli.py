"""`irgrid` command line: list, datasets, resolve, run, status, report, check, qa."""

from __future__ import annotations

import argparse
import csv
import io
import logging
import sys


def _table(rows: list[dict[str, str]], fmt: str) -> str:
    if not rows:
        return ""
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return buf.getvalue()
    cols = list(rows[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(widths[c]) for c in cols), "  ".join("-" * widths[c] for c in cols)]
    lines += ["  ".join(str(r[c]).ljust(widths[c]) for c in cols) for r in rows]
    return "\n".join(lines) + "\n"


def _shown(value) -> str:
    """A setting's value on one line: strings quoted with escapes visible (a prompt's newline shows as \\n)."""
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    return str(value)


def cmd_profiles(entries, fmt: str, agreeing: bool = False) -> int:
    """Each entry's `paper` vs `card` settings where they differ (`agreeing`: all of them), side by side with their
    sources; per-dataset values as rows 'setting [dataset]'; where the paper's text differs from the code, a note."""
    from irgrid.core.profiles import differences, for_entry
    from irgrid.util.markdown import markdown_table

    def profiles(r) -> dict:  # one entry shown alone: with the settings every paper profile shares (depth)
        if not agreeing or "paper" not in r.profiles:
            return r.profiles
        return {**r.profiles, "paper": for_entry("paper", r.profiles["paper"], r.options)}

    rows = [{"name": r.name, "setting": d["setting"], "paper": _shown(d["paper"]), "card": _shown(d["card"]),
             "paper_source": d["paper_source"], "card_source": d["card_source"], "note": d["note"]}
            for r in entries for d in differences(profiles(r), agreeing)]
    if fmt == "markdown":  # one table per entry (README's "Fidelity to the paper")
        for r in entries:
            mine = [row for row in rows if row["name"] == r.name]
            print(f"#### `{r.name}`" + (f" ({r.paper_name})" if r.paper_name else "") + "\n")
            if not mine:
                print("No differences: the paper's code and the card agree on every profiled setting.\n")
                continue
            print(markdown_table(["setting", "paper", "card", "paper source", "card source"],
                                 [[f"`{row['setting']}`", f"`{row['paper']}`", f"`{row['card']}`",
                                   row["paper_source"].removeprefix("valentinsvelev/retriever-evaluation:"),
                                   row["card_source"]] for row in mine], spaced=True, escape=True))
            print()
            for row in mine:
                if row["note"]:
                    print(f"- `{row['setting']}`: {row['note']} (the profile follows the code)")
            if any(row["note"] for row in mine):
                print()
        return 0
    if not rows:
        print("no profile differences: " + ", ".join(r.name for r in entries) + " run(s) the same settings under "
              "both profiles")
        return 0
    if not any(row["note"] for row in rows):
        rows = [{k: v for k, v in row.items() if k != "note"} for row in rows]
    sys.stdout.write(_table(rows, fmt))
    return 0


def fidelity(entries) -> list[dict[str, str]]:
    """Per entry with a `paper` profile: the paper-code commit(s) its settings cite and the settings that cite
    none (or an older commit without naming the release beside it)."""
    from irgrid.core.paper_code import RELEASE, pinned
    from irgrid.core.profiles import for_entry

    rows = []
    for r in entries:
        if "paper" not in r.profiles:
            continue
        settings = for_entry("paper", r.profiles["paper"], r.options)
        commits, unpinned = set(), []
        for key, setting in sorted(settings.items()):
            where = pinned(setting.source)
            if where is None or (where[1] != RELEASE and f"release {RELEASE}" not in setting.source):
                unpinned.append(key)
            else:
                commits.add(where[1])
        rows.append({"name": r.name, "commit": ",".join(sorted(commits)) or "-", "settings": str(len(settings)),
                     "per_dataset": str(sum(len(s.per_dataset) for s in settings.values())),
                     "unsourced": " ".join(unpinned) or "-", "status": "ok" if not unpinned else "MISSING"})
    return rows


def cmd_fidelity(entries, fmt: str) -> int:
    """`irgrid list --profiles --check`: every paper setting cites the release (exit 1 naming those that do not)."""
    from irgrid.core.paper_code import RELEASE, REPO

    rows = fidelity(entries)
    sys.stdout.write(_table(rows, "csv" if fmt == "csv" else "table"))
    bad = [r["name"] for r in rows if r["status"] != "ok"]
    print(f"\n{len(rows) - len(bad)}/{len(rows)} entries: every paper setting cites {REPO}@{RELEASE} (file@commit)"
          + (f"; without a commit: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


def cmd_list(args) -> int:
    from irgrid.core.retrievers import FAMILIES, RETRIEVERS, get

    if args.name and args.check:
        return cmd_fidelity([get(args.name)], args.format)
    if args.name:
        return cmd_profiles([get(args.name)], args.format, agreeing=args.format != "markdown")
    entries = sorted(RETRIEVERS, key=lambda r: (FAMILIES.index(r.family), r.architecture, r.name))
    if args.family:
        entries = [r for r in entries if r.family == args.family]
    if args.check:
        return cmd_fidelity(entries, args.format)
    if args.profiles or args.format == "markdown":
        return cmd_profiles(entries, args.format)
    rows = [{
        "name": r.name, "family": r.family, "architecture": r.architecture,
        "checkpoints": " ".join(dict.fromkeys(str(m) for m in r.all_models().values())) or "-",
        "index": r.index.name if r.index else "-",
        "options": " ".join(f"{k}={_shown(v) if isinstance(v, str) and chr(10) in v else v}"
                            for k, v in sorted(r.keyed_options().items()) if k != "query_config"),
        "profiles": ",".join(sorted(r.profiles)) or "-",
        "paper": r.paper_name or "-",
    } for r in entries]
    sys.stdout.write(_table(rows, args.format))
    return 0


def cmd_datasets(args) -> int:
    from irgrid.data.datasets import catalog

    entries = [d for d in catalog() if not args.group or d.group == args.group]

    def policies(d) -> str:
        out = [f"fields={'+'.join(d.fields)}"]
        if d.query_template:
            out.append(f"query='{d.query_template}'")
        elif d.query_fields:
            out.append(f"query={'+'.join(d.query_fields)}")
        if d.drop_self_matches:
            out.append("drop_self_matches")
        return " ".join(out)

    def n(value: int | None) -> str:
        return "" if value is None else str(value)

    from irgrid.paper import conventions_of

    rows = [{"id": d.name, "group": d.group, "measures": " ".join(d.measures), "policies": policies(d),
             "conventions": " ".join(conventions_of(d.name)) or "-",
             "queries": n(d.counts.queries), "docs": n(d.counts.docs), "counts_source": d.counts.source or "-",
             "ir_datasets": d.irds_id, "corpus": d.corpus} for d in entries]
    sys.stdout.write(_table(rows, args.format))
    return 0


def cmd_resolve(args) -> int:
    from irgrid.core.modelref import ModelRef
    from irgrid.models.resolver import resolve

    r = resolve(ModelRef(args.model, args.revision))
    print(f"{r.ref}\t{r.source}\t{r.location}")
    return 0


def cmd_run(args) -> int:
    import os

    from irgrid.util import settings

    settings.device()  # an accelerator asked for (IRGRID_DEVICE) is checked once, before any work
    settings.use_irds_home()  # the cache's own (--cache/irds) unless IR_DATASETS_HOME is set, as documented
    if settings.tiny_models():
        print("irgrid: TINY-MODEL MODE: every checkpoint with a declared architecture is a tiny random-weight model;"
              " these numbers check wiring only and are not results", file=sys.stderr)
    from irgrid.grid import run
    from irgrid.runner.experiment import load
    from irgrid.runner.outputs import markdown_table
    from irgrid.store import Store

    try:  # a big file takes a while to read and expand: say so before the first cell (issue 32)
        size = os.path.getsize(args.experiment)
    except OSError:
        size = 0
    if size > 64 << 10:
        logging.getLogger("irgrid").info("reading %s (%.1f MiB)", args.experiment, size / 2**20)
    spec = load(args.experiment)
    if size > 64 << 10:
        logging.getLogger("irgrid").info("%s: %d dataset(s) x %d retriever(s)", args.experiment, len(spec.datasets),
                                         len(spec.retrievers))
    if args.dry_run:  # the plan: what to stage (once each), index builds, projected GPU/CPU hours and disk
        from irgrid.runner import planning

        the_plan = planning.make_plan(spec, Store())
        sys.stdout.write(planning.format_csv(the_plan) if args.format == "csv"
                         else planning.format_summary(the_plan, str(args.experiment)))
        if args.format != "csv":  # what the grid can resolve, from runs already cached (a pilot)
            from irgrid.runner import limits

            lines = limits.pilot_mdes(spec, Store())
            print("\nminimum detectable effects (paired t, alpha 0.05, 80% power) from cached pilot runs:")
            print("\n".join(f"  {line}" for line in lines))
        return 0
    from irgrid.cluster.config import ExecutorConfig

    config = ExecutorConfig.load(args.executor_config, args.executor, shards=args.shards, partition=args.partition,
                                 gpus_per_job=args.gpus_per_job, time_min=args.time, address=args.ray_address,
                                 max_retries=args.max_retries)
    if config.executor != "local" and not args.out:
        print(f"irgrid: error: --executor {config.executor} needs --out (the grid's state and job logs live there)",
              file=sys.stderr)
        return 2
    result = run(spec, out=args.out, fail_fast=args.fail_fast, executor=config, resume=args.resume)
    results = result.results
    sys.stdout.write(markdown_table(results) if len(results) else "no results\n")
    if args.latency:  # every system re-timed in this one process: comparable latencies (Figure 1 uses them)
        from pathlib import Path

        from irgrid.runner import latency

        computed = set(zip(results["dataset"], results["system"])) if len(results) else set()
        timings, summary = latency.measure(spec, Store(), rounds=args.latency_rounds, queries=args.latency_queries,
                                           cells=computed)
        print("\nlatency pass (ms/query, median [min-max] over rounds, one process, interleaved, warm):")
        for r in summary.itertuples():
            print(f"  {r.dataset}  {r.system}: {r.median_ms:.2f} [{r.min_ms:.2f}-{r.max_ms:.2f}] "
                  f"({r.rounds} rounds x {r.queries} queries)")
        for dataset, system, error in summary.attrs["skipped"]:
            print(f"latency pass: {system} on {dataset} not timed: {error}", file=sys.stderr)
        if args.out:
            latency.write(Path(args.out), timings, summary)
    if args.out:
        print(f"\nwrote {args.out}/results.csv, perquery.csv, results.md, manifest.json, failures.json, runs/")
    for f in result.failures:
        print(f"FAILED {f.retriever} on {f.dataset}: {f.error}", file=sys.stderr)
    return 0 if result.ok else 1


def cmd_status(args) -> int:
    from irgrid.cluster.state import format_status, status

    data = status(args.out)
    sys.stdout.write(format_status(data))
    return 1 if any(c["status"] in ("failed", "blocked", "stale") for c in data["cells"]) else 0


def cmd_report(args) -> int:
    from irgrid.report.write import write_report
    from irgrid.runner.outputs import verify_outputs

    verify_outputs(args.out)  # incomplete or mixed folders are refused, naming the file

    written = write_report(args.out, to=args.to, n_resamples=args.bootstrap, seed=args.seed,
                           fraction=args.fraction, reference=args.reference, paper=args.paper)
    folder = written[0].parent if written else args.to
    print(f"wrote {len(written)} files to {folder} (report.md, report.html, report.tex, tables, figures, CSVs)")
    import json
    from pathlib import Path

    failed = [f for f in json.loads((Path(args.out) / "failures.json").read_text() or "[]")
              if f.get("retriever") not in (None, "*")] if (Path(args.out) / "failures.json").exists() else []
    for f in failed:  # a failed cell is not an absent one: say so beside the tables
        print(f"note: {f['retriever']} on {f['dataset']} FAILED in this grid ({f['error'].splitlines()[0]}); it is "
              f"missing from the tables (details in failures.json)", file=sys.stderr)
    return 0


def cmd_check(args) -> int:
    from pathlib import Path

    from irgrid.report.check import CheckError, check

    try:
        outcomes = check(Path(args.out), args.expected)
    except CheckError as e:
        print(f"irgrid: error: {e}", file=sys.stderr)
        return 2
    for o in outcomes:
        print(o.line())
    failed = sum(not o.ok for o in outcomes)
    print(f"\n{len(outcomes) - failed} OK, {failed} FAIL")
    return 1 if failed else 0


def cmd_qa_run(args) -> int:
    """`irgrid qa run EXP.yaml`: the DisastQA reader x evidence-setting grid (irgrid.qa.grid)."""
    logging.getLogger("irgrid").setLevel(logging.INFO)
    from pathlib import Path

    from irgrid.qa.grid import load, run

    spec = load(args.experiment)
    results = run(spec, out=args.out)
    if args.out:
        print(Path(args.out, "results.md").read_text())
        print(f"wrote {args.out}/results.csv, breakdown.csv, tests.csv, retrieval.csv, items.csv, results.md, "
              f"manifest.json")
    else:
        sys.stdout.write(results.to_string(index=False) + "\n")
    return 0


def cmd_qa_replay(args) -> int:
    """`irgrid qa replay FILE --out DIR`: score released DisastQA answers as a reader (irgrid.qa.replay)."""
    logging.getLogger("irgrid").setLevel(logging.INFO)
    from pathlib import Path

    from irgrid.qa import judges, replay

    judge = judges.parse_judge(args.judge) if args.judge else None  # None: the cross-validated default
    oe_measures = tuple(args.measures.split(",")) if args.measures else replay.OE_MEASURES
    replay.run(args.file, args.out, models=args.model, sample=args.sample, seed=args.seed, judge=judge,
               bertscore=args.bertscore, oe_measures=oe_measures)
    print(Path(args.out, "results.md").read_text())
    print(f"wrote {args.out}/answers.csv, results.csv, tests.csv, results.md, manifest.json")
    return 0


def cmd_qa_judges(args) -> int:
    """`irgrid qa judges HUMAN.jsonl.gz --out DIR`: the coverage judges against the authors' labels."""
    logging.getLogger("irgrid").setLevel(logging.INFO)
    from irgrid.qa import judges

    return judges.run_validation(args)


def _qa_parser(sub) -> None:
    """`irgrid qa run|replay|judges`."""
    from irgrid.qa.arguments import judges_arguments  # light: no numpy

    qa = sub.add_parser("qa", help="DisastQA: run readers x evidence settings from a YAML, replay the authors' "
                                   "released answers, validate the coverage judges",
                        description="DisastQA (irgrid.qa): run, replay, judges.")
    commands = qa.add_subparsers(dest="qa_command", required=True)
    p = commands.add_parser("run", help="readers x evidence settings (Base/Golden/Mix/Retrieved) from a YAML")
    p.add_argument("experiment")
    p.add_argument("--out", help="output folder (results.csv, breakdown.csv, tests.csv, retrieval.csv, items.csv, ...)")
    p.add_argument("--cache", help="cache folder (default IRGRID_CACHE or ~/.cache/irgrid)")
    p.set_defaults(func=cmd_qa_run)
    p = commands.add_parser("replay", help="score the DisastQA authors' released answers (mcq_answers.csv.gz, "
                                           "oe_answers.jsonl.gz, oe_human_review.jsonl.gz) like a live reader")
    p.add_argument("file")
    p.add_argument("--out", required=True, help="output folder (answers.csv, results.csv, tests.csv, ...)")
    p.add_argument("--model", action="append", help="only this reader (repeatable)")
    p.add_argument("--sample", type=int, help="a fixed-seed sample of N questions (same for every reader)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--judge", help="coverage judge SCORER@THRESHOLD (lexical, embedding, hybrid; default: the "
                                   "cross-validated one)")
    p.add_argument("--bertscore", choices=["paper", "minilm", "off"], default="paper",
                   help="paper: roberta-large layer 17 where its weights exist, else the named MiniLM fallback")
    p.add_argument("--measures", help="open-ended measures, comma-separated (default: ROUGE-L,ROUGE-L-paper,"
                                      "BLEU-4,BLEU-4-paper,BERTScore-F1,coverage; -paper: the DisastQA authors' "
                                      "convention, equal to their published values)")
    p.add_argument("--cache", help="cache folder (default IRGRID_CACHE or ~/.cache/irgrid)")
    p.set_defaults(func=cmd_qa_replay)
    p = commands.add_parser("judges", help="the coverage judges (sweeps, leave-one-reader-out CV) against the "
                                           "authors' released gpt-4o-mini labels")
    judges_arguments(p)
    p.add_argument("--cache", help="cache folder (default IRGRID_CACHE or ~/.cache/irgrid)")
    p.set_defaults(func=cmd_qa_judges)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["qa"] and len(argv) > 1 and argv[1].endswith((".yaml", ".yml")):
        argv = ["qa", "run", *argv[1:]]  # `irgrid qa EXP.yaml`, as written before `qa run` existed
    args = build_parser().parse_args(argv)
    if not args.verbose:  # -v: libraries' own output (PISA, JVM, ir_datasets INFO) and tracebacks
        logging.getLogger("ir_datasets").setLevel(logging.WARNING)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("irgrid").setLevel(logging.INFO if args.verbose or args.command == "run" else logging.WARNING)
    return _run_reporting_errors(args)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line (tests compare `--help` with it)."""
    parser = argparse.ArgumentParser(prog="irgrid", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="libraries' own output (PISA, JVM, ir_datasets) and tracebacks (as IRGRID_VERBOSE=1)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="the retriever registry (does not import torch); `list NAME`: that entry's "
                                    "paper vs card profile differences with their sources")
    p.add_argument("name", nargs="?", help="one entry: show its profile differences (paper vs card) and sources")
    p.add_argument("--format", choices=["table", "csv", "markdown"], default="table",
                   help="markdown: profile differences only, one table per entry")
    p.add_argument("--family")
    p.add_argument("--profiles", action="store_true",
                   help="every listed entry's profile differences (paper vs card), side by side with sources")
    p.add_argument("--check", action="store_true",
                   help="with --profiles: per entry, the paper-code commit its paper settings cite and any setting "
                        "that cites none (exit 1 if so)")
    p.set_defaults(func=cmd_list)
    p = sub.add_parser("datasets", help="the dataset catalog: id, group, measures, policies, counts")
    p.add_argument("--format", choices=["table", "csv"], default="table")
    p.add_argument("--group", help="only one group (msmarco, beir, lotte, instructir, followir, byo, other)")
    p.set_defaults(func=cmd_datasets)
    p = sub.add_parser("resolve", help="where a model id would load from (mapping, package, HF cache, hub)")
    p.add_argument("model")
    p.add_argument("--revision")
    p.set_defaults(func=cmd_resolve)
    p = sub.add_parser("run", help="run an experiment YAML")
    p.add_argument("experiment")
    p.add_argument("--out", help="output folder (results.csv, perquery.csv, results.md, manifest.json, runs/)")
    p.add_argument("--cache", help="cache folder for indexes and runs (default IRGRID_CACHE or ~/.cache/irgrid)")
    p.add_argument("--dry-run", action="store_true",
                   help="plan, run nothing: missing checkpoints and corpora once each with how to stage them, index "
                        "builds, projected GPU/CPU hours and disk per family (every cell: --format csv)")
    p.add_argument("--format", choices=["summary", "csv"], default="summary",
                   help="--dry-run output: a grouped summary (default) or one CSV row per cell")
    p.add_argument("--fail-fast", action="store_true", help="stop at the first failing cell")
    p.add_argument("--latency", action="store_true",
                   help="after the grid, re-time every system in this one process (warm, interleaved rounds): "
                        "median and spread per system in --out/latency.csv, used by Figure 1")
    p.add_argument("--latency-rounds", type=int, default=5, help="rounds of the latency pass (default 5)")
    p.add_argument("--latency-queries", type=int, help="the first N queries of each dataset (default: all)")
    p.add_argument("--tiny-models", action="store_true",
                   help="replace checkpoints by tiny random-weight models of their architectures (wiring check on a "
                        "CPU in minutes; same as IRGRID_TINY_MODELS=1; never results)")
    p.add_argument("--executor", choices=["local", "ray", "slurm"],
                   help="where cells run: in this process (local, the default), as Ray tasks, or as Slurm jobs "
                        "(submitit); ray/slurm need --out and a cache on a filesystem every node sees")
    p.add_argument("--executor-config", help="YAML with executor options (executor, shards, slurm: {partition, "
                                             "gpus_per_job, time_min, ...}, ray: {address, ...})")
    p.add_argument("--shards", type=int, help="encode each dense index as N shard jobs, merged into one index")
    p.add_argument("--partition", help="Slurm partition")
    p.add_argument("--gpus-per-job", type=float, help="GPUs for each job that runs a neural model")
    p.add_argument("--time", type=int, help="Slurm time limit per job, minutes")
    p.add_argument("--ray-address", help="an existing Ray cluster (auto, ray://head:10001); default: start one here")
    p.add_argument("--max-retries", type=int, help="resubmissions of a job whose process died (default 2)")
    p.add_argument("--resume", action="store_true",
                   help="resubmit only what an earlier submission to --out did not finish (see `irgrid status`)")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("status", help="progress of a grid run with --executor ray|slurm: cells, jobs, failures, logs")
    p.add_argument("out", help="the grid's --out folder")
    p.set_defaults(func=cmd_status)
    p = sub.add_parser("report", help="tables and figures of a stored grid (Table 2, A.3-A.7, Figure 1, Jaccard)")
    p.add_argument("out", help="an `irgrid run --out` folder")
    p.add_argument("--to", help="where to write (default OUT/report)")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples B (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument("--fraction", type=float, default=0.1, help="hard queries: the worst fraction (default 0.1)")
    p.add_argument("--reference", help="folder of the paper's tables as CSV (default: shipped with irgrid)")
    p.add_argument("--paper", action=argparse.BooleanOptionalAction, default=None,
                   help="the paper's tables and z-scores: --paper always, --no-paper never (default: only the tables "
                        "whose columns the grid's datasets fill)")
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("check", help="compare a grid with the expected scores next to its experiment; "
                                     "exit 1 on FAIL")
    p.add_argument("out", help="an `irgrid run --out` folder")
    p.add_argument("--expected", help="expected-scores YAML (default: EXPERIMENT.expected.yaml beside the experiment)")
    p.set_defaults(func=cmd_check)
    _qa_parser(sub)
    return parser


def _run_reporting_errors(args) -> int:
    """Run the command under the settings of the environment and the flags (built once; the environment is never
    edited). User errors and environment faults end in one `irgrid: error:` line (the traceback only with -v)."""
    import errno
    import os
    import traceback

    from irgrid.util import settings
    from irgrid.util.errors import Error

    def fail(message: str) -> int:
        if args.verbose:
            traceback.print_exc()
        print(f"irgrid: error: {message}", file=sys.stderr)
        return 2

    try:
        flags = {"cache": getattr(args, "cache", None), "tiny_models": getattr(args, "tiny_models", False) or None,
                 "verbose": args.verbose or None}
        with settings.using(settings.Settings.from_env(os.environ, **flags)):
            return args.func(args)
    except Error as e:  # every user-facing irgrid error derives from irgrid.Error
        return fail(str(e))
    except OSError as e:
        where = f" ({e.filename})" if e.filename else ""
        if e.errno == errno.ENOSPC:
            return fail(f"no space left on the device{_full_disk(e, args)}: free space or point --cache / --out "
                        f"elsewhere; nothing half-written is ever reused, rerun to continue")
        if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return fail(f"not allowed to write{where}: {e.strerror}; choose a writable --cache / --out")
        if e.errno == errno.ENOENT:
            return fail(f"{e.strerror}{where}: was the cache or output folder deleted while irgrid ran? "
                        f"Rerun; everything finished before is reused")
        raise


def _full_disk(e: OSError, args) -> str:
    """' of PATH (N MiB free)' for the full one of the paths a copy names: shutil puts the source first (a cache
    file when --out fills up), so the path is picked by its disk's free space, not by its position; a write that
    names no file is placed on the fuller of --out and --cache."""
    import shutil
    from pathlib import Path

    found = []
    names = [n for n in (e.filename, e.filename2) if n] or [getattr(args, "out", None), getattr(args, "cache", None)]
    for name in names:
        if not name:
            continue
        folder = Path(str(name))
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        try:
            found.append((shutil.disk_usage(folder).free, str(name)))
        except OSError:
            continue
    if not found:
        return ""
    free, name = min(found)
    return f" of {name} ({free / 2**20:.1f} MiB free)"


if __name__ == "__main__":
    sys.exit(main())
