"""``python -m precision`` is the ``precision`` command (:mod:`precision.cli`)."""

from precision.cli.main import main

raise SystemExit(main())
