"""irgrid's progress (irgrid.util.console.Progress): in a log file plain lines that move per finished batch, with
documents/s, and no carriage returns or cursor escapes (issue 41: a dense build of a corpus smaller than one
4,096-document chunk sat at 0% for its whole encoding, and a log file got two lines with `[A` escapes)."""

from __future__ import annotations

import io
import re

import pytest

from irgrid.util import console


def test_a_log_file_gets_plain_lines_that_follow_each_finished_batch(monkeypatch):
    monkeypatch.setenv("IRGRID_PROGRESS_SECONDS", "0")  # a line per update (default: at most one per 10 s)
    log = io.StringIO()  # not a terminal
    bar = console.Progress(1400, "indexing my-collection (dense)", stream=log)
    with console.reporting(bar):
        bar.on_read(1400)  # the reader hands the whole (small) corpus over at once, before any encoding
        for _ in range(1400 // 64):
            console.advance(64)  # what the dense engine reports after each batch
        console.advance(1400 % 64)
    bar.close()
    console.advance(10)  # after the build: nobody listens (query-time encoding), nothing is written
    text = log.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    assert lines[0] == "indexing my-collection (dense): started, 1,400 docs"
    counts = [int(m.group(1).replace(",", "")) for m in (re.search(r": ([\d,]+)/1,400 docs", x) for x in lines) if m]
    # reading all 1,400 shows once; then the count restarts and follows the batches: 64, 128, ... 1,400
    assert counts[0] == 1400 and counts[1:] == [*range(64, 1400, 64), 1400, 1400]
    assert all(re.search(r"[\d.,]+ docs/s", x) for x in lines[1:])
    assert "left" in lines[2] and "done in" in lines[-1]


def test_a_log_file_gets_at_most_one_line_per_interval(monkeypatch):
    monkeypatch.delenv("IRGRID_PROGRESS_SECONDS", raising=False)
    log = io.StringIO()
    bar = console.Progress(10_000, "indexing x", stream=log)
    for _ in range(100):
        bar.advance(100)
    bar.close()
    assert len(log.getvalue().splitlines()) == 2  # started, done (all of it within 10 s)


def test_a_bad_interval_is_one_clear_error(monkeypatch):
    from irgrid.util.settings import SettingsError

    monkeypatch.setenv("IRGRID_PROGRESS_SECONDS", "soon")
    with pytest.raises(SettingsError, match="IRGRID_PROGRESS_SECONDS must be a number of seconds"):
        console.Progress(10, "x", stream=io.StringIO())
