"""`python -m bot` is `collectbot`."""

from bot.cli import main

raise SystemExit(main())
