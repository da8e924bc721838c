"""The ``mitool`` command: a thin click front end over :mod:`mitool.estimation`, :mod:`mitool.benchmark`,
:mod:`mitool.toy` and :mod:`mitool.vision`.

Errors in what the user asked for (ValueError from the library, bad files) become a one-line
message and exit code 2, never a traceback; a package that a route needs and cannot import (torch
for a network), a one-line message naming what to install, exit code 1. Each sub-command's module
is imported when that command runs (or shows its help), so ``mitool --help`` imports none of them.
None imports torch, torchvision or matplotlib before its command runs, and ``estimate``, ``test``
and ``matrix`` import torch only to train a network and matplotlib only to draw a figure: their
k-NN, Gaussian, plug-in and permutation routes run without either (tests/test_no_torch.py).
"""

from __future__ import annotations

import importlib
import sys

try:
    import click

    from mitool.cli.errors import FriendlyGroup
except KeyboardInterrupt:  # a Ctrl-C while the command line itself is imported
    print("mitool: interrupted before anything was written", file=sys.stderr)
    sys.exit(130)

COMMANDS: dict[str, tuple[str, str, str]] = {
    "estimate": ("mitool.cli.estimate", "estimate_command", "Estimate I(X; Y) in nats from paired samples."),
    "test": ("mitool.cli.test", "test_command", "Is the dependence real? A permutation test of the MI."),
    "matrix": ("mitool.cli.matrix", "matrix_command", "The MI of every pair of columns, p- and q-values."),
    "benchmark": ("mitool.cli.benchmark", "benchmark", "Estimators x tasks with known MI x sizes x seeds."),
    "toy": ("mitool.cli.toy", "toy", "The toy MI study: every bound against the number of negatives K."),
    "vision": ("mitool.cli.vision", "vision", "Vision pretraining (MoCo v2, SiMo, SimCLR/DCL), evaluation."),
}  # fmt: skip
"""Each sub-command: its module, the click command in it, and its line in ``mitool --help``."""


class LazyGroup(FriendlyGroup):
    """A group whose commands are imported when one of them is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        module, attribute, _ = COMMANDS[name]
        return getattr(importlib.import_module(module), attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, summary) for name, (_, _, summary) in COMMANDS.items()])

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        """A Ctrl-C that no command caught (while the program starts, imports, reads its data): one
        line and exit 130, not click's "Aborted!" or a traceback."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("mitool: interrupted before anything was written", err=True)
            sys.exit(130)
        except ModuleNotFoundError as error:  # a route's own package, imported where it is needed
            missing = (error.name or "").partition(".")[0]
            if not missing or missing == "mitool":
                raise
            package = _PACKAGES.get(missing, missing)
            raise click.ClickException(
                f"this needs {missing}, which cannot be imported ({error}); install it: pip install {package}"
            ) from None


_PACKAGES = {"sklearn": "scikit-learn", "distributed": "mitool[distributed]", "dask": "mitool[distributed]"}
"""The pip name of an imported module where the two differ."""


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="mitool")
def main() -> None:
    """Mutual-information estimation with learned critics, and contrastive pretraining of
    vision encoders with the same bounds."""


if __name__ == "__main__":
    main()
