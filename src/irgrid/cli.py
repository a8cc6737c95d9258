"""`irgrid` command line: list, datasets, resolve, doctor, run, status, report, check, claims, diff, audit, card,
qa."""

from __future__ import annotations

import argparse
import csv
import io
import logging
import sys


def _table(rows: list[dict[str, str]], fmt: str, fit: bool = False) -> str:
    """Rows as CSV or an aligned text table. `fit`: the table is cut to the terminal's width (COLUMNS, else the
    terminal, else 160): the widest columns give way first and a cut cell ends with '…' (every value: csv)."""
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
    if fit:
        import shutil

        room = max(shutil.get_terminal_size((160, 24)).columns, 40) - 2 * (len(cols) - 1)
        floor = {c: widths[c] if i == 0 else min(widths[c], max(len(c), 8)) for i, c in enumerate(cols)}  # names whole
        while sum(widths.values()) > room:
            shrinkable = [c for c in cols if widths[c] > floor[c]]
            if not shrinkable:
                break
            widths[max(shrinkable, key=lambda c: widths[c])] -= 1

    def cell(value, c: str) -> str:
        text = str(value)
        return (text if len(text) <= widths[c] else text[:widths[c] - 1] + "…").ljust(widths[c])

    lines = ["  ".join(cell(c, c) for c in cols).rstrip(), "  ".join("-" * widths[c] for c in cols)]
    lines += ["  ".join(cell(r[c], c) for c in cols).rstrip() for r in rows]
    return "\n".join(lines) + "\n"


def entry_card(r) -> list[str]:
    """What one entry is, whatever its profiles say (issue 41: `irgrid list NAME` said only "No profile
    differences"): family, checkpoints with revisions, options with types and defaults, index recipe, the roles it
    can play in a pipeline, profiles, the paper's name, where its configuration comes from. Imports no torch."""
    import shutil
    import textwrap

    from irgrid.core.options import declared
    from irgrid.runner.scoring import rerank_only, scorer_factory

    def ref(m) -> str:
        return f"{m.id}" + (f" @ {m.revision}" if m.revision else " (no pinned revision)")

    knobs = declared(r.option_types)
    width = max(60, min(shutil.get_terminal_size((100, 24)).columns, 120))

    def knob(name: str, value) -> list[str]:
        option = knobs.get(name)
        typed = option.type_text() if option else type(value).__name__
        text = f"{name} = {_shown(value)} ({typed})" + (f": {option.description}" if option and option.description
                                                        else ": (undocumented)")
        return textwrap.wrap(text, width, initial_indent="    ", subsequent_indent="        ")

    lines = [f"{r.name}" + (f" (the paper's {r.paper_name})" if r.paper_name else " (not in the paper)")]
    lines.append(f"  family        {r.family}, architecture {r.architecture}" + (f"; installs with the extra "
                                                                               f"'{r.extra}'" if r.extra else ""))
    models = r.all_models()
    lines.append("  checkpoints   " + ("none (no model weights)" if not models else
                                       "; ".join(f"{role}: {ref(m)}" for role, m in models.items())))
    options = [line for k, v in sorted(r.options.items()) if k != "query_config" for line in knob(k, v)]
    lines += ["  options" + ("" if options else "       none"), *options]
    if r.index is not None:
        params = ", ".join(f"{k}={v}" for k, v in sorted(r.index.params.items()) if k != "doc")
        stage = f"; document stage {r.index.stage.name} first" if r.index.stage is not None else ""
        lines.append(f"  index recipe  {r.index.name}" + (f" ({params})" if params else "") + stage
                     + f" [built by {getattr(r.index.build, '__name__', '?')}]")
    else:
        lines.append("  index recipe  none (it re-ranks what it is given)")
    roles = []
    if r.index is not None and not rerank_only(r):
        roles.append("first stage (`irgrid.retriever(name).retriever(ds)`, a bare name in an expression)")
    if scorer_factory(r) is not None:
        roles.append("scorer of given candidates (`.scorer(ds)`, right of `>>`)")
    if r.index is not None:
        roles.append("indexer (`.indexer(ds)`)")
    lines.append("  roles         " + "; ".join(roles))
    lines.append("  profiles      " + (", ".join(sorted(r.profiles)) or "none") + "  (`irgrid list NAME --profiles`"
                 ": paper vs card, with sources)")
    if r.reference:
        lines.append(f"  reference     {r.reference}")
    return lines


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
        return {**r.profiles, "paper": for_entry("paper", r.profiles["paper"], r.options),
                "card": for_entry("card", r.profiles.get("card", {}), r.options)}

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


