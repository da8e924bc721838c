"""Command-line options made from settings dataclasses, so that a setting's name, default and help
are written once, in its dataclass (:class:`mitool.estimators.base.EstimatorSettings`,
:class:`mitool.toy.config.ToySettings`, :class:`mitool.vision.config.PretrainConfig`).

A field ``batch_size`` becomes ``--batch-size`` (a boolean: ``--canonical/--no-canonical``), its
type that of its annotation, its help the field's ``help`` metadata with the default. Options taken
from several classes (the settings of every estimator) appear once; where the classes' defaults
differ the help lists them and the option's own default is None (each class keeps its own).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import click

__all__ = ["annotation_type", "given_options", "settings_options", "value_text"]

_TYPES = {"int": int, "float": float, "bool": bool, "str": str}


def annotation_type(field: dataclasses.Field) -> type:
    """int, float, bool or str from a field's annotation ("int", "float | None", ...); str otherwise."""
    text = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "str")
    parts = [part.strip() for part in text.split("|") if part.strip() != "None"]
    return _TYPES.get(parts[0], str) if parts else str


def value_text(value: object) -> str:
    """A default as the help shows it: 0.0005, 256, true/false, the text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _default_text(defaults: dict[str, object]) -> str:
    """ "[default: 5]" when the owners agree, "[ksg 5, mixed-ksg 3]" when they do not."""
    shown = {owner: value for owner, value in defaults.items() if value is not None}
    if not shown:
        return ""
    values = {value_text(value) for value in shown.values()}
    if len(values) == 1 and len(shown) == len(defaults):
        return f"[default: {values.pop()}]"
    return "[" + ", ".join(f"{owner} {value_text(value)}" for owner, value in shown.items()) + "]"


def settings_options(
    classes: Sequence[tuple[str, type]], skip: Sequence[str] = (), owners_in_help: bool = True
) -> Callable[[Callable], Callable]:
    """A decorator adding one option per field of the ``(owner, dataclass)`` pairs (fields named in
    ``skip`` left out). Each option's default is None: only what the user types reaches the
    settings (:func:`given_options`); the help shows the defaults, and with ``owners_in_help`` which
    owners take the option when not all do."""
    fields: dict[str, list[tuple[str, dataclasses.Field]]] = {}
    for owner, settings in classes:
        for field in dataclasses.fields(settings):
            if field.name not in skip:
                fields.setdefault(field.name, []).append((owner, field))
    options = []
    for name, owned in fields.items():
        first = owned[0][1]
        kind = annotation_type(first)
        flag = "--" + name.replace("_", "-")
        declarations = (f"{flag}/--no-{flag[2:]}", name) if kind is bool else (flag, name)
        text = first.metadata.get("help", "")
        owners = [owner for owner, _ in owned]
        if owners_in_help and len(owners) < len(classes):
            text += f" ({', '.join(owners)} only)" if len(owners) <= 3 else ""
        text = f"{text} {_default_text({owner: field.default for owner, field in owned})}".strip()
        options.append(
            click.option(*declarations, type=None if kind is bool else kind, default=None, help=text)
        )

    def add(function: Callable) -> Callable:
        for option in reversed(options):
            function = option(function)
        return function

    return add


def given_options(context: click.Context, names: Sequence[str]) -> dict[str, Any]:
    """The options of ``names`` that the user gave on the command line (their values)."""
    from click.core import ParameterSource

    return {
        name: context.params[name]
        for name in names
        if name in context.params and context.get_parameter_source(name) is ParameterSource.COMMANDLINE
    }
