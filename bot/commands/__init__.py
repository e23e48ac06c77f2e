"""One module per CLI subcommand: plain functions (and sub-apps) that `bot.cli` registers."""