def doctor_rows(entries) -> list[dict[str, str]]:
    """One row per (retriever, checkpoint role): what loading the real checkpoint needs (irgrid.core.needs, declared by
    the entries) and whether this machine has it. GPU memory: weights in the entry's dtype plus one layer's
    activations at the release's batch size and the entry's document length (an estimate, not a measurement)."""
    from irgrid.core import needs as needs_mod
    from irgrid.models.resolver import find_remote_code

    rows = []
    for r in entries:
        opts = r.keyed_options()
        spec = getattr(r, "encoder", None)
        dtype = str(getattr(spec, "dtype", None) or opts.get("dtype") or "fp32")  # sparse encoders: fp32
        length = int(getattr(spec, "doc_max_length", 0) or (opts.get("max_length") if isinstance(
            opts.get("max_length"), int) else 512))
        if not r.all_models():
            rows.append({"retriever": r.name, "role": "-", "checkpoint": "-", "remote_code": "no", "transformers": "-",
                         "packages": "-", "gated": "no", "vram_gib": "0 (no neural model)", "status": "ok"})
        for role, ref in sorted(r.all_models().items()):
            n = needs_mod.of(ref.id)
            # an encoder's checkpoints run in the entry's dtype; a generator (doc2query, query2doc, HyDE) in bf16
            encoder_role = role != "generator"
            role_dtype = dtype if encoder_role else "bf16"
            if n is None:
                rows.append({"retriever": r.name, "role": role, "checkpoint": str(ref), "remote_code": "?",
                             "transformers": "?", "packages": "?", "gated": "?", "vram_gib": "?",
                             "status": "no declaration (pipelines/checkpoints.py)"})
                continue
            batch = n.paper_batch or int(opts.get("batch_size") or 32)
            missing = needs_mod.problems(ref.id, find_remote_code)
            rows.append({
                "retriever": r.name, "role": role, "checkpoint": str(ref),
                "remote_code": ", ".join(n.remote_code) or "no",
                "transformers": n.transformers or "-",
                "packages": ", ".join(n.packages) or "-",
                "gated": n.gated or "no",
                "vram_gib": f"{n.vram_gib(role_dtype, batch, length):.1f} ({role_dtype}, batch {batch}, {length} tok)",
                "status": "ok" if not missing else "MISSING: " + "; ".join(missing),
            })
    return rows


def cmd_doctor(args) -> int:
    """`irgrid doctor EXP.yaml | NAME...`: the loading needs of every checkpoint the targets use (no torch)."""
    from pathlib import Path

    from irgrid.core.profiles import check_name
    from irgrid.core.retrievers import get

    entries = []
    for target in args.targets:
        if target.endswith((".yaml", ".yml")) or Path(target).is_file():
            from irgrid.runner.experiment import load

            if args.profile:
                print(f"irgrid: error: --profile applies to retriever names; {target} sets its own profile "
                      f"(`profile:` in the file)", file=sys.stderr)
                return 2
            entries += list(load(target).retrievers)
        else:
            entries.append(get(target).with_profile(check_name(args.profile or "paper")))
    rows = doctor_rows(entries)
    sys.stdout.write(_table(rows, args.format))
    bad = sorted({r["checkpoint"] for r in rows if r["status"] != "ok"})
    print(f"\n{len(rows)} checkpoint role(s) of {len(entries)} retriever(s): "
          + ("everything declared is here" if not bad else f"{len(bad)} checkpoint(s) need something: "
             + ", ".join(bad)))
    return 1 if bad else 0


