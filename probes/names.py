"""The rule for names that reach the store, and the limits on a suite's size.

A name given in a suite (problem, task, model, solver, study entry and profile labels), on
the command line (``--solvers``, ``--tasks``, ``--profile``, ``--label``) or to the Python
API becomes a column of stored rows and a part of report file names. It is checked where it
enters, so a name that would break a later ``report`` never reaches the store:

* 1 to :data:`MAX_NAME_CHARS` characters and at most :data:`MAX_NAME_BYTES` bytes as UTF-8
  (a study's grid-point label, built from its values, may have :data:`MAX_LABEL_CHARS`);
* no ``/``, no ``\\``, no NUL or other control character (nor a line or paragraph
  separator, a lone surrogate, or an invisible format character such as a right-to-left
  override, which would make the name show reversed), not blank, not ``.`` or ``..``.

The size limits (:data:`MAX_GRID_RUNS`, :data:`MAX_SEEDS`, :data:`MAX_AXIS_VALUES`,
:data:`MAX_SUITE_BYTES`, :data:`MAX_NESTING`) bound what a suite may ask for; a suite above
one is refused at once, before anything is expanded, built or stored.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from probes.suite_error import SuiteError

#: Characters of a name (suite entry labels, CLI names).
MAX_NAME_CHARS = 100
#: Characters of a label derived from values (a study's grid point ``sigma=3,noise=0.1``).
MAX_LABEL_CHARS = 200
#: Bytes of any name as UTF-8 (a file name's limit on common file systems).
MAX_NAME_BYTES = 255
#: The rule, as error messages state it.
NAME_RULE = (f"a name has 1-{MAX_NAME_CHARS} characters and at most {MAX_NAME_BYTES} bytes "
             "as UTF-8, no '/', '\\', NUL or other control or invisible format characters "
             "(such as right-to-left overrides), and is not '.' or '..'")

#: Store rows (one per run and evaluation precision) one suite may expand into.
MAX_GRID_RUNS = 100_000
#: Seeds of one suite.
MAX_SEEDS = 10_000
#: Values of one grid axis (a list-valued model option, train key or study parameter).
MAX_AXIS_VALUES = 1_000
#: Size of a suite file (the shipped ones are a few kB).
MAX_SUITE_BYTES = 1_000_000
#: Nesting of tables and lists in a suite (``[models.x]`` with ``train = {...}`` is 3).
MAX_NESTING = 20

#: Unicode categories refused in a name: controls, line / paragraph separators, surrogates,
#: and format characters -- invisible ones that change how the text around them shows: the
#: bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069, which make a name
#: render reversed in a table), zero-width spaces and joiners, the byte-order mark.
_BAD_CATEGORIES = {"Cc", "Zl", "Zp", "Cs", "Cf"}


def shown(value: Any, limit: int = 60) -> str:
    """``value``'s repr (control characters escaped), cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def name_problem(value: Any, max_chars: int = MAX_NAME_CHARS) -> str | None:
    """What is wrong with ``value`` as a name (one phrase), or None if it is a valid name."""
    if not isinstance(value, str):
        return f"it is a {type(value).__name__}, not a string"
    if not value.strip():
        return "it is empty" if not value else "it is blank"
    if value in (".", ".."):
        return "it is a path component"
    for ch in ("/", "\\"):
        if ch in value:
            return f"it contains '{ch}'"
    for ch in value:
        category = unicodedata.category(ch)
        if category in _BAD_CATEGORIES:
            what = "NUL" if ch == "\0" else "the invisible format character" \
                if category == "Cf" else "the control character"
            label = unicodedata.name(ch, "")
            return f"it contains {what} U+{ord(ch):04X}" + (f" ({label})" if label else "")
    if len(value) > max_chars:
        return f"it has {len(value)} characters (at most {max_chars})"
    size = len(value.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        return f"it has {size} bytes as UTF-8 (at most {MAX_NAME_BYTES})"
    return None


def check_name(value: Any, what: str, where: str = "",
               max_chars: int = MAX_NAME_CHARS) -> str:
    """``value`` if it is a valid name; else :class:`SuiteError`: one line naming ``where``
    (a file, or empty), ``what`` the name is (``problem label``, ``--solvers name``), the
    value, what is wrong and the rule."""
    problem = name_problem(value, max_chars)
    if problem is None:
        return value
    rule = NAME_RULE.replace(f"1-{MAX_NAME_CHARS}", f"1-{max_chars}")
    prefix = f"{where}: " if where else ""
    raise SuiteError(f"{prefix}invalid {what} {shown(value)}: {problem} ({rule})")


def axis_length(value: Any, key: str, where: str) -> int:
    """Values of a grid axis (a list; a scalar is one value); :class:`SuiteError` above
    :data:`MAX_AXIS_VALUES`."""
    n = len(value) if isinstance(value, list) else 1
    if n > MAX_AXIS_VALUES:
        raise SuiteError(f"{where}: grid axis '{key}' has {n:,} values "
                         f"(at most {MAX_AXIS_VALUES:,})")
    return n


def list_length(value: Any, default: int) -> int:
    """Length of a list-valued key (``precisions``, ``tasks``), ``default`` if it is not a
    list (its validation reports that later)."""
    return len(value) if isinstance(value, list) else default


def stored_names_problem(row: dict[str, Any]) -> str | None:
    """Why a stored run's names may not enter a store (a merge of a store written by other
    means): its suite, subject and task must pass the rule for names (labels may be
    :data:`MAX_LABEL_CHARS` long), and its precision must be a canonical spelling of the
    grammar; None when they do."""
    from precision.precisions import PrecisionError, parse_spelling

    for column in ("suite", "subject", "task"):
        problem = name_problem(row.get(column), MAX_LABEL_CHARS)
        if problem is not None:
            return f"its {column} {shown(row.get(column), 40)}: {problem}"
    try:
        canonical = parse_spelling(row.get("precision")).name
    except PrecisionError:
        canonical = None
    if canonical != row.get("precision"):
        return f"its precision {shown(row.get('precision'), 40)} is not a canonical spelling"
    return None
