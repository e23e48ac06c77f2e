"""`python -m bot` is `collectbot`."""

from bot.cli import app

app(prog_name="collectbot")
