"""The solvers' user error, in a module of its own so that the command line can catch it
without importing the solvers (and torch) first."""


class SolverError(ValueError):
    """Unknown solver, bad parameter or impossible problem (a user error, not a result)."""
