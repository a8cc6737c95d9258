"""Glue to index/search libraries that have no PyTerrier integration usable offline."""
