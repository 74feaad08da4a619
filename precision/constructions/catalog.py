"""What ``precision list solvers`` says of each construction: the task family it solves and
one line, declared apart from the constructions (no torch, no flint), so the listing is
instant. :data:`~precision.constructions.measure.CONSTRUCTIONS` registers against it: a
construction that is not declared here is refused when it is registered, and its spec reads
its task and description from here."""

from __future__ import annotations

from precision.registry import Listed

#: The constructions by name (tests/test_catalogs.py: the same names as the registry).
CONSTRUCTION_CATALOG: dict[str, Listed] = {
    "lsa_gd": Listed(
        "least_squares",
        "linear attention = GD with step eta (003 eq. 2.8-2.10); default 2/(lmin+lmax)"),
    "baseconv_gd": Listed(
        "least_squares", "causal BaseConv running GD on least squares (001 App. C.2.2)"),
    "baseconv_gd_noncausal": Listed(
        "least_squares",
        "non-causal BaseConv, O(D) state, 3 layers per GD step (001 App. C.2.1)"),
    "lsa_newton_schulz": Listed(
        "inverse", "Newton-Schulz steps in 2 linear-attention layers each (000 Lemma 4.1)"),
    "baseconv_read": Listed(
        "primitive", "single-layer BaseConv READ(i, j, a, b) (001 App. C.1.1), one point"),
    "transformer_read": Listed(
        "primitive",
        "READ(i, j, a, b) in one causal softmax-attention head, width max(32, D + 3), no "
        "LayerNorm; every unwanted key `gap` logits down (leak ~exp(-gap)), one point"),
    "transformer_read_ln": Listed(
        "primitive",
        "the same READ head in the LayerNorm cell (width max(32, D + 6); LN before the "
        "attention, the MLP and the readout): two constant channels +-`scale`, relative "
        "error ~t^2 / (4 scale^2), one point"),
    "baseconv_affine": Listed(
        "primitive", "single-layer BaseConv AFFINE(H) (001 App. C.1.2), one point"),
    "baseconv_multiply": Listed(
        "primitive", "single-layer BaseConv MULTIPLY(a, b, d_out) (001 App. C.1.3), one point"),
    "logistic_newton": Listed(
        "logistic",
        "damped Newton for logistic regression in 11+2k layers, ReLU gadgets of N "
        "intervals, k Newton-Schulz steps (000 Thm 5.2, App. C)"),
    "lsa_least_squares": Listed(
        "least_squares",
        "least squares in 3+T linear-attention layers, width 4d+3, T Newton-Schulz steps "
        "(000 Thm 4.2), per step t: a^T X_t A^T y"),
    "lsa_ridge": Listed(
        "least_squares",
        "ridge regression (A^T A + mu I)^{-1} A^T y in 3+T linear-attention layers "
        "(000 Remark 4.4), per Newton-Schulz step"),
    "lsa_newton_schulz_sym": Listed(
        "inverse",
        "Newton-Schulz for symmetric A, one linear-attention layer per step "
        "(000 Lemma 4.1, last sentence)"),
    "lsa_gdpp": Listed(
        "least_squares",
        "GD++ linear transformer: preconditioning layers gamma_l = 1/(3 nu_l) per sequence, "
        "then GD layers (002 Thm 5.1), per layer against the OLS prediction"),
}
