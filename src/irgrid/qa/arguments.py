"""The arguments of `irgrid qa judges`, shared with its alias `python -m irgrid.qa.judges`: kept apart from
`irgrid.qa.judges` so building the CLI's parser imports neither numpy nor pandas."""

from __future__ import annotations

import argparse

SCORERS = ("lexical", "embedding", "hybrid")  # irgrid.qa.judges.SCORERS: the key-point scorers it validates


def judges_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("labels", help="oe_human_review.jsonl.gz of ../shared/datasets/disastqa-outputs (the "
                                       "authors' released gpt-4o-mini coverage labels)")
    parser.add_argument("--out", required=True, help="output folder (report.md, sweeps, cross-validation)")
    parser.add_argument("--scorers", default=",".join(SCORERS), help="comma-separated (default: all)")
    parser.add_argument("--questions", type=int, help="a fixed-seed sample of the 200 questions (embedding cost)")
