"""Exceptions raised by operators: user errors (``graphs.errors.UserError``) with their details."""

from __future__ import annotations

from graphs.errors import InsufficientMemoryError, MemoryLimitError, UserError

__all__ = ["ConvergenceError", "InsufficientMemoryError", "MemoryLimitError", "UserError"]


class ConvergenceError(UserError, RuntimeError):
    """An iterative operator did not reach its tolerance within ``max_iter`` iterations.

    Attributes: ``algorithm``, ``iterations`` run, the last ``error`` and the ``threshold`` it had
    to fall below, and ``advice``: what to change (default: raise max_iter or tol).
    """

    def __init__(
        self, algorithm: str, iterations: int, error: float, threshold: float, advice: str | None = None
    ):
        self.algorithm = algorithm
        self.iterations = iterations
        self.error = error
        self.threshold = threshold
        self.advice = advice
        ran = f" in {iterations} iterations" if iterations < 2**62 else ""  # else: no limit was set
        super().__init__(
            f"{algorithm} did not converge{ran}: its error {error:.3g} has not reached the tolerance "
            f"{threshold:.3g}; {advice or 'raise max_iter or tol'}"
        )

    def __reduce__(self):  # survive pickling (errors raised on Dask workers travel back this way)
        return (type(self), (self.algorithm, self.iterations, self.error, self.threshold, self.advice))
