"""The five papers' side of the report: their figures redrawn from a store (:mod:`.figures`,
with 001's published points in ``published_001.toml``) and their published claims checked
against it (:mod:`.claims`, the claims in ``claims.toml``). The general tables and figures of
:mod:`reports` do not depend on it."""
