"""The data layer's error: a dataset that cannot be found, read or trusted (loaders and the catalog raise it)."""

from irgrid.core.errors import Error


class DatasetError(Error, RuntimeError):
    pass
