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
