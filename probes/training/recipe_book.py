"""The registered training recipes: each a :class:`Recipe` object (its Adam schedule, whether it
ends with the second-order engine, and the :class:`~probes.training.train_config.TrainConfig`
settings it fixes). :func:`probes.training.recipes.train` reads the recipe, never its name.

``paper``
    001 App. D.1: Adam(lr = 1e-3), StepLR (x0.9 every 1e4 steps), a fresh batch per step
    (001 App. E.2: "new data is sampled at each iteration").
``paper-length``
    001 App. E.2 (training length, Fig. 9): the paper recipe with the StepLR period scaled
    with the run's length, ``steps / 100`` ("to keep the learning rates consistent across
    runs, we scale back the scheduler step size accordingly": 1e5 .. 1e8 iterations with
    periods 1e3 .. 1e6), so runs of every length see the same schedule.
``adaptive``
    Adam with a step learning rate that can go down or up, driven by the gradient
    signal-to-noise ratio over a window of steps
    (:class:`probes.training.recipes.AdaptiveLR`).
``constant`` / ``cosine``
    Adam with ``warmup`` steps of linear warm-up, then a constant rate or a cosine decay to 0
    at ``steps`` (002 Sec. 6 trains with a constant rate; the cosine schedule is ours).
``engine``
    The toolkit's one second-order engine (:mod:`probes.training.levenberg_marquardt`),
    the same for every model: ``steps`` adaptive Adam steps in float64 to leave the random
    start, then ``second_order_steps`` Gauss-Newton / Levenberg-Marquardt iterations, each on
    a *fresh* batch that holds at least as many residuals as the model has parameters, a step
    accepted only when it also lowers the loss of the next (held-out) batch, dense steps
    (explicit Jacobian, one Cholesky factorisation per damping try) where they are cheaper
    (``ENGINE_DENSE_PARAMS``, ``ENGINE_DENSE_SAMPLE_RESIDUALS``) and Krylov (Lanczos) steps
    with a K-FAC scaling of every linear layer elsewhere, a damping chosen among three
    (10x apart) at every iteration, the curvature products on the whole batch
    (``ENGINE_CURVATURE``) in float32 (``ENGINE_CURVATURE_DTYPE``); training ends on the
    weights of the best validation measurement. It reads no task, family or size: only the
    model, the sampler and the config.
``high-precision``
    The engine's iterations on fixed seeded batches of ``second_order_batch`` samples,
    refreshed every ``lm_refresh`` iterations, with the diagonal (Marquardt) scaling and no
    held-out acceptance (the least-squares suites' explicit-gradient model uses it).

001 App. E.1 notes that no trained model reaches machine precision on the primitives and asks
whether "more refined optimization methods" help; the second-order recipes are that method.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: engine: the dense (explicit Jacobian) path up to this many parameters, for samples of at
#: most this many residuals (measured here: a per-sample Jacobian row costs ~10x a batch
#: backward pass's share per sample, so at 32 residuals per sample (READ, D = 4, N = 8,
#: 3492 parameters) a dense iteration took 7 s and a Krylov one 0.5 s).
ENGINE_DENSE_PARAMS = 6000
ENGINE_DENSE_SAMPLE_RESIDUALS = 8
#: engine, Krylov path: the curvature products on this fraction of each batch (the gradient
#: on all of it). A subset is cheaper per iteration but its noise limits how precisely a step
#: fits. Measured here: Transformer with LayerNorm, depth 1, width 32, AFFINE (14,753
#: parameters, the same 480 s on a shared machine): log10 test MSE -1.66 after 3 iterations
#: with the whole batch, -2.84 after 10 at 0.25, -2.78 after 16 at 0.1 (130 s, 45 s and 24 s
#: an iteration); but the README's gated mixer on MULTIPLY (depth 1, width 64, the quick
#: profile's 200 Adam steps and 10 iterations): -9.02 with the whole batch, -4.45 at 0.25
#: (17 s and 12 s in all). Precision is what the engine is for: the whole batch. Starting
#: at an eighth and doubling on every iteration with no acceptable step (the rule for a
#: fraction below 1) does not rescue it: READ, Transformer without LayerNorm, depth 2,
#: width 64, stayed on the 10^-1.6 plateau for 23 iterations of ~6 s (3 rejected), where
#: the whole batch left it for 10^-5.0 in 24 iterations of ~20 s. At equal work (engine FLOPs,
#: bench/bench_curvature_batch.py; bench/engine_measurements.md) a quarter or a sixteenth took
#: 4-5x less work to 1e-4 / 1e-6 on AFFINE and stayed 2.5 decades higher on READ (depth 2,
#: width 64, no LayerNorm), its steps accepted, so growing it on rejection never fired.
ENGINE_CURVATURE = 1.0
#: engine, Krylov path: the curvature products in float32 (the gradient, the K-FAC factors,
#: the steps and every loss stay float64; a rejected iteration makes the products float64
#: again). Measured here (READ, Transformer without LayerNorm, depth 2, width 64, 540 s, two
#: such runs side by side): the batch losses of the two agree to 2-3 digits iteration by
#: iteration, an iteration takes ~13 s instead of ~22 s, so float32 products did 37
#: iterations (10^-5.49) where float64 ones did 19 (10^-4.74). One product at depth 3,
#: width 64: 0.32 s against 1.0 s.
ENGINE_CURVATURE_DTYPE = "float32"
#: engine, Krylov path: Lanczos directions per iteration (and ``lm_memory`` earlier steps).
#: The adaptive basis (``krylov_tol``: Hessian-free's stopping rule) is not the engine's:
#: measured here (540 s, one thread, two cells at a time, the same machine), at most 150
#: directions with tol 5e-4 reached 10^-5.13 (13 iterations) on AFFINE and 10^-2.11 on READ
#: (Transformer without LayerNorm, depth 2, width 32) where 30 reached 10^-5.47 (47) and
#: 10^-3.00: the rule takes all 150 on AFFINE, and the iterations it costs are worth more.
#: A cap of 60 with the rule: 10^-5.76 (30 iterations) and 10^-3.11 on the same two cells,
#: one seed each; too little to change the recipe on.
ENGINE_KRYLOV_DIM = 30


@dataclass(frozen=True)
class Recipe:
    """One training recipe. ``schedule``: the Adam phase's learning rate, ``"step"`` (StepLR,
    ``step_size`` / ``gamma``), ``"adaptive"``, ``"constant"`` or ``"cosine"`` (both after
    ``warmup``); ``second_order``: the engine's iterations follow the Adam steps, and the
    whole run trains in float64; ``step_periods``: when nonzero, StepLR's period is
    ``steps // step_periods`` (instead of ``step_size``); ``settings``: TrainConfig fields
    the recipe fixes (whatever the config says)."""

    name: str
    schedule: str
    second_order: bool = False
    step_periods: int = 0
    settings: tuple[tuple[str, Any], ...] = ()


RECIPES: dict[str, Recipe] = {r.name: r for r in (
    Recipe("paper", "step"),
    Recipe("paper-length", "step", step_periods=100),
    Recipe("adaptive", "adaptive"),
    Recipe("constant", "constant"),
    Recipe("cosine", "cosine"),
    Recipe("engine", "adaptive", second_order=True, settings=(
        ("lm_refresh", 1), ("lm_holdout", True), ("lm_residuals", 1.0),
        ("lm_solve", "cholesky"), ("dense_max_params", ENGINE_DENSE_PARAMS),
        ("dense_max_sample_residuals", ENGINE_DENSE_SAMPLE_RESIDUALS),
        ("lm_precondition", "kfac"), ("krylov_dim", ENGINE_KRYLOV_DIM), ("lm_memory", 10),
        ("lm_scan", 2),
        ("lm_curvature", ENGINE_CURVATURE), ("lm_curvature_dtype", ENGINE_CURVATURE_DTYPE),
        ("keep_best", True))),
    Recipe("high-precision", "adaptive", second_order=True),
)}
