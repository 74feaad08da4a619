"""Checkpoints of a training in progress, so that a long run goes on where it stopped.

``precision run SUITE --checkpoints DIR`` makes every trained job save its state to
``DIR/<job id>.ckpt.safetensors`` every :data:`CHECKPOINT_EVERY` seconds of training, at
the end of its Adam phase, and when training is over (with the training result, so that the
evaluation after training can be killed without losing the training; the file is deleted
when the job's records are made, just before the driver stores them). A run that was
killed, interrupted or paused starts from that state the next time the same command runs.
``--slice SECONDS`` pauses every training still going SECONDS after the command started (GPU
time comes in slices of minutes): its state is saved, nothing is stored for it, and
re-running the command goes on.

What is saved is everything the next step depends on: the model's tensors, Adam's moments
and step counts, the learning-rate schedule's state, the data generator's and the global
random state, the training and validation curves with their wall times, and the best
validation weights. In the second-order phase the Levenberg-Marquardt iterations' state
is saved with them (:class:`~probes.training.levenberg_marquardt.LMState`: the damping,
the remembered steps, the batch in use and the one drawn ahead), every
:data:`CHECKPOINT_EVERY` seconds and at a pause. So a resumed run computes bit-for-bit the
numbers of an uninterrupted one (the wall times, and what a ``time_limit`` cuts, aside), in
either phase.

A checkpoint is a safetensors file (raw tensors and a JSON header; nothing in it is
executed) whose metadata names its job: a file of another job, of another format or that
cannot be read is a one-line :class:`CheckpointError`, never silently replaced.
"""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import torch

#: Seconds of training between two saves (a kill loses at most this much).
CHECKPOINT_EVERY = 60.0
#: The layout of the state (a file of another format is refused).
FORMAT = 1


class Phase(StrEnum):
    """Where a saved training stands (the state's ``"phase"``; the value is what the file
    holds, so files written before the enum read back unchanged)."""

    #: in the Adam steps (or before them)
    FIRST_ORDER = "first_order"
    #: the Adam steps are done, the engine's iterations not begun
    SECOND_ORDER = "second_order"
    #: in the engine's iterations (the state holds :class:`LMState`'s under ``"lm"``)
    SECOND_ORDER_RUNNING = "second_order_running"
    #: training is over (the state holds the result)
    DONE = "done"


class Paused(Exception):  # noqa: N818 - not an error: the slice is over
    """Training reached the end of its slice; its state is in the checkpoint."""


class CheckpointError(ValueError):
    """A checkpoint that cannot be used (one line, naming the file)."""


@dataclass
class Checkpoint:
    """Where one job's training state goes. ``job``: the job id the file belongs to;
    ``pause_at``: the wall-clock time (``time.time()``) at which training pauses (None:
    never); ``every``: seconds between saves."""

    path: Path
    job: str
    pause_at: float | None = None
    every: float = CHECKPOINT_EVERY
    _last: float = field(default_factory=time.perf_counter, repr=False)

    @classmethod
    def in_folder(cls, folder: str | Path, job: str, pause_at: float | None = None
                  ) -> Checkpoint:
        return cls(Path(folder) / f"{job}.ckpt.safetensors", job, pause_at)

    def pause_due(self) -> bool:
        """Whether the slice is over."""
        return self.pause_at is not None and time.time() >= self.pause_at

    def save_due(self) -> bool:
        """Whether :data:`CHECKPOINT_EVERY` seconds passed since the last save."""
        return time.perf_counter() - self._last >= self.every

    def save(self, tensors: dict[str, torch.Tensor], state: dict[str, Any]) -> None:
        """Write ``tensors`` and the JSON-able ``state`` atomically (a temporary file, then a
        rename: a kill leaves the previous checkpoint whole, and its temporary file is
        removed by the next save). A write that fails (a full disk) is CheckpointError."""
        from probes.training.weights import write_tensor_file

        meta = {"format": str(FORMAT), "job": self.job, "state": json.dumps(state)}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_tensor_file(self.path, {k: v.detach().to("cpu").contiguous().clone()
                                          for k, v in tensors.items()}, meta)
        except OSError as exc:   # a full disk: the previous checkpoint stays whole
            raise CheckpointError(f"checkpoint {self.path} not saved: "
                                  f"{exc.strerror or exc}; free space (or give --no-checkpoints) "
                                  "and run the command again") from None
        self._last = time.perf_counter()

    def load(self) -> tuple[dict[str, torch.Tensor], dict[str, Any]] | None:
        """The saved tensors and state, or None when there is no checkpoint."""
        try:
            mode = os.stat(self.path).st_mode
        except FileNotFoundError:
            return None
        except OSError as exc:   # a symlink loop, a folder without permission
            raise CheckpointError(f"checkpoint {self.path} cannot be read "
                                  f"({exc.strerror or exc}); delete it to train this job "
                                  "from the start") from None
        if not stat.S_ISREG(mode):   # a FIFO would block the read forever
            raise CheckpointError(f"checkpoint {self.path} is not a regular file; delete it "
                                  "to train this job from the start")
        from safetensors import safe_open

        try:
            with safe_open(str(self.path), framework="pt") as f:
                meta = f.metadata() or {}
                # cloned: a tensor read in place sits wherever the header's length put it,
                # and BLAS kernels round differently on memory of another alignment
                tensors = {k: f.get_tensor(k).clone() for k in f.keys()}  # noqa: SIM118
            state = json.loads(meta.get("state", ""))
        except Exception as exc:  # noqa: BLE001 - safetensors' and json's own errors
            raise CheckpointError(f"checkpoint {self.path} cannot be read "
                                  f"({(str(exc).splitlines() or [''])[0]}); delete it to "
                                  "train this job from the start") from None
        if meta.get("format") != str(FORMAT) or meta.get("job") != self.job or \
                not isinstance(state, dict):
            raise CheckpointError(f"checkpoint {self.path} is not one of job {self.job} "
                                  f"(format {meta.get('format')}, job {meta.get('job')}); "
                                  "delete it to train this job from the start")
        return tensors, state

    def remove(self) -> None:
        """Delete the checkpoint (the job's records are stored)."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
