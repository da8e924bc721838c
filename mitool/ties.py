"""Repeated values in continuous data: finite precision (dequantised) or point masses (atoms).

A continuous variable repeats values for two reasons that call for opposite treatments:

* **finite precision**: measurements written to 2 or 3 digits, float32 draws, a CSV export that
  rounded. The repeats are an accident of the writing; nearby values repeat about as often.
* **point masses (atoms)**: zero inflation, a detection limit, a censored value. One value holds
  far more of the data than the values around it.

**Dequantisation** answers the first, exactly: each value v of a column with ties is replaced by
v + U, U uniform on (-r_v / 2, r_v / 2), where r_v (the value's *resolution*) is the distance from
v to the nearest other distinct value of the column. These intervals never overlap, so v is
recovered from v + U (the nearest distinct value), and

    I(X + U; Y) = I(X; Y)

for the data as given, whatever the law behind them (the noise is independent of everything
else). On values rounded to a grid of step h it is the classical uniform dequantisation, and
I(X + U; Y) is the MI of the rounded data, which approaches that of the unrounded data as h
shrinks. After it, the k-NN estimators of continuous data apply (their distances are no longer 0).
On rank scores (the default k-NN route) it is exactly a random breaking of ties.

**Atoms** answer the second: dequantising a spike that holds 30% of the data would leave k-NN
estimators a density 10^6 times higher on it than around it, which they resolve badly; the chain
rule over atoms (:mod:`mitool.estimators.atoms`) is made for it. A value is an atom (:func:`atoms_of`)
when it holds at least :data:`ATOM_MIN_COUNT` rows and more than :data:`ATOM_RATIO` times the mean
count of its :data:`ATOM_WINDOW` nearest distinct values on each side: under finite precision the
counts of neighbouring values are alike (within Poisson noise); at a point mass they are not.

Measured (docs/mi-benchmark.md, "Ties"): on scikit-learn's wine data, magnesium (integers, 53
values in 178 rows) against the class, the chain rule that treated every repeated value as an atom
gave -0.197 nats; dequantised, Ross's estimate is 0.18, scikit-learn's 0.17.

:func:`treat_ties` applies one of :data:`TIES_CHOICES` to the continuous sides of the data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mitool import checks

__all__ = [
    "ATOM_MIN_COUNT",
    "ATOM_RATIO",
    "ATOM_WINDOW",
    "TIES_CHOICES",
    "TiesTreated",
    "atoms_of",
    "dequantise",
    "treat_ties",
]

TIES_CHOICES: dict[str, str] = {
    "auto": "point masses (a value far more frequent than its neighbours) are atoms, other repeated values "
    "are dequantised",
    "dequantise": "every repeated value is dequantised (uniform noise within the data's resolution: the "
    "MI is unchanged)",
    "atoms": "every repeated value is an atom (the estimators for data with atoms)",
    "refuse": "an error for continuous data with any repeated value",
}
"""``ties``: how repeated values of continuous data are treated (see the module)."""

ATOM_MIN_COUNT = 5
"""The fewest rows at one value for it to be an atom (float32 draws repeat a value 2 or 3 times)."""

ATOM_RATIO = 10.0
"""How many times the mean count of its neighbouring values an atom holds at least."""

ATOM_WINDOW = 5
"""The distinct values on each side whose counts an atom is compared with."""


def _distinct(column: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sorted distinct values of a 1-D column, each row's index into them, and their counts."""
    values, inverse, counts = np.unique(column, return_inverse=True, return_counts=True)
    return values, inverse.reshape(-1), counts


def atoms_of(column: np.ndarray) -> np.ndarray:
    """The values of a 1-D ``column`` that are point masses (see the module): at least
    :data:`ATOM_MIN_COUNT` rows and more than :data:`ATOM_RATIO` times the mean count of the
    :data:`ATOM_WINDOW` nearest distinct values on each side."""
    values, _, counts = _distinct(column)
    if len(values) < 2:
        return values[:0]
    window = np.ones(2 * ATOM_WINDOW + 1)
    window[ATOM_WINDOW] = 0.0
    padded = np.pad(counts.astype(float), ATOM_WINDOW)
    neighbour_sum = np.convolve(padded, window, mode="valid")
    neighbour_number = np.convolve(np.pad(np.ones(len(counts)), ATOM_WINDOW), window, mode="valid")
    neighbour_mean = neighbour_sum / neighbour_number
    return values[(counts >= ATOM_MIN_COUNT) & (counts > ATOM_RATIO * neighbour_mean)]


