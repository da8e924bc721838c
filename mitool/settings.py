"""Settings dataclasses whose fields carry their meaning and their check, so that a setting's name,
default, help text and allowed values are written once, where it is declared: the estimators'
settings, the toy study's, the pretraining config. The command line makes its options from them
(:mod:`mitool.cli.options`).

    @dataclass(frozen=True)
    class MySettings(Settings):
        steps: int = setting(2000, "Most training steps.", partial(checks.whole_number, minimum=1))

A field's metadata: ``help`` (its meaning), ``check`` (``check(name, value) -> value``, run when
the settings are made; ParameterError naming the field), and optionally ``flag`` (the command
line's name for it when it is not the field's, ``--mi`` for ``mi_values``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["Settings", "setting"]


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
    def help(cls) -> dict[str, tuple[object, str]]:
        """Each field's (default, meaning)."""
        return {item.name: (item.default, item.metadata.get("help", "")) for item in fields(cls)}

    def replace(self, **changes: object) -> Settings:
        return dataclasses.replace(self, **changes)
