"""Judge 001's claims from what ships: one command.

    python tools/claims_evidence.py [--db evidence.db] [--out report/evidence]
                                     [--suites solvers:quick,constructions,square:quick]

It runs the reference suites (solvers and square in their quick profiles, constructions as
it is: minutes on two cores; each ``SUITE:PROFILE`` or ``SUITE``) into ``--db`` (a run
already there is reused), merges every shipped store of measured cells
(``reports/stores/*.db``, only read), writes the report of the whole store into ``--out`` and
prints, for each of paper 001's claims, its verdicts (paper recipe, engine) or why there is
none (the command that measures it), and how many are judged. ``--suites ''`` runs no suite
(the shipped stores alone).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:   # run as a script from anywhere: this checkout's packages
    sys.path.insert(0, str(ROOT))

from precision.cli.main import main as precision  # noqa: E402
from probes.store.db import Store  # noqa: E402
from reports.papers.claims import check_claims  # noqa: E402

#: The reference suites (``SUITE:PROFILE``) whose runs several of 001's claims are judged on.
SUITES = ("solvers:quick", "constructions", "square:quick")
SHIPPED = ROOT / "reports" / "stores"


def judged(verdict: str) -> bool:
    return verdict in ("holds", "does not hold")


def evidence(db: Path, out: Path, suites: list[str]) -> int:
    """Compute, merge, report and print (module docstring); the exit code."""
    for spec in suites:
        suite, _, profile = spec.partition(":")
        rc = precision(["run", suite, *(["--profile", profile] if profile else []), "--db",
                        str(db), "--no-progress", "--no-report"])
        if rc not in (0, 1):   # 1: some runs failed, which the report shows
            return rc
    shipped = sorted(str(p) for p in SHIPPED.glob("*.db"))
    if shipped and precision(["merge", *shipped, "--db", str(db)]) != 0:
        return 2
    if precision(["report", "--db", str(db), "--out", str(out)]) != 0:
        return 2
    with Store(db, create=False, read_only=True) as store:
        rows = store.runs()
    claims = [c for c in check_claims(rows) if c.id.startswith("001-")]
    n = 0
    print(f"\n001's claims judged from {db} (shipped stores: "
          f"{', '.join(Path(p).name for p in shipped) or 'none'}):")
    for c in claims:
        ok = judged(c.verdict) or judged(c.engine_verdict)
        n += ok
        if ok:
            print(f"  {c.id}: paper recipe {c.verdict}; engine {c.engine_verdict}"
                  f" ({c.engine_measured if judged(c.engine_verdict) else c.measured})")
        else:
            print(f"  {c.id}: not judged: {c.engine_measured or c.measured}; to measure: "
                  f"{c.command}")
    print(f"{n} of {len(claims)} judged; report: {out / 'report.md'}")
    return 0


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, default=Path("evidence.db"))
    parser.add_argument("--out", type=Path, default=Path("report") / "evidence")
    parser.add_argument("--suites", default=",".join(SUITES),
                        help="comma-separated SUITE[:PROFILE] to run first ('' for none)")
    args = parser.parse_args(argv)
    suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    return evidence(args.db, args.out, suites)


if __name__ == "__main__":
    raise SystemExit(cli())
