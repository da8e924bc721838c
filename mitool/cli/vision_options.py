"""The options that ``vision pretrain`` and ``vision sweep`` share, made from
:class:`mitool.vision.config.PretrainConfig`, with the defaults that depend on the method shown per
method (from :data:`mitool.vision.method_specs.METHODS`)."""

from __future__ import annotations

from mitool.cli.options import OptionSpec, option_specs
from mitool.vision.config import DEFAULTS, LARS_DEFAULTS, PretrainConfig
from mitool.vision.method_specs import METHODS

__all__ = ["METHOD_DEPENDENT", "default_text", "pretrain_options"]


def _flag(setting: str) -> str:
    return "--" + setting.replace("_", "-")


def _loss_users(option: str) -> list[str]:
    from mitool import bounds

    return [name for name in bounds.INFONCE_FAMILY if option in bounds.BOUNDS[name].option_names]


def _number(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def default_text(setting: str) -> str:
    """The default of ``setting`` for the help: "[200]" when the methods agree, else one value
    per method ("[moco 0.03, simo 0.03, simclr 0.3]"), then the datasets that change it, then its
    value with LARS (:data:`mitool.vision.config.LARS_DEFAULTS`)."""
    values = {name: method.defaults.get(setting, DEFAULTS.get(setting)) for name, method in METHODS.items()}
    given = {name: value for name, value in values.items() if value is not None}
    if not given:
        return ""
    if len({_number(value) for value in given.values()}) == 1 and len(given) == len(values):
        text = _number(next(iter(given.values())))
    else:
        text = ", ".join(f"{name} {_number(value)}" for name, value in given.items())
    for name, method in METHODS.items():
        for dataset, row in method.dataset_defaults.items():
            if setting in row:
                text += f"; {name} on {dataset}: {_number(row[setting])}"
    if setting in LARS_DEFAULTS:
        text += f"; with lars: {_number(LARS_DEFAULTS[setting])}"
    return f"[{text}]"


METHOD_DEPENDENT = tuple(
    dict.fromkeys(["loss", *DEFAULTS, *(s for m in METHODS.values() for s in m.defaults)])
)
"""The settings whose default comes from the method (and the dataset)."""


def pretrain_options(skip: tuple[str, ...] = ()) -> dict[str, OptionSpec]:
    """The per-run options of ``vision pretrain`` (and of ``vision sweep``), from PretrainConfig."""
    return option_specs(
        [("pretrain", PretrainConfig)], skip=("schedule_steps", "out", *skip),
        default_texts={name: default_text(name) for name in METHOD_DEPENDENT if default_text(name)},
    )  # fmt: skip
