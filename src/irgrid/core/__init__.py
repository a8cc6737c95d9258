"""Pure data and primitives, no heavy imports: registries, cache-key hashing, atomic files, settings, locks,
YAML loading, and the declarative retriever entry schema (`irgrid list` imports only this layer)."""
