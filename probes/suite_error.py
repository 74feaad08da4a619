"""The error of a suite that cannot be found, parsed or run: its own module, free of torch,
so that the command line's parser and its name checks import it in milliseconds."""


class SuiteError(ValueError):
    """A suite that cannot be found, parsed or run (one line, for the CLI)."""
