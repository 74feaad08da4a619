"""``precision list [suites|solvers|precisions|claims]``: the shipped suites, the reference
solvers, constructions and studies, the precisions and their spelling, and the published
claims the reports check."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from precision.precisions import VALID_FORMS


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``list`` subcommand on ``sub`` (the main parser's subparsers)."""
    lst = sub.add_parser("list", help="list suites, solvers, precisions and claims",
                         description="List shipped suites, reference solvers, precisions "
                         "and the published claims the reports check.")
    lst.add_argument("what", nargs="?", default="all", choices=["all", *SECTIONS])
    return lst


def main(args: argparse.Namespace) -> int:
    """``precision list``: the listings ``what`` asks for (all by default)."""
    for name, show in SECTIONS.items():
        if args.what in (name, "all"):
            show()
    return 0


def _suites() -> None:
    """The shipped suites and their descriptions, read from their files alone (no torch: a
    catalog in a fraction of a second; a file that does not parse says why, and ``precision
    run`` checks the rest of a suite before computing)."""
    import tomllib
    from importlib import resources

    print("suites:")
    rows = []
    files = (resources.files("probes") / "suites").iterdir()
    for path in sorted((p for p in files if p.name.endswith(".toml")), key=lambda p: p.name):
        try:
            desc = str(tomllib.loads(path.read_text(encoding="utf-8")).get("description", ""))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            desc = f"(invalid: {exc})"
        rows.append((path.name.removesuffix(".toml"), desc))
    _columns(rows)


def _solvers() -> None:
    """The reference solvers, the constructions and the studies, read from their catalogs,
    which their registries are checked against (no torch: the implementations are not
    imported)."""
    from precision.constructions.catalog import CONSTRUCTION_CATALOG
    from precision.solvers.catalog import SOLVER_CATALOG
    from probes.studies.catalog import STUDY_CATALOG

    print("solvers:")
    _columns([(name, f"[{s.task}] {s.description}") for name, s in sorted(SOLVER_CATALOG.items())])
    print("constructions (run by name like solvers, e.g. --solvers lsa_gd):")
    _columns([(name, f"[{c.task}] {c.description}")
              for name, c in sorted(CONSTRUCTION_CATALOG.items())])
    print("studies (run from a suite's [studies.<label>] tables):")
    _columns(sorted(STUDY_CATALOG.items()))


def _precisions() -> None:
    """The precisions of the format catalog, their forms and spelling."""
    print("precisions:")
    from precision.formats.catalog import listing

    print("\n".join(listing()))
    print(f"  forms: {VALID_FORMS}")
    print("  spelling: FORMAT[:rne|rna|rz|ru|rd|sr][+acc=FORMAT][+act=FORMAT]"
          "[+casts=keep|promote][+seed=N][+mod[GLOB]=FORMAT]...; roundings other than "
          "rne, +acc= and +act= simulate the format per op (docs/formats.md); sr takes "
          "+seed=N or the run's seed; +mod[GLOB]=FORMAT assigns a format to modules "
          "(docs/precision_assignment.md)")


def _claims() -> None:
    """The published claims and the suites that check them, read from the claims file alone
    (no torch; the report validates each check against the record schema)."""
    import tomllib
    from importlib import resources

    print("published claims (a report shows those about its suites):")
    text = (resources.files("reports.papers") / "claims.toml").read_text(encoding="utf-8")
    rows = []
    for c in tomllib.loads(text)["claim"]:
        check = c.get("check")
        suite = check.get("suite") if check else None
        where = (", ".join(suite) if isinstance(suite, list) else str(suite)) if check \
            else "no suite yet"
        rows.append((c["id"], f"[{where}] {c['claim']}: {c['published']}"))
    _columns(rows)


def _columns(rows: list[tuple[str, str]]) -> None:
    """Each (name, text) on its line, indented, the texts aligned after the longest name."""
    width = max((len(name) for name, _ in rows), default=0)
    for name, text in rows:
        print(f"  {name:<{width}}  {text}")


#: The sections of ``precision list``, in the order ``precision list`` prints them all.
SECTIONS: dict[str, Callable[[], None]] = {
    "suites": _suites, "solvers": _solvers, "precisions": _precisions, "claims": _claims}
