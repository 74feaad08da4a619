"""Where training and float evaluation run: ``"cpu"`` (the default) or a CUDA device.

Only trained runs use a device: the Adam and Levenberg-Marquardt phases and the float
evaluation of the trained weights run there; data are drawn on the CPU from the seeded
generator and copied over (the same batches on every device), and arbitrary-precision
evaluation (the graph interpreter) always runs on the CPU. A device is where a number was
computed, like the CPU's kernels, so it is recorded in a run's provenance and is not part of
its id: a suite run on a GPU writes the same run ids as on the CPU, with its own float digits.
"""

from __future__ import annotations

import re

import torch

#: Accepted spellings: ``cpu``, ``cuda``, ``cuda:N``.
DEVICE_NAME = re.compile(r"cpu|cuda(:[0-9]{1,3})?")  # ASCII digits only


class DeviceError(ValueError):
    """A device that is not spelled right or not available here (one line, for the CLI)."""


def resolve_device(name: str) -> torch.device:
    """The torch device ``name`` names, checked to exist on this machine (else DeviceError)."""
    if not isinstance(name, str) or not DEVICE_NAME.fullmatch(name):
        raise DeviceError(f"unknown device {name!r} (choose cpu, cuda or cuda:N)")
    device = torch.device(name)
    if device.type == "cuda":
        # device_count asks NVML where it can, which leaves CUDA uninitialised in this process:
        # the worker processes forked after this check can still use the GPU
        if torch.cuda.device_count() == 0:
            raise DeviceError(f"device '{name}' is not available here (this torch "
                              f"{torch.__version__} sees no CUDA device); use --device cpu")
        index = int(name.partition(":")[2] or 0)   # torch.device keeps the index in 8 bits
        if index >= torch.cuda.device_count():
            raise DeviceError(f"device '{name}' is not available here (CUDA devices: "
                              f"{torch.cuda.device_count()})")
    return device


def describe_device(name: str) -> str:
    """``cuda:0 (NVIDIA H100 80GB HBM3, CUDA 12.8)`` for a CUDA device, ``cpu`` for the CPU."""
    device = torch.device(name)
    if device.type != "cuda":
        return "cpu"
    index = device.index or 0
    return f"cuda:{index} ({torch.cuda.get_device_name(index)}, CUDA {torch.version.cuda})"
