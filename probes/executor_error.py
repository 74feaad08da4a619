"""An executor's failure, in a module of its own so that the command line can catch it
without importing the executors (and torch) first."""


class ExecutorError(RuntimeError):
    """An executor that cannot start or keep going (one line for the CLI)."""
