"""`irgrid.Error`: the one base of every error irgrid raises for its user to act on (a bad experiment file, an
unknown name, a dataset that is not staged, an unusable setting), so a script or the CLI catches them all at once.

It lives in the lowest layer so that every layer can derive from it. Each error keeps its builtin base as well
(`ValueError`, `KeyError`, `RuntimeError`, `TimeoutError`), so narrower `except` clauses written against those keep
working.
"""

from __future__ import annotations


class Error(Exception):
    """Base of every user-facing irgrid error; its message says what went wrong, where, and how to fix it."""
