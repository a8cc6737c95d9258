"""Grids as job graphs on Ray or Slurm, their state on disk, and dense encoding split into shards."""
