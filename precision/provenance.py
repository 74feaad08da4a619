"""Where a number was computed: the facts that change float digits from machine to machine.

Float32 / float64 floors are samples of rounding processes whose summation order depends on
the CPU kernels PyTorch dispatches to (AVX-512, AVX2 or the default path), on the BLAS (MKL or
OpenBLAS, and MKL's conditional-numerical-reproducibility mode) and on the thread count.
Every stored run records them, so a reader can tell a kernel difference from a code change.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import platform
import re
import subprocess
from pathlib import Path
from typing import Any

#: Environment variables that select kernels or BLAS paths (recorded when set).
KERNEL_ENV = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "OMP_NUM_THREADS",
              "MKL_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS")


def _blas(config: str) -> str:
    """The BLAS named in ``torch.__config__.show()`` (first match), or "unknown"."""
    m = re.search(r"Math Kernel Library Version ([\d.]+)", config)
    if m:
        return f"MKL {m.group(1)}"
    m = re.search(r"OpenBLAS[ \w.]*|BLAS_INFO=(\w+)", config)
    if m:
        return (m.group(1) or m.group(0)).strip()
    return "unknown"


#: The code a sweep's driver started with, given to its workers (:func:`pin_code_version`).
_PINNED: list[str] = []


def pin_code_version(code: str) -> None:
    """Record ``code`` as this process's :func:`code_version`: a sweep's worker says the code
    its driver started with, not the checkout's state when the worker first asks (a commit
    made during a long sweep was named by the records computed after it)."""
    _PINNED[:] = [code]


def code_version() -> str:
    """The toolkit's code: ``git <commit>`` (``+changes`` when tracked files differ from it)
    when it runs from a git checkout, else ``precision <version>`` of the installed
    package; read once per process (a sweep reads it when it starts), or as pinned."""
    return _PINNED[0] if _PINNED else _code_version()


@functools.cache
def _code_version() -> str:
    root = Path(__file__).resolve().parents[1]
    if (root / ".git").exists():
        try:
            head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root,
                                  capture_output=True, text=True, timeout=10, check=True)
            dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                                   cwd=root, capture_output=True, text=True, timeout=10)
            return f"git {head.stdout.strip()}" + ("+changes" if dirty.stdout.strip() else "")
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        return f"precision {importlib.metadata.version('precision')}"
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@functools.cache
def _static() -> dict[str, Any]:
    import flint
    import numpy
    import torch

    return {
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "blas": _blas(torch.__config__.show()),
        "numpy": numpy.__version__,
        "python_flint": getattr(flint, "__version__", "unknown"),
        "machine": platform.machine(),
        "python": platform.python_version(),
    }


def provenance(device: str = "cpu") -> dict[str, Any]:
    """Versions, CPU capability, BLAS, thread count and kernel-selecting environment of this
    process (a JSON-safe dict; the thread count is read now, the rest once per process), and
    the accelerator a run used (``device``, recorded when it is not the CPU)."""
    import torch

    from precision.devices import describe_device

    env = {k: os.environ[k] for k in KERNEL_ENV if k in os.environ}
    return {**_static(), "code": code_version(), "threads": torch.get_num_threads(),
            **({"env": env} if env else {}),
            **({"device": describe_device(device)} if device != "cpu" else {})}


def provenance_line(p: dict[str, Any]) -> str:
    """One line for reports: ``torch 2.13.0, AVX512, MKL ..., 1 thread, code git abc`` (and
    the device a run trained on, last)."""
    threads = p.get("threads")
    parts = [f"torch {p.get('torch', '?')}", str(p.get("cpu_capability", "?")),
             str(p.get("blas", "?")),
             f"{threads} thread{'s' if threads != 1 else ''}" if threads is not None else ""]
    env = p.get("env") or {}
    parts += [f"{k}={v}" for k, v in sorted(env.items())]
    if p.get("code"):
        parts.append(f"code {p['code']}")
    if p.get("trained_by") and p.get("trained_by") != p.get("code"):
        parts.append(f"weights trained by code {p['trained_by']}")
    if p.get("device"):
        parts.append(f"trained on {p['device']}")
    return ", ".join(x for x in parts if x)
