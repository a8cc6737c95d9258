"""The data layer's error: a dataset that cannot be found, read or trusted (its readers and the catalog raise it), or a malformed input file."""

from irgrid.util.errors import Error


class DatasetError(Error, RuntimeError):
    pass


class InputError(DatasetError, ValueError):
    """A local input file is malformed; the message names the file and the line."""
