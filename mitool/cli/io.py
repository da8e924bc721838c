"""Reading paired samples from files for the command line: .npy, .npz (one array) or .csv.

``load_samples(path, name) -> Samples``: the values (numbers, or text labels) and, in words, what
was decided while reading them (a header's column names, an index column left out, label columns),
for the result's notes. The CSV rules are pure functions of the file's rows (:func:`table`); the
file handling around them is thin.
"""

from __future__ import annotations

import csv
import datetime
import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from mitool.estimators.base import IMAGE_DIMENSIONS, image_note
from mitool.estimators.values import MISSING_TEXT

__all__ = ["SUFFIXES", "Samples", "load_samples", "read_variables", "table"]

SUFFIXES = (".npy", ".npz", ".csv")

INDEX_NAMES = ("", "unnamed: 0", "index")
"""Header names of a first column that may be a row index: none (pandas' ``to_csv``, R's
``write.csv``), pandas' name for that column read back (``Unnamed: 0``), and ``reset_index``'s."""

MIXED = "(a column of numbers holds numbers only, and a header is a first line of names only)"
"""What a field that is not a number in a column of mostly numbers breaks (a column of mostly words is
read as labels, its numbers too)."""

SHOWN = 6
"""At most this many column names or labels are listed in a note; more are the first few and a count."""


@dataclass(frozen=True)
class Samples:
    """The samples of one file, one row per sample.

    values: (n, d); float64 when every column holds numbers, otherwise dtype object with Python
        floats in the number columns and ``str`` in the label columns (labels are not coded here:
        :func:`mitool.estimate` codes them);
    columns: the column names from a CSV header (without a left-out index column; "" where the
        header leaves one empty), None without a header;
    notes: what was decided while reading, each starting with the name ("X: ..."), for the
        result's notes;
    image_shape: the shape of each sample of a .npy/.npz array of images, (H, W) or (C, H, W)
        (``values`` holds them flattened), None otherwise.
    """

    values: np.ndarray
    columns: tuple[str, ...] | None = None
    notes: tuple[str, ...] = ()
    image_shape: tuple[int, ...] | None = None
    unusable: tuple[tuple[str, str], ...] = ()
    """(column name, the error it gives if used): columns of a table read with ``lenient`` whose
    fields cannot be read (a word among numbers), an error only for a question that uses them."""

    def select(self, name: str, parameter: str, names: str, path: str | Path) -> Samples:
        """The columns ``names`` (comma-separated, as the header names them) of this table as the
        samples of ``name`` ("X", "Y" or "Z"); a ParameterError naming ``parameter`` and the table's
        columns where one is not there."""
        from mitool.checks import ParameterError

        wanted = [part.strip() for part in names.split(",") if part.strip()]
        if self.columns is None:
            raise ParameterError(
                parameter, f"names columns, but {Path(path).name} has no header line of names"
            )
        missing = [part for part in wanted if part not in self.columns]
        if missing or not wanted:
            listed = ", ".join(self.columns[:40]) + " ..." * (len(self.columns) > 40)
            raise ParameterError(
                parameter, f"names {', '.join(map(repr, missing)) or 'no column'}, not a column of "
                f"{Path(path).name}; its columns: {listed}",
            )  # fmt: skip
        unusable = dict(self.unusable)
        for part in wanted:
            if part in unusable:
                raise ValueError(unusable[part])
        index = [self.columns.index(part) for part in wanted]
        values = self.values[:, index]
        if values.dtype == object and all(isinstance(value, float) for value in values.ravel()):
            values = values.astype(np.float64)
        note = f"{name}: column{'s' * (len(wanted) > 1)} {_listed(wanted)} of {Path(path).name}"
        return Samples(values, tuple(wanted), (note,))

    def as_given(self) -> np.ndarray:
        """The samples as the file gave them: images as images (n, H, W) or (n, C, H, W), which
        :func:`mitool.estimate` reads as such (and notes), else ``values``."""
        if self.image_shape is None:
            return self.values
        return self.values.reshape(len(self.values), *self.image_shape)


