"""`irgrid --help` tells the truth: the commands its description names are the parser's subcommands, each with a
help line (it once named five of eight)."""

from __future__ import annotations

import re

import pytest

from irgrid.cli import main


def test_help_names_exactly_the_parsers_commands(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # argparse wraps to the terminal's width
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    # argparse renders the parser's subcommands itself, as {a,b,...} in the usage line
    commands = re.search(r"^usage: irgrid .*?\{([\w,-]+)\}", text, re.MULTILINE).group(1).split(",")
    described = re.search(r"command line: ([\w, -]+)\.", " ".join(text.split())).group(1).split(", ")
    assert described == commands, f"the description names {described}, the parser has {commands}"
    for command in commands:  # and each one says what it does
        assert re.search(rf"^    {command} +\S", text, re.MULTILINE), f"`{command}` has no help line"


def _subcommands(parser) -> dict:
    import argparse

    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_qa_help_names_exactly_its_subcommands(capsys, monkeypatch):
    """`irgrid qa run|replay|judges` are argparse subcommands (no hand-routed `qa replay` beside the parser): the
    help of `qa` lists the parser's own, each with a help line, and each one's help is its own parser's."""
    from irgrid.cli import build_parser

    monkeypatch.setenv("COLUMNS", "200")
    qa = _subcommands(build_parser())["qa"]
    expected = list(_subcommands(qa))
    assert expected == ["run", "replay", "judges"]
    with pytest.raises(SystemExit):
        main(["qa", "--help"])
    text = capsys.readouterr().out
    listed = re.search(r"^usage: irgrid qa .*?\{([\w,-]+)\}", text, re.MULTILINE).group(1).split(",")
    described = re.search(r"\(irgrid\.qa\): ([\w, -]+)\.", " ".join(text.split())).group(1).split(", ")
    assert listed == described == expected
    for command in expected:
        assert re.search(rf"^    {command} +\S", text, re.MULTILINE), f"`qa {command}` has no help line"
        with pytest.raises(SystemExit):
            main(["qa", command, "--help"])
        assert capsys.readouterr().out == _subcommands(qa)[command].format_help()


def test_the_judges_module_is_an_alias_of_qa_judges():
    """`python -m irgrid.qa.judges` takes exactly `irgrid qa judges`'s arguments (one definition)."""
    import argparse

    from irgrid.cli import build_parser
    from irgrid.qa.arguments import judges_arguments

    alias = argparse.ArgumentParser()
    judges_arguments(alias)
    judges = _subcommands(_subcommands(build_parser())["qa"])["judges"]
    options = lambda p: {s for a in p._actions for s in a.option_strings} | {a.dest for a in p._actions}  # noqa: E731
    assert options(alias) == options(judges) - {"--cache", "cache"}


def test_an_experiment_file_after_qa_still_runs_it(monkeypatch):
    """`irgrid qa EXP.yaml`, as written before `qa run` existed, is `irgrid qa run EXP.yaml`."""
    import irgrid.cli as cli

    seen = []
    monkeypatch.setattr(cli, "cmd_qa_run", lambda args: seen.append(args.experiment) or 0)
    assert main(["qa", "exp.yaml"]) == 0 and seen == ["exp.yaml"]
