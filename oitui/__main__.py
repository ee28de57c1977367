"""``python -m oitui`` runs the command line (same as the ``oitui`` script)."""

from oitui.cli import main

raise SystemExit(main())
