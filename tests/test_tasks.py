"""Tasks (001 App. D.2-D.3), one class each: shapes, targets, exact truths, fixed hidden
parameters, and READ / AFFINE / MULTIPLY shared with the constructions' primitive problems."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from precision.backends.mp_backend import exact_array
from precision.metrics import error_summary
from precision.problems import primitive_problem
from precision.tasks import TASK_CLASSES, TASKS, Affine, Read, TaskError, make_task


def _sample(name: str, batch: int = 3, seed: int = 0, **opts):
    task = make_task(name, seed=1, **opts)
    return task, *task.sample(batch, torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name, opts", [(name, {}) for name in TASKS] + [
    ("read", {"a": 2, "b": 5, "causal": False}), ("affine", {"d_out": 3, "h_var": 1.0}),
    ("multiply", {"dim": 7, "a": 1, "b": 4, "d_out": 3})])
def test_shapes_and_exact_truth_agree_with_float64_target(name, opts):
    task, x, y = _sample(name, **opts)
    assert type(task) is TASK_CLASSES[name] and task.name == name
    assert x.shape == (3, task.n_tokens, task.d_in)
    assert task.select(torch.zeros(3, task.n_tokens, task.d_out)).shape == y.shape
    truth = task.truth(exact_array(x.numpy()), 512)
    assert truth.shape == y.shape
    assert error_summary(y.numpy(), truth).mse < 1e-28   # float64 target vs exact truth


def test_primitive_shapes_are_001_d23():
    assert (make_task("read").d_in, make_task("read").d_out) == (20, 20)
    assert make_task("affine").d_out == 1
    assert make_task("multiply").d_out == 10
    assert make_task("ls_feature").d_in == 5 * 5 + 2 * 5 + 1      # D^2 + 2D + 1
    assert make_task("explicit_gradient").n_tokens == 21          # N + 1


def test_read_copies_row_i_to_row_j_and_keeps_the_rest():
    task, x, y = _sample("read")
    i, j = task.i, task.j
    assert i < j                                   # causal by default
    assert torch.equal(y[:, j], x[:, i])
    keep = [k for k in range(40) if k != j]
    assert torch.equal(y[:, keep], x[:, keep])


def test_hidden_parameters_are_fixed_per_seed_not_per_batch():
    a, b = make_task("affine", seed=3), make_task("affine", seed=3)
    assert np.array_equal(a.H, b.H) and a.H.shape == (20, 1)
    assert not np.array_equal(a.H, make_task("affine", seed=4).H)
    # h ~ N(0, 3 I): its sample variance over many seeds is near 3
    hs = np.concatenate([make_task("affine", seed=s).H for s in range(200)])
    assert 2.6 < hs.var() < 3.4


def test_multiply_and_explicit_gradient_targets():
    _, x, y = _sample("multiply")
    assert torch.equal(y, x[..., :10] * x[..., 10:])
    task, x, y = _sample("explicit_gradient", k=2)
    X, t, w0 = x[:, :20, :5], x[:, :20, 5], x[:, 20, :5]
    grad = torch.einsum("bn,bnd->bd", (X @ w0[..., None])[..., 0] - t, X) / 20   # 001 eq. 13
    assert torch.allclose(y, grad, rtol=0, atol=1e-13)
    # k = 2 features are the causal prefix sums; the last context token holds the full sums
    assert torch.allclose(x[:, 19, 6:11], (t[..., None] * X).sum(1), atol=1e-12)


def test_truth_uses_the_rounded_inputs():
    task, x, _ = _sample("multiply")
    x32 = x.to(torch.float32).to(torch.float64)
    truth = task.truth(exact_array(x32.numpy()), 512)
    assert error_summary((x32[..., :10] * x32[..., 10:]).numpy(), truth).mse == 0.0


@pytest.mark.parametrize("name, opts, match", [
    ("nope", {}, "unknown task 'nope'"),
    ("multiply", {"dim": 7}, "even dim"),
    ("read", {"i": 3, "j": 3}, "i != j"),
    ("read", {"i": 5, "j": 2}, "causal model needs i < j"),
    ("ls_fixed_n", {"dim": 6, "n": 4}, "n >= dim"),
    ("ls_feature", {"k": 3}, "k must be 0, 1 or 2"),
    ("affine", {"width": 3}, "has no option width"),
    ("read", {"i": "3"}, "i must be an integer"),
    ("read", {"a": 4, "b": 4}, "0 <= a < b <= dim"),
    ("affine", {"h_var": 0.0}, "h_var must be a finite number > 0"),
    ("multiply", {"dim": 8, "b": 6, "d_out": 3}, "b \\+ d_out <= dim"),
])
def test_impossible_tasks_are_one_line_errors(name, opts, match):
    with pytest.raises(TaskError, match=match) as info:
        make_task(name, **opts)
    assert "\n" not in str(info.value)


def test_ls_parallel_test_mse_skips_the_underdetermined_positions():
    task, x, y = _sample("ls_parallel")
    assert y.shape == (3, 21)                       # y_1 .. y_N and y_q are all trained on
    assert task.evaluated(y).shape == (3, 16)       # tested: positions with >= D examples
    assert torch.equal(task.evaluated(y)[:, -1], y[:, -1])


def test_describe_names_the_options_and_reads_positions():
    read = make_task("read", seed=2)
    assert read.describe() == f"read(dim=20, n=40, causal=True, i={read.i}, j={read.j})"
    assert make_task("affine", dim=4, n=3).describe() == "affine(dim=4, n=3)"
    assert make_task("ls_feature", k=2).describe() == "ls_feature(dim=5, n=20, k=2)"


def test_non_causal_read_draws_both_orders():
    pairs = [(t.i, t.j) for t in (make_task("read", seed=s, causal=False) for s in range(20))]
    assert any(i < j for i, j in pairs) and any(i > j for i, j in pairs)


def test_constructions_primitives_are_the_same_classes():
    """One definition: the constructions' problems hold the probe tasks' classes; they draw u
    then the parameters from default_rng([seed, 7]), and AFFINE's H with h_var = 1."""
    for op in ("read", "affine", "multiply"):
        prob = primitive_problem(op, 6, 5, seed=4)
        assert type(prob.task) is TASK_CLASSES[op] and prob.u.shape == (5, 6)
        rng = np.random.default_rng([4, 7])
        assert np.array_equal(prob.u, rng.standard_normal((5, 6)))
        if op == "affine":
            assert np.array_equal(prob.task.H, rng.standard_normal((6, 1)))
    with pytest.raises(TypeError, match="causal"):     # the constructions fix READ causal
        primitive_problem("read", causal=False)
    # the two AFFINE distributions differ only by the explicit h_var
    h1 = Affine(np.random.default_rng(3), h_var=1.0).H
    assert np.array_equal(Affine(np.random.default_rng(3)).H, np.sqrt(3.0) * h1)
    read = Read(np.random.default_rng(0), dim=4, n=6, i=1, j=4, a=1, b=3)
    x = torch.arange(2 * 6 * 4, dtype=torch.float64).reshape(2, 6, 4)
    y = read.target(x)
    assert torch.equal(y[:, 4, 1:3], x[:, 1, 1:3]) and torch.equal(y[:, 4, ::3], x[:, 4, ::3])


