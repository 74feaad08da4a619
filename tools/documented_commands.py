"""The commands README.md and docs/*.md show, in the order a reader meets them.

One extraction for the two places that check them: ``tests/test_docs_commands.py`` (each
command against the parser and the names it uses) and ``tools/run_documented.py`` (CI's
second tier: each concrete command run at its documented size).

A command is a code-block line, or each ``&&``-joined part of one (a trailing ``\\`` joins the
next line; ``#`` comments and ``$`` prompts are removed), or an inline code span, that starts
with ``precision`` (or ``python -m precision``), or with ``python tools/`` when asked for.
It is a *synopsis* when it holds a placeholder (an upper-case word such as ``SUITE``, ``...``,
``[``, ``|``, ``<``) or a file the doc invents for the reader (``my_suite.toml``,
``path/to/``), and *concrete* otherwise.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Words that stand for what the reader supplies (a synopsis, not a command).
PLACEHOLDER = re.compile(r"\b[A-Z][A-Z_]{1,}\b|\.\.\.|\[|\||<")
#: Files a doc's example invents for the reader (``my_suite.toml``, another store).
INVENTED = re.compile(r"my_suite\.toml|gpu\.db|path/to/")
PRECISION = r"(python -m )?precision( |$)"
TOOLS = r"python tools/"


def documented(pattern: str = PRECISION) -> list[tuple[str, str]]:
    """(file name, command) of every command matching ``pattern`` (a regular expression
    anchored at the command's start), once each, in reading order: README.md first, then
    docs/*.md by name, each file top to bottom (its code blocks and inline spans as they
    come)."""
    found: dict[str, str] = {}
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        parts = re.split(r"```[a-z]*\n(.*?)```", text, flags=re.S)
        for i, part in enumerate(parts):   # prose, block, prose, block, ...
            if i % 2:
                lines = part.replace("\\\n", " ").splitlines()
                commands = [part for line in lines for part in re.split(
                    r"\s{2,}#|\s#\s", line.strip().removeprefix("$ "))[0].split(" && ")]
            else:
                commands = [span.replace("\\|", "|") for span in re.findall(r"`([^`]+)`", part)]
            for command in commands:
                command = " ".join(command.split())
                if re.match(pattern, command):
                    found.setdefault(command, path.name)
    return [(where, command) for command, where in found.items()]


def is_synopsis(command: str) -> bool:
    """True for a command with placeholders or an invented file (not runnable as written)."""
    return bool(PLACEHOLDER.search(command) or INVENTED.search(command))
