"""Bi-encoder and late-interaction retrieval: encoder specs, the encoding engine, entries and exact search."""