def _at_offset(x: torch.Tensor, k: int) -> torch.Tensor:
    """A copy of ``x`` whose data starts ``8 k`` bytes past a fresh buffer's start (another
    memory alignment, the same values)."""
    buf = np.empty(x.numel() + 8)
    view = buf[k:k + x.numel()].reshape(tuple(x.shape))
    view[...] = x.numpy()
    return torch.from_numpy(view)


@pytest.mark.parametrize("name", TASKS)
def test_targets_are_the_same_bits_at_every_memory_alignment(name):
    """A target is a function of the input's values alone: the same bits for copies of x at
    eight alignments (LAPACK's least squares, the first way, differed in the last bits
    between such copies, so a convergence check's held-out targets, and the stored
    curvature, changed between processes)."""
    opts = {"k": 1} if name in ("ls_feature", "explicit_gradient") else {}
    task = make_task(name, seed=3, **opts)
    x = task.inputs(64, torch.Generator().manual_seed(5))
    targets = {task.target(_at_offset(x, k)).numpy().tobytes() for k in range(8)}
    assert len(targets) == 1


def test_least_squares_targets_are_ols_to_rounding():
    """:func:`precision.deterministic.lstsq` is OLS: within 1e-13 of LAPACK's, and the
    noiseless w* to 1e-14."""
    from precision import deterministic as det

    rng = np.random.default_rng(0)
    X, w = rng.standard_normal((200, 20, 5)), rng.standard_normal((200, 5))
    assert np.abs(det.lstsq(X, det.dot(X, w[:, None, :])) - w).max() < 1e-14
    X, y = rng.standard_normal((20, 9, 4)), rng.standard_normal((20, 9))
    ref = np.stack([np.linalg.lstsq(a, b, rcond=None)[0] for a, b in zip(X, y, strict=True)])
    assert np.abs(det.lstsq(X, y) - ref).max() < 1e-13


def test_target_version_is_in_a_trained_id_only_where_targets_changed():
    from probes.training.job import Job
    from probes.training.train_config import TrainConfig

    def config(task: str) -> dict:
        return Job(family="transformer", task=task, depth=1, width=8,
                   train=TrainConfig(recipe="paper", steps=1, batch_size=2)).config(4)

    assert "target_version" not in config("read") and "target_version" not in config("multiply")
    assert config("affine")["target_version"] == 2 == config("ls_parallel")["target_version"]


@pytest.mark.parametrize("name", ["read", "ls_parallel"])
def test_inputs_live_in_torch_memory(name):
    """A batch reaches the model in torch's 64-byte aligned memory, never numpy's (16-byte
    aligned: a float64 forward's last bits changed with the batch's address on this CPU),
    whatever numpy allocated before."""
    task = make_task(name, seed=0)
    gen = torch.Generator().manual_seed(0)
    for size in range(1, 9):
        _ = [np.empty(size * k) for k in range(1, 5)]   # move numpy's heap
        x, _y = task.sample(size, gen)
        assert x.data_ptr() % 64 == 0


@pytest.mark.parametrize("precision", ["float64", "float32", "bfloat16:sr+seed=1"])
def test_evaluate_gives_the_same_bits_wherever_the_input_lives(precision):
    """``evaluate`` of one model on the same values at eight addresses: one result."""
    from precision.evaluate import evaluate
    from probes.factory import build_family

    task = make_task("multiply", seed=0)
    model = build_family("transformer", task.d_in, task.d_out, 2, 32, task.n_tokens, {},
                         seed=0).double()
    x = task.inputs(16, torch.Generator().manual_seed(1))
    outs = {evaluate(model, _at_offset(x, k), precision).double().numpy().tobytes()
            for k in range(8)}
    assert len(outs) == 1
