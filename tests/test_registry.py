"""The one spec/registry pattern (precision.registry) of solvers, constructions and studies."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from precision.constructions.measure import CONSTRUCTIONS, get_construction
from precision.params import Param, count
from precision.registry import Declared, Listed, Registry
from precision.solvers.measure import SOLVERS, SolverError, get_solver
from probes.studies import STUDIES, StudyError, get_study


class _Error(ValueError):
    pass


@dataclass(frozen=True)
class _Spec(Declared):
    kind = "widget"
    error = _Error

    name: str
    params: dict[str, Param]


def test_a_registry_names_its_kind_and_lists_the_valid_names():
    reg = Registry(_Spec, [_Spec("b", {}), _Spec("a", {"n": count(3)})])
    assert reg.names() == ["a", "b"] and list(reg) == ["b", "a"] and reg["a"].defaults == {"n": 3}
    with pytest.raises(_Error, match=r"^unknown widget 'c'; choose from: a, b$"):
        reg["c"]
    assert reg.get("c") is None  # dict semantics otherwise
    reg.register(_Spec("a", {"n": count(3)}))  # the same spec again: no change
    with pytest.raises(RuntimeError, match="widget 'a' registered twice"):
        reg.register(_Spec("a", {}))
    assert reg["a"].resolve({"n": 5}) == {"n": 5} and reg["a"].resolve(None) == {"n": 3}
    with pytest.raises(_Error, match=r"^widget 'a' has no parameter m; its parameters: n$"):
        reg["a"].resolve({"m": 1})
    empty = Registry(_Spec, listing=" (known: {})")
    with pytest.raises(_Error, match=r"^unknown widget 'x' \(known: none\)$"):
        empty["x"]


def test_a_registry_with_a_catalog_registers_only_the_names_it_declares():
    reg = Registry(_Spec, [_Spec("a", {})], declared={"a": Listed("t", "one line"), "b": None})
    reg.register(_Spec("b", {}))
    with pytest.raises(RuntimeError, match="^widget 'c' is not declared in its catalog$"):
        reg.register(_Spec("c", {}))
    with pytest.raises(RuntimeError, match="^widget 'c' is not declared"):
        Registry(_Spec, [_Spec("c", {})], declared={})
    assert reg.names() == ["a", "b"]
    Registry(_Spec, [_Spec("c", {})]).register(_Spec("d", {}))  # no catalog: any name


def test_solvers_constructions_and_studies_share_it():
    assert isinstance(SOLVERS, Registry) and isinstance(CONSTRUCTIONS, Registry)
    assert isinstance(STUDIES, Registry)
    with pytest.raises(SolverError, match="^unknown solver 'sor'; choose from: cg, "):
        get_solver("sor")
    with pytest.raises(SolverError, match="^unknown construction 'x'; choose from: "):
        get_construction("x")
    with pytest.raises(StudyError, match=r"^unknown study 'x' \(known: memformer.compare, "):
        get_study("x")
    with pytest.raises(SolverError, match="^construction 'lsa_gd': parameter layers"):
        CONSTRUCTIONS["lsa_gd"].resolve({"layers": 0})
