"""Turn library errors into click usage errors: one line, exit code 2, no traceback."""

from __future__ import annotations

import click


class FriendlyGroup(click.Group):
    """A click group whose commands report ``ValueError`` (bad arguments, as raised by
    :mod:`mitool` and its subpackages), ``FileNotFoundError`` and ``PermissionError`` as
    ``Error: <message>`` on stderr with exit code 2."""

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except (ValueError, FileNotFoundError, PermissionError, IsADirectoryError) as error:
            message = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise click.UsageError(message, ctx=None) from None
