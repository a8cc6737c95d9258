"""Entry discovery: the packages whose modules register retriever, encoder and scorer entries when imported.

Entries sit above every engine layer (they wire backends together), so registries below them load them by
name, as plugins, on first lookup; `ENTRY_PACKAGES` is the one list of where entries live.
"""

from __future__ import annotations

import importlib

ENTRY_PACKAGES: tuple[str, ...] = ("irgrid.pipelines",)


def load() -> None:
    """Import every entry package (idempotent: Python imports a module once)."""
    for name in ENTRY_PACKAGES:
        importlib.import_module(name)
