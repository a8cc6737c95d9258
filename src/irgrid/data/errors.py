"""The data layer's error: a dataset that cannot be found, read or trusted (its readers and the catalog raise it), or a malformed input file."""

from irgrid.util.errors import Error


class DatasetError(Error, RuntimeError):
    pass


class InputError(DatasetError, ValueError):
    """A local input file is malformed; the message names the file and the line."""


class CandidateError(Error, KeyError):
    """A stage got candidate documents its corpus or index does not hold (a first stage over another corpus);
    raised by the re-ranking stages of irgrid.runner.stages and irgrid.dense.scorers."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])
