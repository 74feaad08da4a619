"""Declared parameter types and ranges (precision.params) and problem-argument validation."""

from __future__ import annotations

import math

import pytest

from precision import problems
from precision.constructions.measure import CONSTRUCTIONS
from precision.params import Param, ParamError, check_params, count, positive
from precision.solvers.measure import SOLVERS, SolverError, get_solver, resolve_params
from probes.suite import load_suite, shipped_suites


def test_counts_are_integers_in_range():
    p = count(10, hi=100)
    for ok in (1, 10, 100):
        p.check("iters", ok)
    for bad in (0, -5, 101, True, 2.0, 1e9, "3", None, [3], math.nan):
        with pytest.raises(ParamError, match="iters must be a positive integer <= 100"):
            p.check("iters", bad)
    with pytest.raises(ParamError, match=r"\(write 2, an integer\)"):
        p.check("iters", 2.0)


def test_numbers_words_and_optional():
    step = positive("optimal", "optimal", "1/L")
    for ok in ("optimal", "1/L", 0.1, 3):
        step.check("step", ok)
    for bad in ("fast", 0, -1.0, math.inf, math.nan, False, None, [0.1]):
        with pytest.raises(ParamError, match="step must be a positive number or one of"):
            step.check("step", bad)
    positive(None, optional=True).check("alpha", None)
    beta = Param("optimal", lo=0.0, lt=1.0, words=("optimal",))
    beta.check("beta", 0)
    with pytest.raises(ParamError, match="< 1"):
        beta.check("beta", 1.0)


def test_check_params_merges_defaults_and_names_the_owner():
    declared = {"iters": count(5), "lam": Param(0.1, lo=0.0)}
    assert check_params("solver 'x'", declared, {"iters": 7}) == {"iters": 7, "lam": 0.1}
    with pytest.raises(ParamError, match="solver 'x' has no parameter nope"):
        check_params("solver 'x'", declared, {"nope": 1})
    with pytest.raises(ParamError, match="solver 'x': parameter lam must be a number >= 0"):
        check_params("solver 'x'", declared, {"lam": -100})
    with pytest.raises(ParamError, match="params must be a table"):
        check_params("solver 'x'", declared, [1])  # type: ignore[arg-type]


@pytest.mark.parametrize("spec", [*SOLVERS.values(), *CONSTRUCTIONS.values()],
                         ids=lambda s: s.name)
def test_every_default_is_valid_under_its_own_declaration(spec):
    assert set(spec.defaults) == set(spec.params)
    assert resolve_params(spec, {}) == spec.defaults


def test_valid_values_reach_the_solver_unchanged():
    assert resolve_params(get_solver("gd"), {"iters": 7, "step": 1}) == {"iters": 7, "step": 1}
    with pytest.raises(SolverError, match="construction 'lsa_gd': parameter layers"):
        resolve_params(CONSTRUCTIONS["lsa_gd"], {"layers": 0})


@pytest.mark.parametrize("name", sorted(shipped_suites()))
def test_every_shipped_suite_validates(name):
    assert list(load_suite(name).runs)


@pytest.mark.parametrize("call,message", [
    (lambda: problems.gaussian_least_squares(True, 5), "dim must be a positive integer"),
    (lambda: problems.gaussian_least_squares(3, 5.0), "n_samples must be a positive integer"),
    (lambda: problems.gaussian_least_squares(3, 5, noise_std=-1.0), "noise_std must be"),
    (lambda: problems.gaussian_least_squares(3, 5, noise_std="x"), "noise_std must be"),
    (lambda: problems.gaussian_least_squares(3, 5, seed=-1), "seed must be"),
    (lambda: problems.controlled_least_squares(3, 5, math.inf), "kappa must be"),
    (lambda: problems.controlled_least_squares(3, 5, 0.5), "kappa must be"),
    (lambda: problems.spd_matrix(2000, 10.0), "problem too large: dim x dim"),
    (lambda: problems.gaussian_least_squares(10, 10**6), "problem too large: n_samples"),
    (lambda: problems.noniso_least_squares(2, 5, eigenvalues=[1, "a"]), "every eigenvalue"),
    (lambda: problems.noniso_least_squares(2, 5, eigenvalues=[1, 0]), "eigenvalues must be"),
    (lambda: problems.noniso_least_squares(2, 5, eigenvalues="ab"), "eigenvalues must be"),
    (lambda: problems.logistic_regression(3, 5, mu=0), "mu must be > 0"),
    (lambda: problems.logistic_regression(3, 5, mu="x"), "mu must be"),
    (lambda: problems.primitive_problem("read", 4, 6, i="0"), "i must be an integer"),
    (lambda: problems.primitive_problem("read", 4, 10**6), "problem too large: seq_len"),
])
def test_problem_arguments_are_checked(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_valid_problems_are_unchanged_by_the_checks():
    a = problems.gaussian_least_squares(3, 6, seed=2)
    b = problems.gaussian_least_squares(3, 6, seed=2)
    assert (a.X == b.X).all() and a.X.shape == (6, 3)


def _study_sizes():
    from probes.studies import load_studies

    return [(name, key) for name, spec in sorted(load_studies().items())
            for key, value in spec.defaults.items()
            if isinstance(value, int) and not isinstance(value, bool) and "seed" not in key]


@pytest.mark.parametrize("study,key", _study_sizes())
def test_every_integer_study_parameter_is_bounded(study, key):
    """An integer study parameter (a size or a count) of 1e9 is a StudyError, never a run
    that exhausts memory or never ends."""
    from probes.studies import StudyError, get_study

    with pytest.raises(StudyError, match=key.split("_")[0]):
        get_study(study).resolve({key: 10**9})
