"""Exceptions raised by operators: user errors (``graphs.errors.UserError``) with their details."""

from __future__ import annotations

from graphs.errors import InsufficientMemoryError, MemoryLimitError, UserError

__all__ = ["ConvergenceError", "InsufficientMemoryError", "MemoryLimitError", "UserError"]


class ConvergenceError(UserError, RuntimeError):
    """An iterative operator did not reach its tolerance within ``max_iter`` iterations.

    Attributes: ``algorithm``, ``iterations`` run, the last ``error`` and the ``threshold`` it had
    to fall below.
    """

    def __init__(self, algorithm: str, iterations: int, error: float, threshold: float):
        self.algorithm = algorithm
        self.iterations = iterations
        self.error = error
        self.threshold = threshold
        super().__init__(
            f"{algorithm} did not converge in {iterations} iterations: its error {error:.3g} has not "
            f"reached the tolerance {threshold:.3g}; raise max_iter or tol"
        )

    def __reduce__(self):  # survive pickling (errors raised on Dask workers travel back this way)
        return (type(self), (self.algorithm, self.iterations, self.error, self.threshold))
