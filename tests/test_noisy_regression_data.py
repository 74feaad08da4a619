"""002's mixed-noise regression sampler: shapes, noise laws, seeds, bad specs."""

import numpy as np
import pytest

from precision.deterministic import dot
from probes.studies.noisy_regression_data import (
    NoiseSpecError,
    noise_label,
    parse_noise,
    sample_batch,
)


def test_batch_shapes_and_noiseless_query() -> None:
    b = sample_batch(5, 10, 20, "uniform:3", np.random.default_rng(0))
    assert b.X.shape == (5, 20, 10) and b.y.shape == (5, 20) and b.x_query.shape == (5, 10)
    np.testing.assert_allclose(b.y_query, np.einsum("bd,bd->b", b.x_query, b.w))
    resid = b.y - np.einsum("bnd,bd->bn", b.X, b.w)
    assert np.all(np.abs(resid) <= 10 * b.sigma[:, None] + 1e-12)


def test_noise_laws() -> None:
    rng = np.random.default_rng(1)
    clean = sample_batch(50, 3, 4, 0, rng)
    # noiseless: y = <w, x> exactly as precision.deterministic.dot defines it (no BLAS, the
    # same on every machine), within rounding of any other summation order
    np.testing.assert_array_equal(clean.y, dot(clean.X, clean.w[:, None, :]))
    np.testing.assert_allclose(clean.y, np.einsum("bnd,bd->bn", clean.X, clean.w),
                               rtol=1e-13, atol=1e-15)
    s = sample_batch(20000, 1, 1, "uniform:4", rng).sigma
    assert s.min() >= 0 and s.max() <= 4 and abs(s.mean() - 2.0) < 0.05
    c = sample_batch(3000, 1, 1, [1, 3, 5], rng).sigma
    assert set(np.unique(c)) == {1.0, 3.0, 5.0}
    assert np.all(sample_batch(10, 1, 1, "fixed:2", rng).sigma == 2.0)


def test_same_seed_same_batch() -> None:
    a = sample_batch(4, 3, 5, "choice:1,3", np.random.default_rng(7))
    b = sample_batch(4, 3, 5, "choice:1,3", np.random.default_rng(7))
    assert np.array_equal(a.X, b.X) and np.array_equal(a.y, b.y)


def test_labels() -> None:
    assert noise_label(5) == "5" and noise_label("choice:1,3") == "{1,3}"
    assert parse_noise([1, 3, 5]) == ("choice", (1.0, 3.0, 5.0))


@pytest.mark.parametrize("spec", ["gauss:1", "uniform:-1", "uniform:1,2", "uniform:x", True,
                                  "5"])
def test_bad_specs(spec: object) -> None:
    with pytest.raises(NoiseSpecError):
        parse_noise(spec)  # type: ignore[arg-type]