def cmd_list(args) -> int:
    from irgrid.core.retrievers import FAMILIES, RETRIEVERS, get

    if args.name and args.check:
        return cmd_fidelity([get(args.name)], args.format)
    if args.name:
        if args.format == "table":  # what the entry is, then its profiles side by side
            entry = get(args.name)
            print("\n".join(entry_card(entry)))
            if not entry.profiles:
                return 0
            print()
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
    sys.stdout.write(_table(rows, args.format, fit=True))
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

    here = not args.catalog_only
    rows = [{"id": d.name, "group": d.group,
             **({"staged": staged(d), "qrels": {True: "yes", False: "none ‡", None: "?"}[has_qrels(d)]} if here else {}), "measures": " ".join(d.measures), "policies": policies(d),
             "conventions": " ".join(conventions_of(d.name)) or "-",
             "queries": n(d.counts.queries), "docs": n(d.counts.docs), "counts_source": d.counts.source or "-",
             "ir_datasets": d.irds_id, "corpus": d.corpus} for d in entries]
    sys.stdout.write(_table(rows, args.format))
    if args.format == "table" and here:
        print("\nstaged: the corpus's documents are on this machine (IRGRID_IRDS_STAGED, the cache or "
              "IRGRID_SHARED); `irgrid run EXP --dry-run` says where to stage the others.")
        if any(r["qrels"] != "yes" for r in rows):
            print("‡ no relevance judgements under this id (a corpus of several splits): name a split with qrels "
                  "in `datasets:` (e.g. beir/fiqa/test).")
    return 0


def staged(d) -> str:
    """'yes' when the dataset's documents are here (read without downloading anything), else 'no'."""
    try:
        return "yes" if d.docs_available()[0] else "no"
    except Exception:  # noqa: BLE001  (a listing never fails on one dataset: its data is simply not here)
        return "no"


def has_qrels(d) -> bool | None:
    """Whether the id has relevance judgements (ir_datasets' registry; None: unknown until its data is staged)."""
    from irgrid.data.datasets import ensure_irds_home

    ensure_irds_home()
    import ir_datasets

    if d.irds_id in ir_datasets.registry:
        return bool(ir_datasets.registry[d.irds_id].has_qrels())
    try:
        return bool(d.irds().has_qrels())
    except Exception:  # noqa: BLE001  (an irgrid-built dataset whose files are not staged: unknown, not 'none')
        return None


def cmd_resolve(args) -> int:
    from irgrid.core.modelref import ModelRef
    from irgrid.models.resolver import resolve

    # where it would load from: a question, so nothing is made (SmolLM2's GGUF was dequantised: 25 s, three bars)
    r = resolve(ModelRef(args.model, args.revision), check_only=True)
    print(f"{r.ref}\t{r.source}\t{r.location}")
    return 0


def cmd_run(args) -> int:
    import os

    from irgrid.util import settings

    settings.device()  # an accelerator asked for (IRGRID_DEVICE) is checked once, before any work
    if settings.tiny_models():
        print("irgrid: TINY-MODEL MODE: every checkpoint with a declared architecture is a tiny random-weight model;"
              " these numbers check wiring only and are not results", file=sys.stderr)
    from irgrid.grid import run
    from irgrid.runner.experiment import load
    from irgrid.runner.outputs import markdown_table
    from irgrid.store import current as current_store

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

        the_plan = planning.make_plan(spec, current_store())
        sys.stdout.write(planning.format_csv(the_plan) if args.format == "csv"
                         else planning.format_summary(the_plan, str(args.experiment)))
        if args.format != "csv":  # what the grid can resolve, from runs already cached (a pilot)
            from irgrid.runner import limits

            lines = limits.pilot_mdes(spec, current_store())
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
        timings, summary = latency.measure(spec, current_store(), rounds=args.latency_rounds, queries=args.latency_queries,
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
                           fraction=args.fraction, reference=args.reference, paper=args.paper,
                           vector=args.vector_figures, figures=args.figures)
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


