"""What ``precision list solvers`` says of each paper study of this package: the first line of
its function's docstring, declared apart from the studies (no torch, no flint), so the
listing is instant without importing them. :func:`~probes.studies.register_study` refuses a
study of this package that is not declared here with that line."""

from __future__ import annotations

#: The shipped studies by name (tests/test_catalogs.py: the same names and lines as the
#: registry once every study module is imported).
STUDY_CATALOG: dict[str, str] = {
    "memformer.compare":
        "Trained Memformer / linear transformer vs per-instance CG, Nesterov, heavy ball, PGD.",
    "newton.kappa_sweep":
        "Lemma 4.1 / Thm 4.2 constructions vs kappa (000 App. D data): Newton steps to the "
        "floor.",
    "newton.logistic":
        "Damped Newton in 11+2k layers vs ReLU width N and Newton-Schulz depth k (000 Thm 5.2).",
    "newton.trained_lsa":
        "Trained linear attention +/- LayerNorm vs order-2/3 Newton and GD per layer "
        "(000 Sec. 6).",
    "noisy_regression.baselines":
        "002 Table 1 baselines (ConstRR, AdaRR, TunedRR, 1-layer optimum) for one noise "
        "column.",
    "noisy_regression.lsa":
        "Trained LSA Full/Diag/GD++ on mixed-noise regression: adjusted loss, per layer, "
        "Thm 4.1.",
    "noisy_regression.profile":
        "002 Fig. 3 per-variance profile: each baseline's adjusted loss at fixed sigma.",
    "representations.closed_form":
        "Lemma 4's loss vs Monte Carlo of the model; the ridge limit three ways.",
    "representations.heads":
        "Heads H vs the ridge limit: H >= N reaches it, H = 1 keeps a certified loss gap.",
    "representations.population_gd":
        "GD on 004's population loss: A_hat -> ridge limit A, floor and rate vs Thm 1.",
}
