"""The one declaration of the train settings: :class:`TrainConfig`.

Each field is declared once, with its default, its type and range (a
:class:`~precision.params.Param`, or the names it may take) and whether a suite's ``train``
table may set it. A config is validated when it is made (suite file, Python API, a study),
never again inside: :func:`probes.training.recipes.train` trusts it. A suite's table becomes
one with
:meth:`TrainConfig.from_table`; :meth:`TrainConfig.table` gives back the resolved table (every
suite-settable field, less the later additions left at their default) that a trained job
stores in its config and hashes into its id.

The precisions are settings spelled as strings (``dtype``, ``master_dtype``,
``lm_curvature_dtype``: that spelling, canonical, is what the table stores and hashes); a
config turns them once, when it is made, into :class:`~precision.precisions.Precision`
values (:attr:`TrainConfig.precision`, :attr:`TrainConfig.curvature_precision`), which is
what training reads. ``dtype`` is a native training dtype (:data:`TRAIN_DTYPES`) or a
format the toolkit simulates (:mod:`probes.training.format_training`).
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any

from precision.params import Param, ParamError, count, positive
from precision.precisions import Precision, PrecisionError, parse_precision
from probes.training.recipe_book import RECIPES as RECIPE_BOOK

RECIPES = tuple(RECIPE_BOOK)
#: Recipes that end with the second-order engine (and train in float64 throughout).
SECOND_ORDER = tuple(name for name, r in RECIPE_BOOK.items() if r.second_order)
#: Recipes of Adam alone (a format trains with one of these).
FIRST_ORDER = tuple(name for name in RECIPES if name not in SECOND_ORDER)
#: When training stops: after ``steps`` (the budget), or at the validation plateau.
UNTIL = ("steps", "floor")
#: Native training dtypes: the model, its gradients and Adam's state all in that dtype (the
#: second-order recipes train in float64 whatever ``dtype`` says). Any other ``dtype`` is a
#: simulated format, trained with master weights (:mod:`probes.training.format_training`).
TRAIN_DTYPES = ("float32", "float64", "bfloat16")
#: Where a format training keeps its weights: "auto" (a native dtype: in itself; a format:
#: float32 master weights), float32 / float64 master weights, or "none": in the format itself,
#: each update rounded into it by the format's rounding (stochastic rounding's use).
MASTER_DTYPES = ("auto", "float32", "float64", "none")
#: Loss scaling of a format training: when its format needs it, always, never.
LOSS_SCALING = ("auto", "dynamic", "off")
#: Each native spelling ``dtype``, ``master_dtype`` and ``lm_curvature_dtype`` may take, as
#: its Precision (a look-up; a format ``dtype`` is parsed once, when the config is made).
PRECISIONS: dict[str, Precision] = {name: Precision(name) for name in TRAIN_DTYPES}
#: What the second-order recipes train in.
FLOAT64 = PRECISIONS["float64"]


class TrainConfigError(ValueError):
    """A train setting of the wrong type, out of range or unknown (one line)."""


def _setting(default: Any, check: Param | tuple[str, ...] | None = None, *,
             suite: bool = True, hashed_at_default: bool = True) -> Any:
    """A field: its default, its check (a Param, or the names it may take), whether a
    suite's ``train`` table may set it, and whether :meth:`TrainConfig.table` writes it when
    it holds its default (False for a setting added after stores existed: a record that never
    set it keeps its id)."""
    return field(default=default, metadata={"check": check, "suite": suite,
                                            "hashed_at_default": hashed_at_default})


@dataclass(frozen=True)
class TrainConfig:
    """One training run (:func:`probes.training.recipes.train`; its recipes are documented
    there).

    recipe: one of :data:`RECIPES` (:mod:`probes.training.recipe_book`); steps:
    first-order (Adam) steps (for the second-order recipes: the Adam steps before the
    engine's iterations); dtype: training precision, spelled (the stored form; training
    reads it parsed, :attr:`precision`).
    """

    recipe: str = _setting(MISSING, RECIPES)
    steps: int = _setting(MISSING, count(None, lo=0, hi=100_000_000))
    batch_size: int = _setting(MISSING, count(None, hi=65_536))
    lr: float = _setting(1e-3, positive(None))
    # native dtype (TRAIN_DTYPES) or a simulated format (checked in __post_init__)
    dtype: str = _setting("float32")
    seed: int = _setting(0, count(None, lo=0, hi=2**32 - 1), suite=False)
    step_size: int = _setting(10_000, count(None, hi=1_000_000_000))  # StepLR period (001 D.1)
    gamma: float = _setting(0.9, Param(None, gt=0.0, hi=1.0))         # StepLR factor (001 D.1)
    second_order_steps: int = _setting(50, count(None, lo=0))  # the engine's iterations
    second_order_batch: int = _setting(64, count(None))   # samples in each LM batch (at least)
    curve_points: int = _setting(200, count(None))      # at most this many (step, loss) points
    warmup: int = _setting(0, count(None, lo=0, hi=100_000_000))  # constant/cosine: warm-up
    clip: float = _setting(0.0, Param(None, lo=0.0))    # Adam-phase gradient-norm clip, 0 = none
    # seconds: a safety stop, not a budget (a run it stops is stored and printed as stopped
    # by time); budgets are steps, second_order_steps and engine_flops
    time_limit: float | None = _setting(None, positive(None, optional=True))
    until: str = _setting("steps", UNTIL)  # "steps": all steps; "floor": the validation plateau
    device: str = _setting("cpu", suite=False)  # where the model trains; data: the CPU
    # sequences per forward/backward pass of an Adam step; the batch gradient is accumulated
    # over the passes (0 = one pass). On a CPU ~128 keeps a pass's activations in cache.
    micro_batch: int = _setting(0, count(None, lo=0, hi=65_536))
    # held-out sequences of the validation curve (0 = none). Cost: validation_points forward
    # passes of this size, ~20% of a 2000-step batch-32 run, ~1% at the paper's batch 1024
    validation_size: int = _setting(128, count(None, lo=0, hi=65_536))
    # at most this many measurements in the Adam phase, and as many in the second-order one
    validation_points: int = _setting(100, count(None))
    # second-order phase: a measurement every this many engine iterations (0: spread
    # validation_points over second_order_steps). Set it where second_order_steps is only a
    # cap that the time limit or the floor ends the run before.
    validation_every: int = _setting(0, count(None, lo=0, hi=1_000_000),
                                     hashed_at_default=False)
    # the second-order phase's budget in work: it stops once its iterations have done this
    # many floating-point operations (counted, probes.training.work: the same on any machine
    # and under any load); 0 = none (second_order_steps still caps the iterations)
    engine_flops: float = _setting(0.0, Param(None, lo=0.0, hi=1e21), hashed_at_default=False)
    # --- adaptive scheduler (probes.training.recipes.AdaptiveLR) ---
    window: int = _setting(50, count(None), suite=False)         # steps per decision
    lr_up: float = _setting(1.5, positive(None), suite=False)    # signal dominates, loss falls
    lr_down: float = _setting(0.5, positive(None), suite=False)  # noise dominates or loss rises
    snr_low: float = _setting(1.0, positive(None), suite=False)  # below: noise dominates
    snr_high: float = _setting(4.0, positive(None), suite=False)  # above (and falling): signal
    # lr stays within [lr * lr_min_factor, lr * lr_max_factor]
    lr_min_factor: float = _setting(1e-4, positive(None), suite=False)
    lr_max_factor: float = _setting(10.0, positive(None), suite=False)
    # --- second-order phase (probes.training.levenberg_marquardt) ---
    lm_refresh: int = _setting(10, count(None), suite=False)   # LM iterations per fixed batch
    krylov_dim: int = _setting(80, count(None), suite=False)   # Lanczos basis (matrix-free)
    # > 0: the Lanczos basis stops before krylov_dim when its last directions add less than
    # this (relative, per direction) to the step's predicted decrease (Hessian-free's rule)
    krylov_tol: float = _setting(0.0, Param(None, lo=0.0, hi=1.0), suite=False)
    # explicit J and eigh(J^T J) when P <= dense_max_params and M * P <= dense_max_entries
    dense_max_params: int = _setting(2500, count(None, lo=0), suite=False)
    dense_max_entries: int = _setting(20_000_000, count(None, lo=0, hi=2**62), suite=False)
    # ... and each sample has at most this many residuals (a per-sample Jacobian costs about
    # one single-sample backward pass per residual: with many, Krylov products are cheaper)
    dense_max_sample_residuals: int = _setting(1_000_000, count(None, lo=0), suite=False)
    lm_damping: float = _setting(1e-3, positive(None), suite=False)  # initial lam / curvature
    diag_probes: int = _setting(16, count(None), suite=False)  # Hutchinson probes (scaling)
    lm_memory: int = _setting(40, count(None, lo=0), suite=False)  # earlier steps in the basis
    # dense path: "eigh" once per iteration or "cholesky" per damping try
    lm_solve: str = _setting("eigh", ("eigh", "cholesky"), suite=False)
    lm_max_tries: int = _setting(12, count(None), suite=False)  # damping increases per iter
    # smaller dampings tried first each iteration (mu / 10^k, k = lm_scan..1), best one taken
    lm_scan: int = _setting(0, count(None, lo=0, hi=12), suite=False)
    # LM batch: at least lm_residuals x P residuals (0 = second_order_batch as given), at most
    # lm_max_batch samples (probes.training.levenberg_marquardt.lm_batch_size)
    lm_residuals: float = _setting(0.0, Param(None, lo=0.0), suite=False)
    lm_max_batch: int = _setting(4096, count(None, hi=65_536), suite=False)
    # Krylov path: the curvature products (and the scaling's probes) start on this fraction of
    # the batch, the gradient on all of it (Hessian-free's curvature minibatch, Martens 2010);
    # an iteration with no acceptable step doubles it, up to the whole batch
    lm_curvature: float = _setting(1.0, Param(None, lo=1e-3, hi=1.0), suite=False)
    # Krylov path: the curvature products in this precision (the gradient, the K-FAC factors
    # and the steps stay float64); an iteration with no acceptable step makes them float64
    lm_curvature_dtype: str = _setting("float64", ("float64", "float32"), suite=False)
    # lm_refresh = 1: a step is accepted only when it also lowers the loss of the next batch
    lm_holdout: bool = _setting(False, suite=False)
    # Krylov path's scaling: "diagonal" (Marquardt, Hutchinson) or "kfac" on nn.Linear layers
    lm_precondition: str = _setting("diagonal", ("diagonal", "kfac"), suite=False)
    # keep the weights of the best validation measurement (not the last ones)
    keep_best: bool = _setting(False, suite=False)
    # --- a format training (dtype a simulated format; probes.training.format_training) ---
    # where the weights are kept while training (MASTER_DTYPES); Adam's state: float32 or
    # float64 (float32 with "none")
    master_dtype: str = _setting("auto", MASTER_DTYPES, hashed_at_default=False)
    # dynamic loss scaling: "auto" where the format's range needs it, "dynamic", "off"
    loss_scaling: str = _setting("auto", LOSS_SCALING, hashed_at_default=False)
    # where training starts: "fresh" (the seeded init) or "contained": the best kept weights
    # of a shallower cell this model contains exactly, embedded (probes.training.warm_start)
    start: str = _setting("fresh", ("fresh", "contained"), hashed_at_default=False)

    def __post_init__(self) -> None:
        for f in fields(self):
            check, value = f.metadata["check"], getattr(self, f.name)
            if isinstance(check, Param):
                try:
                    check.check(f.name, value)
                except ParamError as exc:
                    raise TrainConfigError(str(exc)) from None
            elif check is not None and (not isinstance(value, str) or value not in check):
                raise TrainConfigError(f"unknown {f.name} {value!r} (choose from: "
                                       f"{', '.join(check)})")
        # the one conversion of the precision settings (not fields: neither stored nor
        # compared; the spellings are)
        p = _training_precision(self.dtype)
        object.__setattr__(self, "dtype", p.name)   # the canonical spelling is stored
        object.__setattr__(self, "_precision", p)
        if self.is_format:
            if self.second_order:
                raise TrainConfigError(
                    f"recipe '{self.recipe}' trains in float64 (its second-order engine's "
                    f"curvature products need it); training in the format '{p.name}' needs "
                    f"a first-order recipe ({', '.join(FIRST_ORDER)})")
            if self.device != "cpu":
                raise TrainConfigError(f"training in the format '{p.name}' runs on the CPU "
                                       f"(the simulated rounding's random bits are the "
                                       f"CPU's), not on '{self.device}'")
        elif self.loss_scaling != "auto":
            raise TrainConfigError(f"loss_scaling sets how a format trains; dtype '{p.name}' "
                                   f"trains natively (give master_dtype to train it as a "
                                   f"format)")
        object.__setattr__(self, "_curvature_precision", PRECISIONS[self.lm_curvature_dtype])

    @property
    def precision(self) -> Precision:
        """``dtype`` parsed: the precision the model trains in (the first-order recipes;
        the second-order ones train in float64, :attr:`training_precision`)."""
        return self._precision  # type: ignore[attr-defined, no-any-return]

    @property
    def training_precision(self) -> Precision:
        """What the model trains in: :attr:`precision`, or float64 for a second-order
        recipe."""
        return FLOAT64 if self.second_order else self.precision

    @property
    def is_format(self) -> bool:
        """The model trains as a format (:mod:`probes.training.format_training`): ``dtype``
        is not a native dtype, or ``master_dtype`` is given."""
        return self.dtype not in TRAIN_DTYPES or self.master_dtype != "auto"

    @property
    def weights_dtype(self) -> Precision:
        """The dtype the model's parameters (and Adam's state) have while it trains: the
        native training precision, or a format training's master dtype (float32 for "auto"
        and for "none", whose values are the format's)."""
        if not self.is_format:
            return self.training_precision
        return PRECISIONS["float64" if self.master_dtype == "float64" else "float32"]

    @property
    def curvature_precision(self) -> Precision:
        """``lm_curvature_dtype`` parsed: the precision of the Krylov path's curvature
        products (float64 or float32)."""
        return self._curvature_precision  # type: ignore[attr-defined, no-any-return]

    @classmethod
    def from_table(cls, table: dict[str, Any], **outside: Any) -> TrainConfig:
        """The config of a suite's ``train`` table (one grid point: no lists) plus the
        settings a suite does not write (``seed``, ``device``); TrainConfigError names an
        unknown or missing key or a bad value (its message reads after the word "train")."""
        unknown = set(table) - set(SUITE_KEYS)
        if unknown:
            raise TrainConfigError(f"has unknown key(s) {', '.join(sorted(unknown))} "
                                   f"(known: {', '.join(sorted(SUITE_KEYS))})")
        for key in REQUIRED_KEYS:
            if key not in table:
                raise TrainConfigError(f"needs '{key}'")
        return cls(**table, **outside)

    def table(self) -> dict[str, Any]:
        """Every suite-settable field and its value (the stored, hashed form); a field
        declared with ``hashed_at_default=False`` only when it differs from its default."""
        return {key: getattr(self, key) for key in SUITE_KEYS if key not in _OMIT_AT_DEFAULT
                or getattr(self, key) != _OMIT_AT_DEFAULT[key]}

    @property
    def second_order(self) -> bool:
        """The recipe ends with the second-order engine."""
        return RECIPE_BOOK[self.recipe].second_order

    def resolved(self) -> TrainConfig:
        """This config with its recipe's fixed settings applied (what training runs)."""
        return replace(self, **dict(RECIPE_BOOK[self.recipe].settings))


