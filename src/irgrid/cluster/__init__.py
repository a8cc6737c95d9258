"""Grids as job graphs on Ray or Slurm: `config` (cluster.yaml and flags), `graph` (the jobs of a grid), `state`
(the grid state on disk, `irgrid status`), `tasks` (one job, where it runs), `executors` (the engines, `dispatch`),
`sharding` (a dense corpus encoding split into shards and merged)."""
