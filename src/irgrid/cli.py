"""`irgrid` command line: list, datasets, resolve, run."""

from __future__ import annotations

import argparse
import csv
import io
import logging
import sys

from irgrid.registry import UnknownNameError


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


def cmd_list(args) -> int:
    from irgrid.retrievers import FAMILIES, RETRIEVERS

    entries = sorted(RETRIEVERS, key=lambda r: (FAMILIES.index(r.family), r.architecture, r.name))
    if args.family:
        entries = [r for r in entries if r.family == args.family]
    rows = [{
        "name": r.name, "family": r.family, "architecture": r.architecture,
        "checkpoints": " ".join(str(m) for m in r.all_models().values()) or "-",
        "index": r.index.name if r.index else "-",
        "options": " ".join(f"{k}={v}" for k, v in sorted(r.options.items())),
        "paper": r.paper_name or "-",
    } for r in entries]
    sys.stdout.write(_table(rows, args.format))
    return 0


def cmd_datasets(args) -> int:
    from irgrid.datasets import catalog

    rows = [{"name": d.name, "corpus": d.corpus, "fields": "+".join(d.fields),
             "drop_self_matches": str(d.drop_self_matches).lower(), "measures": " ".join(d.measures)}
            for d in catalog()]
    sys.stdout.write(_table(rows, args.format))
    return 0


def cmd_resolve(args) -> int:
    from irgrid.models import resolve
    from irgrid.retrievers import ModelRef

    r = resolve(ModelRef(args.model, args.revision))
    print(f"{r.ref}\t{r.source}\t{r.location}")
    return 0


def cmd_run(args) -> int:
    import os

    if args.cache:
        os.environ["IRGRID_CACHE"] = args.cache
    from irgrid.grid import run
    from irgrid.report import markdown_table

    results = run(args.experiment, out=args.out)
    sys.stdout.write(markdown_table(results))
    if args.out:
        print(f"\nwrote {args.out}/results.csv, perquery.csv, results.md, manifest.json, runs/")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="irgrid", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="the retriever registry (does not import torch)")
    p.add_argument("--format", choices=["table", "csv"], default="table")
    p.add_argument("--family")
    p.set_defaults(func=cmd_list)
    p = sub.add_parser("datasets", help="the dataset catalog and its policies")
    p.add_argument("--format", choices=["table", "csv"], default="table")
    p.set_defaults(func=cmd_datasets)
    p = sub.add_parser("resolve", help="where a model id would load from (mapping, package, HF cache, hub)")
    p.add_argument("model")
    p.add_argument("--revision")
    p.set_defaults(func=cmd_resolve)
    p = sub.add_parser("run", help="run an experiment YAML")
    p.add_argument("experiment")
    p.add_argument("--out", help="output folder (results.csv, perquery.csv, results.md, manifest.json, runs/)")
    p.add_argument("--cache", help="cache folder for indexes and runs (default IRGRID_CACHE or ~/.cache/irgrid)")
    p.set_defaults(func=cmd_run)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("irgrid").setLevel(logging.INFO if args.verbose or args.command == "run" else logging.WARNING)
    from irgrid.experiment import ExperimentError
    from irgrid.models import ModelUnavailableError

    try:
        return args.func(args)
    except (ExperimentError, UnknownNameError, ModelUnavailableError) as e:
        print(f"irgrid: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