def _training_precision(spelling: Any) -> Precision:
    """``dtype`` as a Precision: a native dtype, or a format the float path simulates (a
    simulated format or a per-module assignment without an mpN); TrainConfigError otherwise."""
    if isinstance(spelling, str) and spelling in PRECISIONS:
        return PRECISIONS[spelling]
    what = ("float32, float64, bfloat16 (native) or a format (e.g. float16, float8_e4m3, "
            "bfloat16:sr, mxfp8_e4m3, int8, float32+mod[GLOB]=bfloat16)")
    if not isinstance(spelling, str):
        raise TrainConfigError(f"dtype must be a precision's name, not {spelling!r}; {what}")
    try:
        p = parse_precision(spelling)
    except PrecisionError as exc:
        raise TrainConfigError(f"dtype: {exc}") from None
    # any precision of the float path (an mpN is computed by the interpreter, not trained)
    if p.is_mp or any(q.is_mp for _, q in p.modules):
        raise TrainConfigError(f"dtype '{p.name}' cannot be trained in: give {what}")
    return p


#: The keys a suite's ``train`` table may set, in declaration order.
SUITE_KEYS = tuple(f.name for f in fields(TrainConfig) if f.metadata["suite"])
#: The suite keys written to the stored table only when set (key -> default).
_OMIT_AT_DEFAULT = {f.name: f.default for f in fields(TrainConfig)
                    if f.metadata["suite"] and not f.metadata["hashed_at_default"]}
#: The keys every ``train`` table must give.
REQUIRED_KEYS = tuple(f.name for f in fields(TrainConfig) if f.default is MISSING)