def cmd_claims(args) -> int:
    """`irgrid claims OUT`: the claims of the grid's experiment (or of --claims FILE) checked on its numbers."""
    from pathlib import Path

    from irgrid.report import claims

    verdicts, where = claims.run(args.out, args.claims, args.bootstrap, args.seed)
    if args.zero_shot:  # the same claims on the cells known to be zero-shot only, and the groups' aggregates twice
        zero, _ = claims.run(args.out, args.claims, args.bootstrap, args.seed, zero_shot=True)
        text = claims.zero_shot_report(args.out, verdicts, zero, where, args.format)
    else:
        text = claims.to_json(verdicts) if args.format == "json" else claims.to_markdown(verdicts, where)
    if args.to:
        Path(args.to).write_text(text)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0


def cmd_diff(args) -> int:
    """`irgrid diff A B`: changed claim verdicts, significance marks, rank orders, best systems and cells beyond
    their bootstrap SE; exit 1 when a claim's verdict changed."""
    from pathlib import Path

    from irgrid.report import diff

    result = diff.run(args.a, args.b, args.claims, args.bootstrap, args.seed)
    md, js = diff.to_markdown(result), diff.to_json(result)
    if args.to:
        Path(args.to).mkdir(parents=True, exist_ok=True)
        Path(args.to, "diff.md").write_text(md)
        Path(args.to, "diff.json").write_text(js + "\n")
    sys.stdout.write(js + "\n" if args.format == "json" else md)
    return 1 if result.changed_claims else 0


def cmd_audit(args) -> int:
    """`irgrid audit EXP.yaml --stability`: batch, order and cache invariance of the experiment's neural cells
    (irgrid.report.stability); exit 1 when a difference exceeds its bound."""
    from pathlib import Path

    from irgrid.report import stability

    if not args.stability:
        print("irgrid: error: name the audit to run: --stability (batch, order and cache invariance)",
              file=sys.stderr)
        return 2
    try:
        sizes = tuple(int(x) for x in args.batch_sizes.split(","))
    except ValueError:
        print(f"irgrid: error: --batch-sizes takes whole numbers separated by commas (e.g. 1,32,256), got "
              f"{args.batch_sizes!r}", file=sys.stderr)
        return 2
    if any(b < 1 for b in sizes):
        print(f"irgrid: error: --batch-sizes takes whole numbers >= 1, got {args.batch_sizes!r}", file=sys.stderr)
        return 2
    from irgrid.util import settings

    if args.score_bound is None:  # exact batches: identical; padded (default): fp32 rounding of the padding
        args.score_bound = 0.0 if settings.exact_batches() else stability.PADDED_SCORE_BOUND
    if args.score_bound < 0:
        print(f"irgrid: error: --score-bound must be >= 0, got {args.score_bound:g}", file=sys.stderr)
        return 2
    plan = stability.Plan(str(args.experiment), args.cells, args.queries, args.seed, tuple(args.cell or ()))
    chosen = plan.spec()  # every error in the choice of cells before any work
    out = Path(args.out or f"{chosen.name}-stability")
    rows = stability.audit(plan, out / "caches", batch_sizes=sizes, score_bound=args.score_bound,
                           n_resamples=args.bootstrap, keep=args.keep_caches)
    meta = {"experiment": str(args.experiment), "cells": [r.name for r in chosen.retrievers],
            "datasets": [d.name for d in chosen.datasets], "batch_sizes": list(sizes), "seed": args.seed,
            "score_bound": args.score_bound, "bootstrap": args.bootstrap}
    written = stability.write(rows, out, meta)
    sys.stdout.write(_table(stability.table(rows), args.format))
    bad = stability.exceeded(rows)
    print(f"\nbounds: fp32 variants identical (|dscore| <= {args.score_bound:g}, no top-10 flip, no document "
          f"changed, dmeasure = 0); reduced precision |dmeasure| <= {stability.REDUCED_PRECISION_SE:g} bootstrap SE")
    print(f"wrote {', '.join(str(p) for p in written)}")
    if len(bad):
        print(f"{len(bad)} row(s) EXCEED their bound: " + "; ".join(
            f"{r.system} on {r.dataset} ({r.variant}, {r.measure})" for r in bad.itertuples()), file=sys.stderr)
    return 1 if len(bad) else 0


