"""Command-line options made from settings dataclasses (:mod:`mitool.settings`), so that a setting's
name, default and help are written once, in its dataclass.

A field ``batch_size`` becomes ``--batch-size`` (its metadata's ``flag`` where it names another;
a boolean: ``--canonical/--no-canonical``), its type that of its annotation (a tuple: a
comma-separated list of its items' type), its help the field's ``help`` with the default. Every
option's own default is None, so that only what the user typed reaches the settings
(:func:`given_options`) and each class keeps its defaults. Options taken from several classes (the
settings of every estimator) appear once; where their defaults differ the help lists them, and where
the command's default route (``routes``: :data:`mitool.estimators.DEFAULTS`, used when no
--estimator is given) sets another value the help says that too: ``[default: 1; 2 when --estimator
is not given, for X and Y continuous]``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import click

__all__ = [
    "FDR_CHOICES", "Z_METHOD_CHOICES", "OptionSpec", "fdr_option", "given_options", "help_all_option",
    "neighbours_option", "option_specs", "settings_options", "table_options", "value_text",
]  # fmt: skip


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


def _default_text(defaults: dict[str, object], routed: Sequence[str] = ()) -> str:
    """ "[default: 5]" when the owners agree, "[ksg 5, ross 3]" when they do not, and "[2000;
    classifier 3000]" when most agree (three or more); ``routed``: notes on the default route
    (:func:`_route_notes`) added after a semicolon."""
    shown = {owner: value for owner, value in defaults.items() if value is not None}
    texts = {owner: value_text(value) for owner, value in shown.items()}
    common = max(set(texts.values()), key=list(texts.values()).count) if texts else ""
    if not shown:
        inner = ""
    elif len(set(texts.values())) == 1 and len(shown) == len(defaults):
        inner = f"default: {common}"
    elif list(texts.values()).count(common) < 3:
        inner = ", ".join(f"{owner} {text}" for owner, text in texts.items())
    else:
        others = [f"{owner} {text}" for owner, text in texts.items() if text != common]
        inner = f"{common}; " + ", ".join(others)
    parts = [part for part in (inner, *routed) if part]
    return f"[{'; '.join(parts)}]" if parts else ""


def _route_notes(
    name: str, defaults: dict[str, object], routes: Mapping[str, Any] | None, chooser: str
) -> list[str]:
    """What the default routes set for setting ``name`` where it differs from the owner's default:
    "2 when --estimator is not given, for X and Y continuous" (the owner named first, "ksg rank
    ...", when the owners' defaults differ). ``routes``: kind of data -> an object with the
    ``name`` of the owner used and the ``settings`` it is given (:class:`mitool.estimators.Default`);
    a kind is described by :data:`mitool.estimators.base.CASES`."""
    if not routes:
        return []
    from mitool.estimators.base import CASES

    agree = len({value_text(value) for value in defaults.values()}) == 1
    cases: dict[str, list[str]] = {}
    for case, route in routes.items():
        if route.name not in defaults:
            continue
        own, kind = value_text(defaults[route.name]), CASES.get(case, case)
        settings = getattr(route, "settings", None) or {}
        bands = [band for band in getattr(route, "by_size", list)() if name in band[2]]
        value = value_text(settings[name]) if name in settings else own
        # the value for every size but those of the bands that set another, then each band's
        others = [other for _, other, band in bands if value_text(band[name]) != value]
        noted = [(value, "".join(f", {other}" for other in others))]
        noted += [(value_text(band[name]), f", {sizes}") for sizes, _, band in bands]
        for shown, sizes in noted:
            if shown != own:
                cases.setdefault(shown if agree else f"{route.name} {shown}", []).append(kind + sizes)
    return [f"{value} when {chooser} is not given, for {' or '.join(kinds)}" for value, kinds in
            cases.items()]  # fmt: skip


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
    routes: Mapping[str, Any] | None = None,
    chooser: str = "--estimator",
) -> dict[str, OptionSpec]:
    """The options of the fields of the ``(owner, dataclass)`` pairs, fields of ``skip`` left out;
    ``defaults`` replaces a field's default in the help (a command's own default), ``default_texts``
    the whole bracket (defaults that depend on other settings: "[moco 0.03, simclr 0.3]").
    ``routes``: what the command uses when the option ``chooser`` is not given
    (:data:`mitool.estimators.DEFAULTS`: kind of data -> owner and settings); where a route gives a
    setting another value than its owner's default, the help says both ("[default: 1; 2 when
    --estimator is not given, for X and Y continuous]")."""
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
        routed = _route_notes(name, shown, routes, chooser)
        bracket = (default_texts or {}).get(name, _default_text(shown, routed))
        specs[name] = OptionSpec(name, flag, kind, is_list, f"{meaning} {bracket}".strip(), shown)
    return specs