def read_variables(
    x: str, y: str | None, z: str | None, x_columns: str | None, y_columns: str | None
) -> list[Samples]:
    """The samples of X, Y (and Z) from a file each, or, where ``x_columns`` and ``y_columns`` name
    columns (comma-separated), from the one table ``x``, Z then naming its columns too. Errors are
    one line naming the option (ParameterError) or the file (ValueError)."""
    from mitool.checks import ParameterError

    if x_columns is None and y_columns is None:
        if y is None:
            raise ParameterError(
                "y", "is missing: give Y's file, or name columns of the one table X with {=x_columns} and "
                "{=y_columns}", ("x_columns", "y_columns"),
            )  # fmt: skip
        return [load_samples(path, name) for path, name in ((x, "X"), (y, "Y"), (z, "Z")) if path is not None]
    for parameter, given in (("x_columns", x_columns), ("y_columns", y_columns)):
        if given is None:
            raise ParameterError(
                parameter, "is needed too: {=x_columns} and {=y_columns} name the columns of the one table X",
                ("x_columns", "y_columns"),
            )  # fmt: skip
    if y is not None:
        raise ParameterError(
            "y", f"({y}) cannot be given with {{=x_columns}}: X is then the one table", ("x_columns",)
        )
    table = load_samples(x, "table", lenient=True)
    chosen = [("X", "x_columns", x_columns), ("Y", "y_columns", y_columns), ("Z", "z", z)]
    read = [table.select(name, parameter, names, x) for name, parameter, names in chosen if names is not None]
    return [replace(read[0], notes=(*table.notes, *read[0].notes)), *read[1:]]