def cmd_card(args) -> int:
    """`irgrid card OUT [--against EARLIER]`: the reproduction card (irgrid.report.repro)."""
    from irgrid.report import repro
    from irgrid.report.stored import load

    grid = load(args.out)
    if args.against:
        card = repro.run_card(load(args.against), grid, depth=args.depth)
        title = f"{args.out} as a reproduction of {args.against}: ER and ΔRI against each grid's baseline, RMSE, KTU, RBO"
    else:
        card = repro.published_card(grid, args.reference)
        title = f"{args.out}: ER and ΔRI against the paper's published means (baseline BM25)"
    sys.stdout.write(card.to_csv(index=False) if args.format == "csv" else repro.to_markdown(card, title))
    return 0


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
    logging.getLogger("irgrid").setLevel(logging.INFO if args.verbose or args.command in ("run", "audit") else logging.WARNING)
    return _run_reporting_errors(args)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line (tests compare `--help` with it)."""
    parser = argparse.ArgumentParser(prog="irgrid", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="libraries' own output (PISA, JVM, ir_datasets) and tracebacks (as IRGRID_VERBOSE=1)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="the retriever registry (does not import torch); `list NAME`: what that entry "
                                    "is, then its paper vs card profile differences with their sources")
    p.add_argument("name", nargs="?", help="one entry: family, checkpoints and revisions, options with types and "
                                           "defaults, index recipe, roles, paper name; then its profile differences "
                                           "(paper vs card) and sources")
    p.add_argument("--format", choices=["table", "csv", "markdown"], default="table",
                   help="markdown: profile differences only, one table per entry")
    p.add_argument("--family")
    p.add_argument("--profiles", action="store_true",
                   help="every listed entry's profile differences (paper vs card), side by side with sources")
    p.add_argument("--check", action="store_true",
                   help="with --profiles: per entry, the paper-code commit its paper settings cite and any setting "
                        "that cites none (exit 1 if so)")
    p.set_defaults(func=cmd_list)
    p = sub.add_parser("datasets", help="the dataset catalog: id, group, whether it is staged here, qrels, measures, "
                                        "policies, counts")
    p.add_argument("--format", choices=["table", "csv"], default="table")
    p.add_argument("--group", help="only one group (msmarco, beir, lotte, instructir, followir, byo, other)")
    p.add_argument("--catalog-only", action="store_true",
                   help="only what the catalog declares: no staged and qrels columns (reads no data; the docs' table)")
    p.set_defaults(func=cmd_datasets)
    p = sub.add_parser("resolve", help="where a model id would load from (mapping, package, HF cache, hub)")
    p.add_argument("model")
    p.add_argument("--revision")
    p.set_defaults(func=cmd_resolve)
    p = sub.add_parser("doctor", help="what loading each real checkpoint needs: remote code, the transformers it was "
                                      "written for, extra packages, licence gates, GPU memory at the paper's batch "
                                      "size; exit 1 if something is missing here")
    p.add_argument("targets", nargs="+", help="an experiment YAML (its retrievers, under its profile) or retriever names")
    p.add_argument("--profile", choices=["paper", "card"],
                   help="profile for retriever names (default paper); an experiment file's own profile otherwise")
    p.add_argument("--format", choices=["table", "csv"], default="table")
    p.set_defaults(func=cmd_doctor)
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
    p.add_argument("--vector-figures", action="store_true",
                   help="every figure also as SVG and PDF, for papers (PNG only by default: faster)")
    p.add_argument("--figures", action=argparse.BooleanOptionalAction, default=True,
                   help="--no-figures: tables and text only, for a quick look at a big grid (a paper-sized one "
                        "draws ~70 figures)")
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("check", help="compare a grid with the expected scores next to its experiment; "
                                     "exit 1 on FAIL")
    p.add_argument("out", help="an `irgrid run --out` folder")
    p.add_argument("--expected", help="expected-scores YAML (default: EXPERIMENT.expected.yaml beside the experiment)")
    p.set_defaults(func=cmd_check)
    p = sub.add_parser("claims", help="check an experiment's claims on a stored grid: supported / contradicted / "
                                      "inconclusive, effect, CI, p, n, missing cells")
    p.add_argument("out", help="an `irgrid run --out` folder")
    p.add_argument("--claims", help="a YAML with a `claims:` block (default: the experiment the grid recorded), e.g. "
                                    "experiments/paper.yaml")
    p.add_argument("--format", choices=["markdown", "json"], default="markdown")
    p.add_argument("--to", help="also write the output to this file")
    p.add_argument("--zero-shot", action="store_true",
                   help="also check every claim on zero-shot cells only (each retriever's training collections, "
                        "sourced), and show the paper's group aggregates over all cells and zero-shot cells")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for CIs (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.set_defaults(func=cmd_claims)
    p = sub.add_parser("diff", help="what changed between two stored grids: claim verdicts, significance marks, "
                                    "rank orders, best systems, cells beyond their SE; exit 1 if a claim changed")
    p.add_argument("a", help="the first `irgrid run --out` folder (before)")
    p.add_argument("b", help="the second (after)")
    p.add_argument("--claims", help="a YAML with a `claims:` block (default: the experiment A, else B, recorded)")
    p.add_argument("--format", choices=["markdown", "json"], default="markdown")
    p.add_argument("--to", help="also write diff.md and diff.json into this folder")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for SEs and CIs (default 1000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.set_defaults(func=cmd_diff)
    p = sub.add_parser("audit", help="audits of an experiment: --stability re-runs sampled neural cells with batch "
                                     "sizes 1, 32, 256, shuffled input order, cold and warm caches (and fp32 vs "
                                     "bf16/fp16 on a GPU); exit 1 when a difference exceeds its bound")
    p.add_argument("experiment", help="an experiment YAML")
    p.add_argument("--stability", action="store_true",
                   help="batch, order and cache invariance: per cell max |dscore|, top-10 rank flips, dmeasure and "
                        "dmeasure / bootstrap SE")
    p.add_argument("--cells", type=int, help="a seeded sample of N neural cells (default: all of them)")
    p.add_argument("--cell", action="append", help="audit this retriever (repeatable; default: every neural cell)")
    p.add_argument("--queries", type=int, help="a seeded sample of N queries per dataset (default: all)")
    p.add_argument("--seed", type=int, default=0, help="seed of the samples, the shuffled order and the bootstrap")
    p.add_argument("--batch-sizes", default="1,32,256", help="encoder batch sizes to compare (default 1,32,256)")
    p.add_argument("--score-bound", type=float, default=None,
                   help="largest |dscore| accepted in fp32 variants (default: 0 with IRGRID_EXACT_BATCHES=1, "
                        "identical scores; else 1e-6, the fp32 rounding of padded batches)")
    p.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples for the SEs (default 1000)")
    p.add_argument("--out", help="where stability.csv and stability.json go (default EXPERIMENT-stability)")
    p.add_argument("--keep-caches", action="store_true", help="keep the variants' caches under OUT/caches")
    p.add_argument("--format", choices=["table", "csv"], default="table")
    p.set_defaults(func=cmd_audit)
    p = sub.add_parser("card", help="the reproduction card: ER and ΔRI against the paper's published means, or with "
                                    "--against an earlier grid also KTU, RBO, RMSE (repro_eval's definitions)")
    p.add_argument("out", help="an `irgrid run --out` folder (the reproduction)")
    p.add_argument("--against", help="an earlier `irgrid run --out` folder (the original) to compare run by run")
    p.add_argument("--depth", type=int, default=1000, help="ranks compared by KTU and RBO (default 1000)")
    p.add_argument("--reference", help="folder of the paper's tables as CSV (default: shipped with irgrid)")
    p.add_argument("--format", choices=["markdown", "csv"], default="markdown")
    p.set_defaults(func=cmd_card)
    _qa_parser(sub)
    return parser


def _run_reporting_errors(args) -> int:
    """Run the command under the settings of the environment and the flags (built once; the environment is never
    edited). User errors and environment faults end in one `irgrid: error:` line (the traceback only with -v)."""
    import errno
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
        with settings.using(settings.Settings.from_env(None, **flags)):
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
