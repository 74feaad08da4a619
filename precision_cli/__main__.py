"""``python -m precision_cli`` is the ``precision`` command."""

from precision_cli.main import main

raise SystemExit(main())
