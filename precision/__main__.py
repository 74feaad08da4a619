"""``python -m precision`` is the ``precision`` command (:mod:`precision.cli`)."""

from precision.cli.entry import main

raise SystemExit(main())
