"""Settings dataclasses whose fields carry their meaning and their check, so that a setting's name,
default, help text and allowed values are written once, where it is declared: the estimators'
settings, the toy study's, the pretraining config. The command line makes its options from them
(:mod:`mitool.cli.options`).

    @dataclass(frozen=True)
    class MySettings(Settings):
        steps: int = setting(2000, "Most training steps.", partial(checks.whole_number, minimum=1))

A field's metadata: ``help`` (its meaning), ``check`` (``check(name, value) -> value``, run when
the settings are made; ParameterError naming the field), and optionally ``flag`` (the command
line's name for it when it is not the field's, ``--mi`` for ``mi_values``). The same fields make
the Parameters section of a docstring (:meth:`Settings.parameters`, :func:`with_parameters`): an
estimator's docstring lists its settings from here.

A setting that several classes have is declared once, in the class that holds it (the training
fields: :class:`mitool.estimators.base.TrainingSettings`; the networks' size:
:class:`mitool.critics.CriticSettings`), and each class that has it lists it in its own place with
:meth:`Settings.shared`, which keeps its meaning and check, and gives it the class's own default
where that differs:

    @dataclass(frozen=True)
    class ClassifierSettings(EstimatorSettings):
        steps: int = TrainingSettings.shared("steps", 3000)
        patience: int = TrainingSettings.shared("patience")
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

__all__ = ["Settings", "setting", "with_parameters"]


def setting(
    default: object,
    meaning: str,
    check: Callable[[str, Any], Any] | None = None,
    flag: str | None = None,
    default_factory: Callable[[], Any] | None = None,
) -> Any:
    """A settings field: its default, its meaning, its check and its command-line flag (see the module)."""
    metadata = {"help": meaning, "check": check, "flag": flag}
    if default_factory is not None:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class Settings:
    """Base of settings dataclasses: each value checked when made by its field's ``check``."""

    def __post_init__(self) -> None:
        for item in fields(self):
            check = item.metadata.get("check")
            if check is not None:
                object.__setattr__(self, item.name, check(item.name, getattr(self, item.name)))

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(item.name for item in fields(cls))

    @classmethod
    def shared(cls, name: str, default: object = MISSING) -> Any:
        """Field ``name`` as this class declares it (its meaning, check and flag; its default unless
        ``default`` is given), for another settings class to list in its own place (see the module)."""
        declared = {item.name: item for item in fields(cls)}[name]
        metadata = declared.metadata
        chosen = declared.default if default is MISSING else default
        return setting(chosen, metadata["help"], metadata["check"], metadata["flag"])

    @classmethod
    def parameters(cls) -> str:
        """The numpydoc Parameters section of these settings, indented by 4 spaces (as in a class's
        docstring): every field's name, type, default and meaning, as the fields declare them."""
        lines = ["    Parameters", "    ----------"]
        for item in fields(cls):
            kind = item.type if isinstance(item.type, str) else getattr(item.type, "__name__", str(item.type))
            default = item.default if item.default is not MISSING else item.default_factory()  # type: ignore[misc]
            lines.append(f"    {item.name} : {kind}, default {default!r}")
            lines += textwrap.wrap(
                item.metadata.get("help", ""), 96, initial_indent=" " * 8, subsequent_indent=" " * 8
            )
        return "\n".join(lines) + "\n"


def with_parameters(docstring: str, settings: type[Settings]) -> str:
    """``docstring`` (indented as in the source, 4 spaces) with the Parameters section of
    ``settings`` (:meth:`Settings.parameters`) before its Examples section, or at its end: a class
    made from settings (an estimator) lists them where they are declared, once."""
    parameters = settings.parameters()
    head, marker, examples = docstring.partition("    Examples\n    --------\n")
    if not marker:
        return f"{docstring.rstrip()}\n\n{parameters}"
    return f"{head}{parameters}\n{marker}{examples}"
