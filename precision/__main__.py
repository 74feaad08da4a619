"""``python -m precision`` is the ``precision`` command."""

from precision.cli import main

raise SystemExit(main())
