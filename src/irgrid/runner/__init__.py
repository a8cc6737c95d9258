"""Running one cell: experiment files, pipeline expressions, index building, cached runs and grid outputs."""
