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


@contextlib.contextmanager
def _library_bars_off() -> Iterator[None]:
    """Libraries' own progress bars off while irgrid works (unless verbose), as the CLI's silenced stderr has
    them: in a notebook they are widgets that bypass file descriptor 2, and a Python pipeline's transformer drew
    one `0/1 ... 1/1` bar per latency-sample query (153 in one `irgrid.run(..., extra=...)`, issue 41).
    PyTerrier's `pt.tqdm` (pyterrier-dr, -pisa, -alpha use it), transformers' and huggingface_hub's bars."""
    import functools
    import sys

    pt = sys.modules.get("pyterrier")
    saved_pt = getattr(pt, "tqdm", None) if pt is not None else None
    if saved_pt is not None:
        from tqdm.std import tqdm

        pt.tqdm = functools.partial(tqdm, disable=True)
    try:
        import huggingface_hub.utils as hub
    except ImportError:
        hub = None
    hub_off = hub.are_progress_bars_disabled() if hub is not None else True
    if hub is not None:
        hub.disable_progress_bars()
    tf = sys.modules.get("transformers.utils.logging")
    tf_active = getattr(tf, "_tqdm_active", None)
    if tf is not None:
        tf.disable_progress_bar()
    try:
        yield
    finally:
        if saved_pt is not None:
            pt.tqdm = saved_pt
        if hub is not None and not hub_off:
            hub.enable_progress_bars()
        tf_now = sys.modules.get("transformers.utils.logging")
        if tf_now is not None and (tf_active if tf is not None else not hub_off):
            tf_now.enable_progress_bar()  # as before the block (or as its import would have set it)


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
        with _library_bars_off():
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


# -- progress ----------------------------------------------------------------------------------------------------
PROGRESS_SECONDS = 10.0  # a non-terminal gets a progress line at most this often (IRGRID_PROGRESS_SECONDS)
_ACTIVE: list = []  # the builds under way in this process (their progress sinks), innermost last


def _progress_seconds() -> float:
    from irgrid.util.settings import variable  # settings sits beside console in util: imported when used

    raw = variable("IRGRID_PROGRESS_SECONDS")
    if raw is None or raw == "":
        return PROGRESS_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value < 0:
        from irgrid.util.settings import SettingsError

        raise SettingsError(f"IRGRID_PROGRESS_SECONDS must be a number of seconds >= 0, got {raw!r}")
    return value


def _is_terminal(stream) -> bool:
    """A terminal, or a Jupyter kernel's stream (it renders '\\r' in place as a terminal does); a log file or a
    pipe is neither: it gets plain lines, no carriage returns or cursor escapes."""
    try:
        if stream.isatty():
            return True
    except (AttributeError, ValueError):
        return False
    return type(stream).__module__.startswith("ipykernel")


def _eta(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


class Progress:
    """One pass over a corpus (an index build, a document stage), in documents, with rate and ETA.

    It counts the documents handed to the builder until the builder itself reports finished work (`advance`, per
    batch: the dense engine, SPLADE, impact encoders), then counts those: a reader runs ahead by a whole chunk
    (4,096 documents), so a bar fed by reading alone sat at 0% for the whole encoding of a small corpus and
    jumped at the end. In a terminal (or a notebook) a tqdm bar on one line; elsewhere (a log file) a plain line
    at most every `IRGRID_PROGRESS_SECONDS` (10 s), plus the first and the last, with no cursor escapes."""

    def __init__(self, total: int | None, desc: str, unit: str = "doc", stream=None):
        import threading
        import time

        self.total, self.desc, self.unit = total or None, desc, unit
        self.stream = stream or progress_stream()
        self.read = self.done = self.shown = 0
        self.reported = False  # a builder reports finished work: show that instead of reading
        self.started = self.last = time.perf_counter()
        self.every = _progress_seconds()
        self._lock = threading.Lock()
        self._bar = None
        if _is_terminal(self.stream):
            from tqdm.std import tqdm

            self._bar = tqdm(total=self.total, desc=desc, unit=unit, unit_scale=True, file=self.stream,
                             mininterval=0.5, leave=False, dynamic_ncols=True)
        else:
            self._line(f"{desc}: started" + (f", {self.total:,} {unit}s" if self.total else ""))

    def _line(self, text: str) -> None:
        try:
            self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed stream never fails the work it reports on
            pass

    def _show(self, count: int, final: bool = False) -> None:
        import time

        delta, self.shown = count - self.shown, count
        if self._bar is not None:
            if delta:
                self._bar.update(delta)
            return
        now = time.perf_counter()
        if not final and now - self.last < self.every:
            return
        self.last = now
        elapsed = max(now - self.started, 1e-9)
        rate = count / elapsed
        text = f"{self.desc}: {count:,}" + (f"/{self.total:,}" if self.total else "") + f" {self.unit}s"
        if self.total:
            text += f" ({100 * count / self.total:.0f}%)"
        text += f", {rate:,.1f} {self.unit}s/s"
        if final:
            text += f", done in {_eta(elapsed)}"
        elif self.total and rate > 0 and count < self.total:
            text += f", ~{_eta((self.total - count) / rate)} left"
        self._line(text)

    def on_read(self, n: int = 1) -> None:
        with self._lock:
            self.read += n
            if not self.reported:
                self._show(self.read)

    def advance(self, n: int) -> None:
        with self._lock:
            if not self.reported:  # from now on the bar follows finished work, from zero
                self.reported = True
                if self._bar is not None:
                    self._bar.reset(total=self.total)
                self.shown = 0
            self.done += n
            self._show(self.done)

    def close(self) -> None:
        with self._lock:
            count = self.done if self.reported else self.read
            if self._bar is not None:
                self._show(count)
                self._bar.close()
            elif count:
                self._show(count, final=True)

    @property
    def complete(self) -> bool:
        return self.total is not None and self.done >= self.total


@contextlib.contextmanager
def reporting(sink) -> Iterator[None]:
    """Route `advance(n)` calls made while a build runs (in this process, or in a child forked inside it) to `sink`
    (anything with `advance(n)`)."""
    _ACTIVE.append(sink)
    try:
        yield
    finally:
        if sink in _ACTIVE:
            _ACTIVE.remove(sink)


def advance(n: int) -> None:
    """A builder finished `n` more documents (one batch): moves the pass under way, if any (at query time there is
    none, and this does nothing)."""
    if _ACTIVE:
        _ACTIVE[-1].advance(n)
