"""Command-line options made from settings dataclasses (:mod:`mitool.settings`), so that a setting's
name, default and help are written once, in its dataclass.

A field ``batch_size`` becomes ``--batch-size`` (its metadata's ``flag`` where it names another;
a boolean: ``--canonical/--no-canonical``), its type that of its annotation (a tuple: a
comma-separated list of its items' type), its help the field's ``help`` with the default. Every
option's own default is None, so that only what the user typed reaches the settings
(:func:`given_options`) and each class keeps its defaults. Options taken from several classes (the
settings of every estimator) appear once; where their defaults differ the help lists them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import click

__all__ = ["OptionSpec", "flag_name", "given_options", "option_specs", "settings_options", "value_text"]


def flag_name(spec: OptionSpec) -> str:
    """The option's first flag: ``--small-stem`` of ``--small-stem/--stock-stem``."""
    return spec.flag.split("/")[0]


_TYPES = {"int": int, "float": float, "bool": bool, "str": str}


@dataclasses.dataclass(frozen=True)
class OptionSpec:
    """How a settings field appears on the command line: its flag, type, whether it is a list."""

    name: str
    flag: str
    kind: type
    is_list: bool
    help: str
    defaults: dict[str, object]


def _kind(field: dataclasses.Field) -> tuple[type, bool]:
    """(item type, is a tuple) from a field's annotation ("int", "float | None", "tuple[str, ...]")."""
    text = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "str")
    parts = [part.strip() for part in text.split("|") if part.strip() != "None"]
    first = parts[0] if parts else "str"
    if first.startswith("tuple["):
        return _TYPES.get(first[6:].split(",")[0].strip(), str), True
    return _TYPES.get(first, str), False


def value_text(value: object) -> str:
    """A default as the help shows it: 0.0005, 256, true/false, 2,4,6, the text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (tuple, list)):
        return ",".join(value_text(item) for item in value)
    return str(value)


def _default_text(defaults: dict[str, object]) -> str:
    """ "[default: 5]" when the owners agree, "[ksg 5, ross 3]" when they do not, and "[2000;
    classifier 3000]" when most agree (three or more)."""
    shown = {owner: value for owner, value in defaults.items() if value is not None}
    if not shown:
        return ""
    texts = {owner: value_text(value) for owner, value in shown.items()}
    if len(set(texts.values())) == 1 and len(shown) == len(defaults):
        return f"[default: {next(iter(texts.values()))}]"
    common = max(set(texts.values()), key=list(texts.values()).count)
    if list(texts.values()).count(common) < 3:
        return "[" + ", ".join(f"{owner} {text}" for owner, text in texts.items()) + "]"
    others = [f"{owner} {text}" for owner, text in texts.items() if text != common]
    return f"[{common}; " + ", ".join(others) + "]"


def _default(field: dataclasses.Field) -> object:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return None


def option_specs(
    classes: Sequence[tuple[str, type]],
    skip: Sequence[str] = (),
    defaults: dict[str, object] | None = None,
    default_texts: dict[str, str] | None = None,
) -> dict[str, OptionSpec]:
    """The options of the fields of the ``(owner, dataclass)`` pairs, fields of ``skip`` left out;
    ``defaults`` replaces a field's default in the help (a command's own default), ``default_texts``
    the whole bracket (defaults that depend on other settings: "[moco 0.03, simclr 0.3]")."""
    owned: dict[str, list[tuple[str, dataclasses.Field]]] = {}
    for owner, settings in classes:
        for field in dataclasses.fields(settings):
            if field.name not in skip:
                owned.setdefault(field.name, []).append((owner, field))
    specs = {}
    for name, pairs in owned.items():
        first = pairs[0][1]
        kind, is_list = _kind(first)
        flag = first.metadata.get("flag") or "--" + name.replace("_", "-")
        shown = {owner: _default(field) for owner, field in pairs}
        if defaults and name in defaults:
            shown = {owner: defaults[name] for owner in shown}
        meaning = first.metadata.get("help", "")
        if len(pairs) < len(classes) and len(pairs) <= 3:
            meaning += f" ({', '.join(owner for owner, _ in pairs)} only)"
        bracket = (default_texts or {}).get(name, _default_text(shown))
        specs[name] = OptionSpec(name, flag, kind, is_list, f"{meaning} {bracket}".strip(), shown)
    return specs


def settings_options(specs: dict[str, OptionSpec]) -> Callable[[Callable], Callable]:
    """A decorator adding the options of ``specs`` (:func:`option_specs`), each with default None."""
    options = []
    for spec in specs.values():
        if spec.kind is bool and not spec.is_list:
            switch = spec.flag if "/" in spec.flag else f"{spec.flag}/--no-{spec.flag[2:]}"
            declarations = (switch, spec.name)
            options.append(click.option(*declarations, default=None, help=spec.help))
        else:
            kind = str if spec.is_list else spec.kind
            options.append(click.option(spec.flag, spec.name, type=kind, default=None, help=spec.help))

    def add(function: Callable) -> Callable:
        for option in reversed(options):
            function = option(function)
        return function

    return add


def given_options(context: click.Context, specs: dict[str, OptionSpec]) -> dict[str, Any]:
    """The options of ``specs`` that the user gave on the command line, lists parsed."""
    from click.core import ParameterSource

    from mitool.cli.common import parse_list

    given = {}
    for name, spec in specs.items():
        if name in context.params and context.get_parameter_source(name) is ParameterSource.COMMANDLINE:
            value = context.params[name]
            given[name] = tuple(parse_list(name, value, spec.kind, unique=False)) if spec.is_list else value
    return given