def dequantise(column: np.ndarray, rng: np.random.Generator, keep: np.ndarray | None = None) -> np.ndarray:
    """``column`` (1-D) with each value v moved by uniform noise on (-r_v / 2, r_v / 2), r_v the
    distance to the nearest other distinct value (see the module: v stays recoverable, so the MI
    does not change); the values in ``keep`` (atoms) stay as they are."""
    values, inverse, _ = _distinct(column)
    if len(values) < 2:
        return column.copy()
    gaps = np.diff(values)
    resolution = np.minimum(np.r_[gaps[0], gaps], np.r_[gaps, gaps[-1]])
    moved = column + resolution[inverse] * rng.uniform(-0.5, 0.5, size=len(column))
    if keep is not None and len(keep):
        return np.where(np.isin(column, keep), column, moved)
    return moved


def _tied(column: np.ndarray) -> int:
    return len(column) - len(np.unique(column))


@dataclass(frozen=True)
class TiesTreated:
    """What :func:`treat_ties` did to one side (x, y or z): the rows after, whether atoms remain
    (the data then have ties that an estimator must take), and notes saying what was done."""

    rows: np.ndarray
    atoms: bool
    notes: tuple[str, ...]


def _listed(indices: list[int], total: int) -> str:
    shown = ", ".join(map(str, indices[:8])) + (", ..." if len(indices) > 8 else "")
    return f"columns {shown} ({len(indices)} of {total})"


def treat_ties(name: str, rows: np.ndarray, ties: str, rng: np.random.Generator) -> TiesTreated:
    """The continuous rows (n, d) of side ``name`` with their repeated values treated as ``ties``
    says (:data:`TIES_CHOICES`), column by column, and notes saying what was done (one per column
    with atoms, one for the columns dequantised); ParameterError for ``refuse`` on a column with
    ties."""
    checks.choice("ties", ties, TIES_CHOICES)
    columns, notes, dequantised, any_atoms = [], [], [], False
    for index in range(rows.shape[1]):
        column = rows[:, index]
        tied = _tied(column)
        label = name if rows.shape[1] == 1 else f"{name} column {index}"
        if not tied:
            columns.append(column)
            continue
        if ties == "refuse":
            raise checks.ParameterError(
                "ties", f"is 'refuse', and {label} has {tied} rows that repeat another row's value; use "
                "ties='auto' (finite precision dequantised, point masses as atoms), 'dequantise' or 'atoms'",
            )  # fmt: skip
        if ties == "atoms":
            columns.append(column)
            any_atoms = True
            notes.append(f"{label}: {tied} repeated values, each taken as an atom (ties='atoms')")
            continue
        atoms = atoms_of(column) if ties == "auto" else column[:0]
        columns.append(dequantise(column, rng, keep=atoms))
        if len(atoms):
            any_atoms = True
            on_atoms = int(np.isin(column, atoms).sum())
            shown = ", ".join(f"{value:g}" for value in atoms[:5]) + (" ..." if len(atoms) > 5 else "")
            rest = tied - (on_atoms - len(atoms))
            notes.append(
                f"{label}: point mass(es) at {shown} ({on_atoms} rows) taken as atoms"
                + (f"; its {rest} other repeated values dequantised (finite precision)" if rest else "")
            )
        else:
            dequantised.append((index, tied))
    if dequantised:
        kind = "finite precision, no point mass" if ties == "auto" else "ties='dequantise'"
        if rows.shape[1] == 1:
            what = f"{name}: {dequantised[0][1]} rows repeat a value"
        else:
            what = f"{name}: {_listed([index for index, _ in dequantised], rows.shape[1])} repeat values"
        notes.append(f"{what} ({kind}): dequantised within the data's resolution (MI unchanged)")
    return TiesTreated(np.stack(columns, axis=1), any_atoms, tuple(notes))
