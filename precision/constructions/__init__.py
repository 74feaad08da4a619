"""Hand-set weights that make a model run an algorithm exactly (papers' constructions).

Each construction is a function returning a ready ``nn.Module`` of a family in
:mod:`precision.models`; ``measure.py`` measures some of them layer by layer (``traces.py``,
one per construction, on ``layers.py``; ``precision run constructions``), each declared in
``catalog.py`` (what ``precision list solvers`` shows of it):

| construction                  | file                   | paper              |
|-------------------------------|------------------------|--------------------|
| READ / AFFINE / MULTIPLY      | baseconv_primitives.py | 001 App. C.1       |
| READ in one softmax head      | transformer_read.py    | 001 eq. 5 (here)   |
| ... with LayerNorm (+-K)      | transformer_read.py    | 001 eq. 5 (here)   |
| GD in a causal BaseConv       | baseconv_gd.py         | 001 App. C.2.2     |
| preconditioned GD as LSA      | lsa_gd.py              | 003 eq. 2.8-2.10   |
| Newton–Schulz step, 2 layers  | lsa_newton.py          | 000 Lemma 4.1      |
| least squares in 3 + T layers | lsa_newton.py          | 000 Thm 4.2        |
| GD++, per-sequence gamma      | lsa_gdpp.py            | 002 Thm 5.1        |
"""
