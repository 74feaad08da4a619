"""Array backends: PyTorch for the float formats (simulated formats over a carrier dtype),
python-flint arb for ``mpN``."""

from __future__ import annotations

import functools

from precision.backends.base import Backend
from precision.precisions import Precision


@functools.cache
def backend_for(p: Precision) -> Backend:
    """The backend computing in ``p`` (float32, mp50, ...); one instance per precision."""
    if p.is_mp:
        from precision.backends.mp_backend import MPBackend

        return MPBackend(p)
    if p.is_simulated:
        from precision.formats.format_backend import FormatBackend

        return FormatBackend(p)
    from precision.backends.torch_backend import TorchBackend

    return TorchBackend(p)


__all__ = ["Backend", "backend_for"]