def load_samples(path: str | Path, name: str, lenient: bool = False) -> Samples:
    """The samples of a .npy, .npz (one array) or .csv file (:func:`table` says how a CSV is read);
    1-D data become (n, 1). Numbers may not be infinite (NaN is a missing value); a .npy/.npz
    array of text (dtype <U) holds labels. ``name`` ("X", "Y" or "Z") starts every note and every
    error message: ValueError (or FileNotFoundError) with one line naming the file and the
    problem. ``lenient``: a CSV column whose fields cannot be read is kept aside
    (:attr:`Samples.unusable`) rather than refused, for a table of which some columns are asked."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{name}: no such file: {path}")
    if not path.is_file():
        raise ValueError(f"{name}: not a file: {path}")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(
            f"{name}: unsupported file type {suffix or '(none)'!r}; allowed: {', '.join(SUFFIXES)}"
        )
    try:
        if suffix == ".csv":
            return _read_csv(path, name, lenient)
        data = _read_array(path, suffix, name)
    except ValueError as error:
        if str(error).startswith(f"{name}:"):
            raise
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ValueError(f"{name}: cannot read {path} as {suffix} data: {first_line}") from None
    except (OSError, EOFError) as error:
        raise ValueError(f"{name}: cannot read {path}: {error}") from None
    return _array_samples(np.asarray(data), path, name)


NPY_MAGIC = b"\x93NUMPY"
"""How every .npy file starts (numpy's format)."""


def _read_array(path: Path, suffix: str, name: str) -> np.ndarray:
    if suffix == ".npy":
        with open(path, "rb") as stream:
            if stream.read(len(NPY_MAGIC)) != NPY_MAGIC:
                raise ValueError(f"{name}: {path} is not a numpy array file (no .npy header)")
        return np.load(path, allow_pickle=False)
    with np.load(path, allow_pickle=False) as archive:
        keys = list(archive.keys())
        if len(keys) != 1:
            held = f"{len(keys)} arrays ({', '.join(keys) or 'none'})"
            raise ValueError(f"{name}: {path} holds {held}; give one array per file")
        return archive[keys[0]]


def _array_samples(data: np.ndarray, path: Path, name: str) -> Samples:
    """A .npy/.npz array as samples: numbers (finite, as float64) or text labels (dtype <U, as
    ``str`` in an object array; pickled object arrays are not read, so no other dtype holds labels)."""
    if data.dtype.kind not in "biufU":
        raise ValueError(
            f"{name}: {path} must hold numbers or text labels (dtype <U), got dtype {data.dtype}"
        )
    notes, image_shape = ((note,) if (note := image_note(name, data)) else ()), None
    if data.ndim == 1:
        data = data[:, None]
    if data.ndim in IMAGE_DIMENSIONS:
        image_shape, data = data.shape[1:], data.reshape(len(data), -1)
    if data.ndim != 2 or data.shape[0] < 1 or data.shape[1] < 1:
        raise ValueError(
            f"{name}: expected one row per sample (a 1-D or 2-D array, or images (n, H, W) or (n, C, H, W)), "
            f"got shape {data.shape}"
        )
    if data.dtype.kind == "U":
        labels = data.astype(object)
        columns = [(f"{j + 1}", labels[:, j]) for j in range(data.shape[1])]
        return Samples(labels, None, (*notes, _labels_note(name, columns)))
    data = data.astype(np.float64)
    bad = np.isinf(data)
    if bad.any():
        row = int(np.argwhere(bad)[0][0])
        raise ValueError(f"{name}: {path} holds infinite values (first in row {row}); remove or fill them")
    return Samples(data, None, notes, image_shape)


# --- CSV: the rules, as functions of the rows -------------------------------------------------------


def _read_csv(path: Path, name: str, lenient: bool = False) -> Samples:
    """The samples of a CSV file by :func:`table`; a file of numbers only is parsed by numpy (the
    same rules, five times faster), anything else, or any problem, by the csv module, which names the
    line and column of a bad field. A leading byte-order mark (as Excel writes) is skipped."""
    with open(path, newline="", encoding="utf-8-sig") as stream:
        reader = csv.reader(stream, skipinitialspace=True)
        first = next((_fields(row) for row in reader if any(_fields(row))), None)
        skipped = reader.line_num
    if first is not None and (not any(_is_number(field) for field in first) or _above_an_index(first)):
        numbers = _numbers(path, skipped)
        if numbers is not None and numbers.shape[1] == len(first):
            return _samples(tuple(first), list(numbers.T), name, path)
    elif first is not None and first != _column_numbers(len(first)):
        numbers = _numbers(path, 0)
        if numbers is not None:
            return _samples(None, list(numbers.T), name, path)
    return table(_rows(path), name, path, lenient)


def _numbers(path: Path, skip: int) -> np.ndarray | None:
    """The (n, d) finite numbers of ``path`` after its first ``skip`` lines, or None when it is not
    that (then :func:`table` says why, or reads labels)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # numpy's "input contained no data": table says it
            data = np.loadtxt(
                path,
                delimiter=",",
                skiprows=skip,
                ndmin=2,
                comments=None,
                quotechar='"',
                encoding="utf-8-sig",
            )
    except ValueError:
        return None
    if data.shape[1] == 1 and _inner_blank_line(path):
        return None
    return data if data.size and np.isfinite(data).all() else None


def _inner_blank_line(path: Path) -> bool:
    """Whether a blank line lies between two lines of data: a missing value in a file of one column."""
    lines = path.read_text(encoding="utf-8-sig").splitlines()
    filled = [i for i, line in enumerate(lines) if line.strip()]
    return bool(filled) and any(not line.strip() for line in lines[filled[0] : filled[-1]])


def _rows(path: Path) -> list[tuple[int, list[str]]]:
    """The rows of a CSV file, each with the line it starts on. Blank lines are left out, but for
    those between lines of data in a file of one column: there a blank line is a missing value (as
    some writers leave it), and leaving it out would pair the rows below with the wrong rows of the
    other file. A line of empty fields (",,", or a quoted empty field) is a row of missing values."""
    rows: list[tuple[int, list[str]]] = []
    with open(path, newline="", encoding="utf-8-sig") as stream:
        reader = csv.reader(stream, skipinitialspace=True)
        start = 1
        for row in reader:
            rows.append((start, _fields(row) if row else []))  # a blank line reads as []
            start = reader.line_num + 1
    filled = [i for i, (_, fields) in enumerate(rows) if fields]
    if not filled:
        return []
    rows = rows[filled[0] : filled[-1] + 1]
    one_column = len(rows[0][1]) == 1
    return [(line, fields or [""]) for line, fields in rows if fields or one_column]


def _fields(row: list[str]) -> list[str]:
    """The fields without surrounding spaces, and without the quotes the csv module leaves when a
    space follows the closing one."""
    fields = [field.strip() for field in row]
    return [
        field[1:-1].strip() if len(field) >= 2 and field[0] == field[-1] == '"' else field for field in fields
    ]


def table(rows: Sequence[tuple[int, Sequence[str]]], name: str, path: Path, lenient: bool = False) -> Samples:
    """The samples of a CSV file's rows: (line, stripped fields) without blank lines.

    Decided here, and why:

    * header: the first line is a header when none of its fields is a number (an empty field, as
      pandas writes above its index, is not one), unless each of its fields also occurs in its
      column further down: then it is the first row of a file of labels (a name is not one of its
      column's values; a file of labels whose first row has a label seen nowhere else loses that row
      to the header, which the notes then name). A line of numbers is a header where it is pandas'
      column numbers (:func:`_numbered_header`). With a header the notes name the columns.
    * columns: a column is numbers, or labels when more of its fields are words than numbers
      (class names such as "setosa", car models some of which read as numbers); labels stay strings
      (:func:`mitool.estimate` codes them and takes them as discrete) and a note says so; a column
      of ISO dates is days since the first. A missing value (:data:`MISSING_TEXT`: an empty field,
      NA, NaN, null, ...) is NaN (None among labels) in its own row. A word in a column of numbers,
      infinity, or a line of another width is an error naming the line and column as an editor
      counts them (from 1).
    * index: a first column that is a row index (as pandas and R write it) is left out, or kept
      with a note when it may be data (:func:`_index_decision`).
    """
    if not rows:
        raise ValueError(f"{name}: {path} holds no data rows")
    first_line, first = rows[0]
    header = None
    body = rows
    if not any(_is_number(field) for field in first):
        if len(rows) == 1:
            raise ValueError(f"{name}: {path} holds no data rows")
        _check_widths(rows[1:], name, path)
        below = [set(column) for column in _transposed(rows[1:])]
        repeated = len(first) == len(below) and all(
            field in seen for field, seen in zip(first, below, strict=True)
        )
        if not repeated:
            header, body = tuple(first), rows[1:]
    elif len(rows) > 1 and _numbered_header(first, [fields[0] for _, fields in rows[1:]]):
        header, body = tuple(first), rows[1:]
    if header is not None and len(header) != len(body[0][1]):
        raise ValueError(
            f"{name}: {path} line {first_line} (a header) has {len(header)} fields, "
            f"the first data line {len(body[0][1])}"
        )
    _check_widths(body, name, path)
    columns, date_notes, unusable = _columns(body, name, path, header, lenient)
    samples = _samples(header, columns, name, path)
    named = tuple((header[j], problem) for j, problem in unusable.items()) if header else ()
    samples = replace(samples, notes=(*samples.notes, *date_notes), unusable=named)
    if header is None and first == ["0"] and len(rows) > 1:
        kept = (
            f"{name}: line {first_line} reads 0, as pandas heads a column it numbered; kept as data, "
            "since the column holds whole numbers (if it is a header, write the file with "
            "to_csv(index=False, header=False))"
        )
        samples = replace(samples, notes=(kept, *samples.notes))
    return samples


WHOLE_NUMBER = re.compile(r"[+-]?[0-9]+")
"""A field written as a whole number: how pandas writes an integer; its floats have a decimal point."""


def _numbered_header(first: Sequence[str], column: Sequence[str]) -> bool:
    """Whether a first line that holds numbers is the header pandas' ``to_csv`` writes, and why.

    A frame made from an array has its columns named 0, 1, ..., d - 1, and ``to_csv`` writes those
    names as the first line, after an empty field above its index (unless ``index=False``).
    ``column`` is the first column's fields below that line.

    * An empty first field and no other (:func:`_above_an_index`): a header, whatever the other
      names are but for numbers with a fraction (in a line of data an empty field would be a
      missing value).
    * Exactly 0, 1, ..., d - 1 with d >= 2 columns: a header (a file of data whose first row is
      exactly that is rarer than a frame written with its column numbers), unless the first column
      goes on 1, 2, 3, ... below it: then the line is the first row of a file with a row number.
    * 0 alone, one column: a header when the column below holds a number not written as a whole
      number (pandas writes floats with a decimal point), else data (counts may start at 0).
    """
    if _above_an_index(first):
        return True
    if list(first) != _column_numbers(len(first)):
        return False
    if len(first) == 1:
        return any(not WHOLE_NUMBER.fullmatch(field) for field in column)
    return list(column) != _column_numbers(len(column) + 1)[1:]


def _above_an_index(first: Sequence[str]) -> bool:
    """A first line of an empty field, then names, none of them a number but a whole one (column
    numbers, years): what pandas writes above its index. A first line of data missing its first
    value (",1.5,2") is not one: its empty field is a missing value."""
    names = first[1:]
    return (
        len(first) > 1
        and first[0] == ""
        and all(names)
        and all(WHOLE_NUMBER.fullmatch(name) or not _is_number(name) for name in names)
    )


def _column_numbers(width: int) -> list[str]:
    """The names pandas gives the columns of a frame made from an array: "0", "1", ..., as text."""
    return [str(j) for j in range(width)]


def _samples(header: tuple[str, ...] | None, columns: list[np.ndarray], name: str, path: Path) -> Samples:
    """The columns (float64 numbers or object arrays of labels) as samples, with the notes: an index
    column left out (or kept), the header's names, the label columns."""
    index_note, drop = _index_decision(columns[0], header, len(columns), name)
    notes = [index_note] if index_note else []
    kept = list(range(int(drop), len(columns)))
    if header is not None:
        shown = _listed([_one_line(header[j]) or f"(column {j + 1} unnamed)" for j in kept])
        notes.append(f"{name}: column{'s' if len(kept) > 1 else ''} {shown} (from the header of {path.name})")
    labels = [j for j in kept if columns[j].dtype == object]
    if not labels:
        values = np.stack([columns[j] for j in kept], axis=1)
    else:
        titles = [_one_line(header[j]) if header and header[j] else f"{j + 1}" for j in labels]
        notes.append(
            _labels_note(name, [(title, columns[j]) for title, j in zip(titles, labels, strict=True)])
        )
        values = np.empty((len(columns[0]), len(kept)), dtype=object)
        for i, j in enumerate(kept):
            values[:, i] = columns[j].tolist()
    names = None if header is None else tuple(header[j] for j in kept)
    return Samples(values, names, tuple(notes))


def _is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def _transposed(rows: Sequence[tuple[int, Sequence[str]]]) -> list[tuple[str, ...]]:
    """The columns of rows of one width."""
    return list(zip(*(fields for _, fields in rows), strict=True))


def _check_widths(rows: Sequence[tuple[int, Sequence[str]]], name: str, path: Path) -> None:
    width = len(rows[0][1])
    for line, fields in rows:
        if len(fields) != width:
            raise ValueError(
                f"{name}: {path} line {line} has {len(fields)} fields, the first data line {width}"
            )


def _columns(
    body: Sequence[tuple[int, Sequence[str]]],
    name: str,
    path: Path,
    header: tuple[str, ...] | None,
    lenient: bool = False,
) -> tuple[list[np.ndarray], list[str], dict[int, str]]:
    """Each column as float64 numbers or an object array of labels (``str``), and the notes on
    columns read as dates. A missing value (:data:`MISSING_TEXT`: an empty field, NA, NaN, null, ...)
    is NaN in a column of numbers and None in one of labels; :mod:`mitool.estimators.values` decides
    what it does. A column of dates and times (ISO 8601, as pandas and R write them) becomes the days
    since its earliest one. The first bad field of the table (by line, then column: infinity, or a
    word in a column of numbers) is an error naming it; with ``lenient`` (and a header) each bad
    column's error is returned by column instead (a question that uses the column raises it)."""
    lines = [line for line, _ in body]
    columns: list[np.ndarray] = []
    notes: list[str] = []
    problems: list[tuple[int, int, str]] = []
    for j, fields in enumerate(_transposed(body)):
        title = _one_line(header[j]) if header and header[j] else f"{j + 1}"
        gaps = [field.lower() in MISSING_TEXT for field in fields]
        present = [field for field, gap in zip(fields, gaps, strict=True) if not gap]
        numeric = [_is_number(field) for field in present]
        if all(numeric):
            numbers = np.array([math.nan if gap else float(f) for f, gap in zip(fields, gaps, strict=True)])
            if np.isinf(numbers).any():
                i = int(np.argmax(np.isinf(numbers)))
                problems.append((lines[i], j + 1, f": {fields[i]!r} is infinite; remove or fill it"))
            columns.append(numbers)
            continue
        days = _days(present) if not any(numeric) else None
        if days is not None:
            first = min(present, key=_moment)
            notes.append(f"{name}: column {title} holds dates and times, read as days since {first}")
            filled = iter(days)
            columns.append(np.array([math.nan if gap else next(filled) for gap in gaps]))
            continue
        if 2 * sum(numeric) >= len(numeric):  # half numbers or more: a word is a typo or unknown mark
            i = next(i for i, field in enumerate(fields) if not gaps[i] and not _is_number(field))
            problems.append(
                (lines[i], j + 1, f": {fields[i]!r} is not a number, but its column holds numbers {MIXED}")
            )
        elif any(numeric):  # mostly words: names, some of which read as numbers (car models "100", "300E")
            notes.append(f"{name}: column {title} holds words and {sum(numeric)} numbers, all read as labels")
        columns.append(np.array([None if gap else field for field, gap in zip(fields, gaps, strict=True)],
                                dtype=object))  # fmt: skip
    errors = {
        column - 1: f"{name}: {path} line {line}, column {column}{problem}"
        for line, column, problem in problems
    }
    if problems and not (lenient and header):
        raise ValueError(errors[min(problems)[1] - 1])  # the first by line, then column
    return columns, notes, errors


def _moment(field: str) -> datetime.datetime:
    """A date or a date and time in ISO 8601 ("2020-01-31", "2020-01-31 12:00:00", with a zone or not)."""
    moment = datetime.datetime.fromisoformat(field.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.timezone.utc)


def _days(fields: Sequence[str]) -> list[float] | None:
    """The days since the earliest of ``fields``, where every one is a date in ISO 8601 (with a dash:
    a bare year is a number); else None."""
    if not fields or not all("-" in field[1:] for field in fields):
        return None
    try:
        moments = [_moment(field) for field in fields]
    except ValueError:
        return None
    first = min(moments)
    return [(moment - first).total_seconds() / 86400 for moment in moments]


def _index_decision(
    column: np.ndarray, header: tuple[str, ...] | None, width: int, name: str
) -> tuple[str, bool]:
    """(a note or "", whether the first column is left out), and why.

    A first column named like an index (:data:`INDEX_NAMES`: pandas' ``to_csv`` leaves its header
    field empty) that holds exactly 0, 1, ..., n-1 (pandas' default index) or 1..n (R's
    ``write.csv``) is a row number, not data: it is left out, with a note (unless it is the only
    column). Without such a name (no header, or another name) the same column is kept, with a note
    from 3 rows on: it may be data (a count, a time step), a column left out silently is worse than
    a note, and the note says how to write the file without it. A first column named like an index
    that holds other distinct whole numbers (the index of a shuffled or filtered frame) is kept with
    a note too: numbers alone do not tell it from data."""
    n = len(column)
    named = header is not None and header[0].lower() in INDEX_NAMES
    if column.dtype != np.float64:
        names = column.tolist()
        if named and width > 1 and None not in names and len(set(names)) == n and n >= 2:
            index = f"named {header[0]!r}" if header[0] else "with no name"
            return (f"{name}: first column ({index}, {n} distinct labels such as {names[0]!r}) read as row "
                    "names, as pandas' to_csv and R's write.csv write them, and left out"), True  # fmt: skip
        return "", False
    start = next((s for s in (0, 1) if np.array_equal(column, np.arange(s, s + n))), None)
    if named and start is not None and width > 1:
        writer = "pandas' to_csv" if start == 0 else "R's write.csv"
        index = f"an index named {header[0]!r}" if header[0] else "an unnamed index"
        return (
            f"{name}: first column ({index} {start}..{start + n - 1}, as {writer} writes it) left out",
            True,
        )
    if start is not None and n >= 3:
        return (
            f"{name}: first column holds {start}..{start + n - 1} like a row index; "
            "kept as data (if it is an index, write the file without it, e.g. pandas' to_csv(index=False))"
        ), False
    whole = bool(np.all(column == np.round(column))) and len(np.unique(column)) == n
    if named and whole and width > 1 and n >= 3:
        called = f"the name {header[0]!r}" if header[0] else "no name"
        return (
            f"{name}: first column has {called} and distinct whole numbers, like the index of a "
            "shuffled or filtered pandas frame; kept as data (if it is an index, write the file with "
            "to_csv(index=False))"
        ), False
    return "", False


def _labels_note(name: str, columns: Sequence[tuple[str, np.ndarray]]) -> str:
    """ "Y: column species holds labels (3 distinct: a, b, c)": what was read; that labels are
    discrete is the estimate's decision, and its notes say so."""
    if len(columns) == 1:
        title, labels = columns[0]
        distinct = sorted(set(labels.tolist()) - {None})
        listed = f": {_listed(distinct)}" if len(distinct) <= SHOWN else ""
        return f"{name}: column {title} holds labels ({len(distinct)} distinct{listed})"
    parts = [f"{title} ({len(set(labels.tolist()) - {None})} distinct)" for title, labels in columns]
    return f"{name}: columns {_listed(parts)} hold labels"


def _one_line(text: str) -> str:
    """A header name (a quoted one may hold line breaks) on one line, for a note."""
    return " ".join(text.split())


def _listed(items: Sequence[str]) -> str:
    """ "a, b, c", or the first few and a count when there are more than :data:`SHOWN`."""
    if len(items) <= SHOWN:
        return ", ".join(items)
    return f"{', '.join(items[: SHOWN - 1])} and {len(items) - SHOWN + 1} more"
