"""What ``precision list solvers`` shows is declared in light catalogs apart from the solvers,
constructions and studies (so the listing imports no torch); these tests hold the catalogs
and the registries to each other, both ways, so they cannot drift."""

from __future__ import annotations

import pytest

from precision.cli.main import main
from precision.constructions.catalog import CONSTRUCTION_CATALOG
from precision.constructions.measure import CONSTRUCTIONS
from precision.solvers.catalog import SOLVER_CATALOG
from precision.solvers.measure import SOLVERS, TASK_KINDS, SolverSpec
from probes.studies import StudyOutcome, load_studies, per_precision, register_study
from probes.studies.catalog import STUDY_CATALOG


def _shipped_studies() -> dict[str, str]:
    """The studies of ``probes.studies`` and their listed lines (tests register their own)."""
    return {name: spec.doc for name, spec in load_studies().items()
            if spec.fn.__module__.startswith("probes.studies.")}


@pytest.mark.parametrize("catalog, registry", [(SOLVER_CATALOG, SOLVERS),
                                               (CONSTRUCTION_CATALOG, CONSTRUCTIONS)],
                         ids=["solvers", "constructions"])
def test_every_declared_subject_is_implemented_and_every_implemented_one_declared(
        catalog, registry):
    assert sorted(catalog) == registry.names()
    for name, spec in registry.items():
        assert (spec.task, spec.description) == (catalog[name].task, catalog[name].description)
        assert spec.task in TASK_KINDS, name   # a task a problem can be made for
        assert spec.description and "\n" not in spec.description, name


def test_every_declared_study_is_implemented_with_its_docstrings_line_and_vice_versa():
    assert _shipped_studies() == STUDY_CATALOG
    assert all(line and "\n" not in line for line in STUDY_CATALOG.values())
    # the listed line is a whole sentence, never the first line of a longer one cut where
    # the docstring wraps
    assert [n for n, line in STUDY_CATALOG.items() if not line.endswith((".", ")"))] == []


def test_the_listing_shows_what_the_implementations_register(capsys):
    """``precision list solvers`` prints the catalogs: line by line what the registries
    hold once every implementation is imported."""
    expected = (["solvers:"]
                + [(n, f"[{s.task}] {s.description}") for n, s in sorted(SOLVERS.items())]
                + ["constructions (run by name like solvers, e.g. --solvers lsa_gd):"]
                + [(n, f"[{c.task}] {c.description}") for n, c in sorted(CONSTRUCTIONS.items())]
                + ["studies (run from a suite's [studies.<label>] tables):"]
                + sorted(_shipped_studies().items()))
    assert main(["list", "solvers"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert len(shown) == len(expected)
    for line, want in zip(shown, expected, strict=True):
        if isinstance(want, str):
            assert line == want
        else:
            name, text = want
            assert line.startswith(f"  {name} ") and line.endswith(f"  {text}"), line
            assert line[2:].removeprefix(name).strip() == text, line


def test_an_undeclared_solver_or_construction_is_refused_when_registered():
    spec = SolverSpec("sor", lambda xp, X, y: [], {})
    with pytest.raises(RuntimeError, match="^solver 'sor' is not declared in its catalog$"):
        SOLVERS.register(spec)
    assert "sor" not in SOLVERS
    with pytest.raises(RuntimeError, match="^construction 'lsa_gd2' is not declared"):
        CONSTRUCTIONS.register(type(CONSTRUCTIONS["lsa_gd"])("lsa_gd2", {}, lambda p, prob: 0))


def _study_of_the_package(name: str, doc: str) -> None:
    """Register a study whose function claims to live in ``probes.studies``."""
    def fn(params: dict, precision: object, seed: int) -> StudyOutcome:
        return StudyOutcome(metrics={})

    fn.__doc__, fn.__module__ = doc, "probes.studies.unlisted"
    register_study(name, {})(per_precision(fn))


def test_a_study_of_the_package_must_be_declared_with_its_docstrings_line():
    with pytest.raises(RuntimeError, match="^study 'x.undeclared' of probes.studies.unlisted "
                       "is not declared in probes.studies.catalog"):
        _study_of_the_package("x.undeclared", "Anything.")
    with pytest.raises(RuntimeError, match="^study 'newton.logistic' of "):
        _study_of_the_package("newton.logistic", "A first line the catalog does not hold.")
    assert "x.undeclared" not in load_studies()
