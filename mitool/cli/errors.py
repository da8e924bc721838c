"""Turn library errors into click usage errors: one line in the user's words, exit code 2, no
traceback.

A :class:`mitool.checks.ParameterError` names a Python parameter (``batch_size must be ...``); the
command that was running prints it with the option the user typed instead (``--batch-size must
be ...``): the click parameter of the same name gives the flag, so no table of flags is kept.
"""

from __future__ import annotations

import errno

import click

from mitool.checks import ParameterError

__all__ = ["FriendlyCommand", "FriendlyGroup", "flag_of", "user_message"]

_REPORTED = (ValueError, FileNotFoundError, IsADirectoryError, NotADirectoryError)
"""Errors in what the user asked for: one line, exit 2."""

WRITE_ERRORS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.ELOOP, errno.EACCES, errno.EPERM, errno.EIO}
)
"""errno values of a file system that refuses to store (full, read-only, looped, not ours): one line
naming the path and the cause, exit 1; whatever was written before stays whole (mitool._infra.files)."""


def _raise_storage_error(error: OSError) -> None:
    """The one-line error (exit 1) of an OSError in :data:`WRITE_ERRORS`; nothing for other errors."""
    if error.errno in WRITE_ERRORS:
        where = f"{error.filename}: " if error.filename else ""
        raise click.ClickException(f"cannot store results: {where}{error.strerror or error}") from None


def flag_of(command: click.Command, parameter: str) -> str | None:
    """The option (``--batch-size``) or argument (``X``) of ``command`` whose Python name is
    ``parameter``; None when it has none."""
    for param in command.params:
        if param.name == parameter:
            if isinstance(param, click.Option):
                return max(param.opts, key=len)
            return param.human_readable_name
    return None


def user_message(error: BaseException, command: click.Command | None) -> str:
    """One line: the error's message, with the parameters it names spelled as the user types them
    (the command's flags)."""
    if isinstance(error, ParameterError) and command is not None and flag_of(command, error.parameter):
        return error.render(lambda name: flag_of(command, name) or name).splitlines()[0]
    text = str(error)
    if isinstance(error, (FileNotFoundError, IsADirectoryError, NotADirectoryError)):
        if error.filename is not None and error.strerror:  # OSError's own form, not a library message
            text = f"{error.strerror}: {error.filename}"
    return text.splitlines()[0] if text else type(error).__name__


class FriendlyCommand(click.Command):
    """A command that reports the errors of :data:`_REPORTED` as ``Error: <message>`` (exit 2)."""

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except _REPORTED as error:
            raise click.UsageError(user_message(error, self), ctx=None) from None
        except OSError as error:
            _raise_storage_error(error)
            raise


class FriendlyGroup(click.Group):
    """A group whose commands and sub-groups are friendly too: errors as one line, exit 2, click's
    own (a bad choice, a missing argument) included, without the usage lines."""

    command_class = FriendlyCommand

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except click.UsageError as error:
            if error.ctx is None:
                raise
            raise click.UsageError(error.format_message().splitlines()[0], ctx=None) from None
        except _REPORTED as error:
            raise click.UsageError(user_message(error, None), ctx=None) from None
        except OSError as error:
            _raise_storage_error(error)
            raise


FriendlyGroup.group_class = FriendlyGroup
