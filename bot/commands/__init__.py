"""One module per CLI subcommand; each registers itself on `bot.cli.app`."""