def settings_options(specs: dict[str, OptionSpec], hidden: bool = False) -> Callable[[Callable], Callable]:
    """A decorator adding the options of ``specs`` (:func:`option_specs`), each with default None;
    ``hidden``: listed by ``--help-all`` only (:func:`help_all_option`)."""
    options = []
    for spec in specs.values():
        if spec.kind is bool and not spec.is_list:
            switch = spec.flag if "/" in spec.flag else f"{spec.flag}/--no-{spec.flag[2:]}"
            declarations = (switch, spec.name)
            options.append(click.option(*declarations, default=None, help=spec.help, hidden=hidden))
        else:
            kind = str if spec.is_list else spec.kind
            options.append(
                click.option(spec.flag, spec.name, type=kind, default=None, help=spec.help, hidden=hidden)
            )

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


def table_options(function: Callable) -> Callable:
    """The options every command that reads X and Y shares: ``--x``/``--y`` (columns of one table,
    :func:`mitool.cli.io.read_variables`) and ``--missing`` (what a missing value does,
    :data:`mitool.estimators.values.MISSING_CHOICES`)."""
    from mitool.estimators.values import MISSING_CHOICES

    options = [
        click.option(
            "--x", "x_columns", default=None, metavar="NAMES",
            help="With one table (a CSV file with a header) as X and no Y: the columns of X, comma-separated "
            "(--given then names columns of Z).",
        ),
        click.option("--y", "y_columns", default=None, metavar="NAMES", help="With --x: the columns of Y."),
        click.option(
            "--missing", default="drop", show_default=True, type=click.Choice(list(MISSING_CHOICES)),
            help="; ".join(f"{name}: {meaning}" for name, meaning in MISSING_CHOICES.items())
            + " (missing: empty fields, NA, NaN, null in a CSV file).",
        ),
    ]  # fmt: skip
    for option in reversed(options):
        function = option(function)
    return function


def help_all_option(details: Callable[[], str]) -> Callable[[Callable], Callable]:
    """``--help-all``: the help with the hidden options too (the estimators' own settings) and, after
    it, ``details()`` (how the command works, the estimators and their defaults). ``--help`` stays a
    screen long and says that ``--help-all`` has the rest."""

    def show(context: click.Context, parameter: click.Parameter, value: bool) -> None:
        if not value or context.resilient_parsing:
            return
        for option in context.command.params:
            option.hidden = False
        context.command.epilog = details()
        click.echo(context.get_help(), color=context.color)
        context.exit()

    return click.option(
        "--help-all", is_flag=True, expose_value=False, is_eager=True, callback=show,
        help="Show every option (the estimators' own settings), how the command works, the estimators and "
        "their defaults.",
    )  # fmt: skip


FDR_CHOICES = ("bh", "by")
"""``--fdr``: :data:`mitool.independence.FDR_METHODS`, written here so that reading the options does
not import the tests (a test checks that the two agree)."""

Z_METHOD_CHOICES = ("auto", "residual", "local", "gcm")
"""``--z-method``: :data:`mitool.independence.Z_METHODS`, likewise."""


def fdr_option(items: str, when: str = "") -> Callable[[Callable], Callable]:
    """``--fdr bh|by``: the q-values over the ``items`` (pairs, columns), ``when`` they are made."""
    return click.option(
        "--fdr", type=click.Choice(FDR_CHOICES), default="bh", show_default=True,
        help=f"The q-values over the {items}{when}: bh, Benjamini-Hochberg (its false discovery rate bound "
        f"needs the null {items}' p-values independent or positively dependent); by, Benjamini-Yekutieli "
        "(a bound under any dependence, the q-values times sum_{i<=m} 1/i).",
    )  # fmt: skip


def neighbours_option() -> Callable[[Callable], Callable]:
    """``--k``: the neighbours of the tests' k-NN statistics."""
    return click.option(
        "--k", type=int, default=None,
        help="Neighbours of the k-NN statistics [default: 20, at most n / 10 and at least 3]; more "
        "neighbours give more power against weak, smooth dependence (bench/independence.py --extra-k).",
    )  # fmt: skip
