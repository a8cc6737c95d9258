"""Analyses and reports of a stored grid: bootstrap errors, z-scores, failure overlap, tables, figures, checks."""
