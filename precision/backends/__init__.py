"""Array backends: PyTorch for the float formats, python-flint arb for ``mpN``."""

from __future__ import annotations

import functools

from precision.backends.base import Backend
from precision.precisions import Precision, parse_precision


def backend_for(precision: Precision | str) -> Backend:
    """The backend computing in ``precision`` (``"float32"``, ``"mp50"``, ...); one instance
    per precision."""
    return _backend(parse_precision(precision))


@functools.cache
def _backend(p: Precision) -> Backend:
    if p.is_mp:
        from precision.backends.mp_backend import MPBackend

        return MPBackend(p)
    from precision.backends.torch_backend import TorchBackend

    return TorchBackend(p)


__all__ = ["Backend", "backend_for"]
