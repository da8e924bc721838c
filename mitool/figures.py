"""What every figure of mitool shares: the formats, the paper style, the atomic save.

Figures are made to be read at a paper column's width: :data:`COLUMN_WIDTH` inches across (two
columns: :data:`PAGE_WIDTH`), fonts of at least 8 pt (:func:`paper_style`), and saved through
:func:`save`, which writes the file atomically (:mod:`mitool._infra.files`) and closes the figure.
matplotlib is imported when a figure is made, not before (the command line stays fast), and
:func:`pyplot` is the one place that chooses its backend (Agg: files only): the modules that draw
call it (or :func:`paper_style`) rather than importing ``matplotlib.pyplot`` themselves.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mitool import checks

__all__ = ["COLUMN_WIDTH", "FORMATS", "PAGE_WIDTH", "check_format", "paper_style", "pyplot", "save"]

FORMATS: tuple[str, ...] = ("png", "pdf", "svg")
"""The figure formats (pdf and svg are vector)."""

COLUMN_WIDTH = 3.5
"""Inches: one column of a two-column paper."""

PAGE_WIDTH = 7.2
"""Inches: both columns."""

_STYLE = {
    "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "xtick.labelsize": 8, "ytick.labelsize": 8,
    "legend.fontsize": 8, "figure.titlesize": 9, "lines.linewidth": 1.2, "lines.markersize": 4,
    "axes.linewidth": 0.6, "grid.linewidth": 0.5, "savefig.dpi": 200,
}  # fmt: skip


def check_format(file_format: str) -> str:
    """``file_format`` when it is one of :data:`FORMATS` (ParameterError otherwise)."""
    return checks.choice("file_format", file_format, FORMATS)


def pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@contextlib.contextmanager
def paper_style() -> Iterator[Any]:
    """pyplot with fonts of 8 pt and thin lines, for figures of a column's width."""
    plt = pyplot()
    with plt.rc_context(_STYLE):
        yield plt


def save(figure: Any, path: str | Path, file_format: str | None = None, dpi: int = 200) -> Path:
    """Write ``figure`` to ``path`` atomically in ``file_format`` (default: the path's extension),
    tightly cropped, and close it; returns the path."""
    from mitool._infra.files import atomic_write_bytes

    path = Path(path)
    chosen = check_format(file_format or path.suffix.lstrip(".").lower() or "png")
    buffer = io.BytesIO()
    figure.savefig(buffer, format=chosen, dpi=dpi, bbox_inches="tight")
    pyplot().close(figure)
    atomic_write_bytes(path, buffer.getvalue())
    return path
