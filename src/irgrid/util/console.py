"""Console output: irgrid's progress bars, and silencing what native libraries print unless verbose."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator

_QUIET = {"depth": 0, "stream": None}


def verbose() -> bool:
    """`irgrid -v` (IRGRID_VERBOSE=1): show libraries' own output (PISA percentages, JVM warnings, tracebacks)."""
    from irgrid.util import settings

    return settings.verbose()


def progress_stream():
    """Where irgrid's own progress bars go: the real stderr, also while native chatter is silenced."""
    import sys

    return _QUIET["stream"] or sys.stderr


@contextlib.contextmanager
def quiet_native(what: str) -> Iterator[None]:
    """Silence what native libraries write straight to file descriptor 2 (PISA's ~300 percentage lines, Java/
    Lucene warnings) unless verbose. Nothing is lost: irgrid's own log lines are passed through after the block,
    and on an error the captured tail is printed with `what` it belonged to. Python-level stderr (irgrid's
    progress bars) keeps going to the terminal through `progress_stream()`."""
    import logging
    import sys

    if verbose() or _QUIET["depth"]:  # verbose, or already inside a quiet block
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved, saved_out = os.dup(2), os.dup(1)
    capture = tempfile.TemporaryFile()
    os.dup2(capture.fileno(), 2)
    os.dup2(capture.fileno(), 1)  # PISA's spdlog writes its [info] lines to stdout
    _QUIET["depth"], _QUIET["stream"] = 1, os.fdopen(os.dup(saved), "w", buffering=1)
    failed = False
    try:
        yield
    except BaseException:
        failed = True
        raise
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.dup2(saved_out, 1)
        os.close(saved)
        os.close(saved_out)
        _QUIET["stream"].close()
        _QUIET["depth"], _QUIET["stream"] = 0, None
        capture.seek(0)
        lines = capture.read().decode("utf-8", "replace").splitlines()
        capture.close()
        ours = [line for line in lines if " irgrid " in line]
        for line in ours:
            print(line, file=sys.stderr)
        if failed and lines:
            logging.getLogger("irgrid").error("last output of %s (-v shows all of it):\n%s", what,
                                              "\n".join(lines[-15:]))
