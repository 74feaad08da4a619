"""Every module of the three packages imports: an undeclared dependency (or a module that
only imports with an optional extra installed at top level) fails here, at collection of a
fresh environment, not in a user's run."""

import importlib
import pkgutil

import pytest

import precision
import probes
import reports


def _modules() -> list[str]:
    names = []
    for package in (precision, probes, reports):
        names.append(package.__name__)
        names += [m.name for m in pkgutil.walk_packages(package.__path__,
                                                         prefix=f"{package.__name__}.")]
    # ``python -m precision`` runs the command when imported; the CLI tests check it
    return sorted(n for n in names if not n.endswith(".__main__"))


MODULES = _modules()


def test_the_walk_finds_the_packages():
    assert {"precision.cli.main", "probes.store.db", "probes.suite", "reports.build",
            "precision.params", "probes.studies.newton"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_module_imports(name):
    importlib.import_module(name)
