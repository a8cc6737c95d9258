"""Infrastructure every layer uses and that knows nothing of retrieval: settings, errors, files and hashes, locks,
registries, console output, markdown tables, a memo and the strict YAML reader."""
