"""The ``mitool`` command: a thin click front end over :mod:`mitool.toy` and :mod:`mitool.vision`.

Errors in what the user asked for (ValueError from the library, bad files) become a one-line
message and exit code 2, never a traceback.
"""

from __future__ import annotations

import click

from mitool.cli.errors import FriendlyGroup


@click.group(cls=FriendlyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mitool")
def main() -> None:
    """Mutual-information estimation with learned critics, and contrastive pretraining of
    vision encoders with the same bounds."""


def _register() -> None:
    """Attach the sub-command groups that exist (each lives in its own module)."""
    import importlib

    for module_name, attribute in (
        ("mitool.cli.toy", "toy"),
        ("mitool.cli.estimate", "estimate_command"),
        ("mitool.cli.benchmark", "benchmark"),
        ("mitool.cli.vision", "vision"),
    ):
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name == module_name:
                continue
            raise
        command = getattr(module, attribute, None)
        if command is not None:
            main.add_command(command)


_register()

if __name__ == "__main__":
    main()
