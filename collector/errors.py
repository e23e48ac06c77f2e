"""Errors the user can fix: they end a command with one line, never a traceback."""


class UserError(Exception):
    """Bad input (file, field or value) that the user can correct."""


class RunRecordError(UserError):
    """A run record that cannot be read: missing file, bad checksum, unknown schema."""

    def __init__(self, message: str) -> None:
        # One line, whatever the underlying library put into its message.
        super().__init__(" ".join(str(message).split())[:2000])


class RecordWriteError(UserError):
    """The run record could not be written (disk full, quota, file size limit, permissions)."""
