"""Reading CSV files for `mitool estimate`: a row index as pandas or R write it is left out (and one
that may be data is kept, with a note), a header names the columns in the notes, text columns are
labels, and a bad field is still one line naming its line and column."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import mitool
from mitool.cli import io
from mitool.cli.io import Samples, load_samples
from mitool.cli.main import main as cli


@pytest.fixture(autouse=True)
def one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MITOOL_THREADS", "1")


def read(tmp_path: Path, content: str, name: str = "x.csv") -> Samples:
    path = tmp_path / name
    path.write_text(content)
    return load_samples(path, "X")


def test_a_pandas_index_is_left_out_and_the_header_names_the_columns(tmp_path: Path) -> None:
    samples = read(tmp_path, ",a,b\n0,1.5,2\n1,2.5,3\n2,3.5,4\n")
    assert samples.values.dtype == np.float64
    assert samples.values.tolist() == [[1.5, 2.0], [2.5, 3.0], [3.5, 4.0]]
    assert samples.columns == ("a", "b")
    assert samples.notes == (
        "X: first column (an unnamed index 0..2, as pandas' to_csv writes it) left out",
        "X: columns a, b (from the header of x.csv)",
    )


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("Unnamed: 0,a\n0,5\n1,7\n2,6\n", "an index named 'Unnamed: 0' 0..2"),
        ("index,a\n0,5\n1,7\n2,6\n", "an index named 'index' 0..2"),
        ('"","a"\n"1",5\n"2",7\n"3",6\n', "an unnamed index 1..3, as R's write.csv"),
    ],
)
def test_an_index_named_as_pandas_or_r_name_it_is_left_out(tmp_path: Path, content: str, said: str) -> None:
    samples = read(tmp_path, content)
    assert samples.values.tolist() == [[5.0], [7.0], [6.0]] and samples.columns == ("a",)
    assert said in samples.notes[0] and samples.notes[0].endswith("left out")


@pytest.mark.parametrize(
    ("content", "first_column"),
    [
        ("0,1.5\n1,2\n2,7\n3,1\n", [0, 1, 2, 3]),  # no header: a row number, or data
        ("id,a\n0,1.5\n1,2\n2,7\n3,1\n", [0, 1, 2, 3]),  # a name that is not an index's
        (",a\n3,1.5\n0,2\n7,7\n1,1\n", [3, 0, 7, 1]),  # pandas' index of a shuffled frame
    ],
)
def test_a_first_column_that_only_looks_like_an_index_is_kept_with_a_note(
    tmp_path: Path, content: str, first_column: list[int]
) -> None:
    samples = read(tmp_path, content)
    assert samples.values.shape == (4, 2) and samples.values[:, 0].tolist() == first_column
    assert "kept as data" in samples.notes[0] and "index=False" in samples.notes[0]


def test_numbers_that_do_not_look_like_an_index_get_no_note(tmp_path: Path) -> None:
    assert read(tmp_path, "1,2\n3,4\n5,6\n").notes == ()
    assert read(tmp_path, ",a\n0.5,1\n1,2\n2,3\n").notes == (
        "X: columns (column 1 unnamed), a (from the header of x.csv)",
    )


def test_many_columns_are_named_by_the_first_few_and_a_count(tmp_path: Path) -> None:
    names = [f"c{j}" for j in range(10)]
    samples = read(tmp_path, ",".join(names) + "\n" + ",".join(map(str, range(10))) + "\n")
    assert samples.columns == tuple(names)
    assert samples.notes == ("X: columns c0, c1, c2, c3, c4 and 5 more (from the header of x.csv)",)


def test_text_columns_are_labels_kept_as_strings(tmp_path: Path) -> None:
    samples = read(tmp_path, "species\nsetosa\nversicolor\n setosa\nvirginica\n")
    assert samples.values.dtype == object and samples.values.shape == (4, 1)
    assert samples.values[:, 0].tolist() == ["setosa", "versicolor", "setosa", "virginica"]
    assert samples.notes == (
        "X: column species (from the header of x.csv)",
        "X: column species holds labels (3 distinct: setosa, versicolor, virginica)",
    )


def test_a_first_line_of_labels_seen_again_below_is_data_not_a_header(tmp_path: Path) -> None:
    samples = read(tmp_path, "a\nb\na\nb\n")
    assert samples.values[:, 0].tolist() == ["a", "b", "a", "b"] and samples.columns is None
    assert samples.notes == ("X: column 1 holds labels (2 distinct: a, b)",)


def test_numbers_and_labels_in_one_file(tmp_path: Path) -> None:
    samples = read(tmp_path, ',x,y\n0,1.5,"a b"\n1,2,c\n2,-3e2,"a b"\n')
    assert samples.values.dtype == object and samples.columns == ("x", "y")
    assert samples.values.tolist() == [[1.5, "a b"], [2.0, "c"], [-300.0, "a b"]]
    assert isinstance(samples.values[0, 0], float) and isinstance(samples.values[0, 1], str)
    assert samples.notes[-1] == "X: column y holds labels (2 distinct: a b, c)"


def test_numbers_with_spaces_or_quotes_are_numbers(tmp_path: Path) -> None:
    samples = read(tmp_path, 'a, b\n "1.5" , 2\n"3",4 \n')
    assert samples.values.dtype == np.float64 and samples.values.tolist() == [[1.5, 2.0], [3.0, 4.0]]
    assert samples.columns == ("a", "b")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("a,b\n1,x\n2,3\n", "x.csv line 2, column 2: 'x' is not a number, but its column holds numbers"),
        (",a\n0,1\n1,x\n2,3\n", "x.csv line 3, column 2: 'x' is not a number"),  # columns of the file
        ("a,b\n1,inf\n2,3\n", "x.csv line 2, column 2: 'inf' is infinite"),
        ("a,b\n1,2\nNA,x\n", "x.csv line 3, column 2: 'x' is not a number"),
        ("a,b\n1\n", "x.csv line 1 (a header) has 2 fields, the first data line 1"),
        ("a,b\n\n1,2\n\n3\n", "x.csv line 5 has 1 fields, the first data line 2"),
    ],
)
def test_a_bad_field_is_one_line_naming_its_line_and_column(
    tmp_path: Path, content: str, message: str
) -> None:
    with pytest.raises(ValueError, match=r"^X: .*") as error:
        read(tmp_path, content)
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize(
    "content",
    [
        ",a,b\n0,1.5,2\n1,2.5,3\n2,3.5,4\n",
        "\n\nu,v\n\n1,2\n3,4\n",
        "0,1\n1,1e-3\n2,5\n",
        '\ufeffa,"b"\n"1",2\n3,4\n',
        "1\n2\n3\n",
        ",0,1\n0,1.5,2\n1,2.5,3\n2,3.5,4\n",
        "0,1\n1.5,2\n2.5,3\n",
        "0\n1.5\n2\n",
        "0\n1\n2\n",
    ],
)
def test_the_fast_reading_of_numbers_reads_as_the_csv_module_does(tmp_path: Path, content: str) -> None:
    """A file of numbers is parsed by numpy; the csv module's rows (:func:`io.table`) must give the same."""
    path = tmp_path / "x.csv"
    path.write_text(content, encoding="utf-8")
    fast, slow = load_samples(path, "X"), io.table(io._rows(path), "X", path)
    np.testing.assert_array_equal(fast.values, slow.values)
    assert (fast.columns, fast.notes) == (slow.columns, slow.notes)


def test_a_npy_of_text_holds_labels_and_one_of_bytes_is_refused(tmp_path: Path) -> None:
    np.save(tmp_path / "y.npy", np.array(["cat", "dog", "cat"]))
    samples = load_samples(tmp_path / "y.npy", "Y")
    assert samples.values.dtype == object and samples.values[:, 0].tolist() == ["cat", "dog", "cat"]
    assert samples.notes == ("Y: column 1 holds labels (2 distinct: cat, dog)",)
    np.save(tmp_path / "b.npy", np.array([b"cat", b"dog"]))
    with pytest.raises(
        ValueError, match=r"^Y: .*must hold numbers or text labels \(dtype <U\), got dtype \|S3$"
    ):
        load_samples(tmp_path / "b.npy", "Y")


def test_a_dataframe_written_by_pandas_reads_back(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "alcohol": rng.normal(size=20),
            "magnesium": rng.normal(size=20),
            "kind": rng.choice(["a", "b, c"], 20),
        }
    )
    frame.to_csv(tmp_path / "wine.csv")
    samples = load_samples(tmp_path / "wine.csv", "X")
    assert samples.columns == ("alcohol", "magnesium", "kind")
    assert (
        samples.values[:, :2].astype(np.float64).tolist()
        == frame[["alcohol", "magnesium"]].to_numpy().tolist()
    )
    assert samples.values[:, 2].tolist() == frame["kind"].tolist()
    assert samples.notes[:2] == (
        "X: first column (an unnamed index 0..19, as pandas' to_csv writes it) left out",
        "X: columns alcohol, magnesium, kind (from the header of wine.csv)",
    )
    frame[["alcohol"]].to_csv(tmp_path / "plain.csv", index=False)
    assert load_samples(tmp_path / "plain.csv", "X").values[:, 0].tolist() == frame["alcohol"].tolist()


@pytest.mark.parametrize(
    ("content", "values", "columns", "note"),
    [
        (",0,1\n0,1.5,2\n1,2.5,3\n2,3.5,4\n", [[1.5, 2], [2.5, 3], [3.5, 4]], ("0", "1"), "columns 0, 1"),
        (",2019,2020\n0,1.5,2\n1,2.5,3\n2,3.5,4\n", [[1.5, 2], [2.5, 3], [3.5, 4]], ("2019", "2020"), "2019"),
        ("0,1\n1.5,2\n2.5,3\n", [[1.5, 2], [2.5, 3]], ("0", "1"), "columns 0, 1"),
        ("0\n1.5\n2.0\n", [[1.5], [2]], ("0",), "column 0 (from"),
        # a first line of data: a row number 0, 1, 2 going on below it; counts that start at 0
        ("0,1\n1,1e-3\n2,5\n", [[0, 1], [1, 1e-3], [2, 5]], None, "kept as data"),
        ("0\n3\n2\n", [[0], [3], [2]], None, "line 1 reads 0, as pandas heads a column it numbered; kept"),
    ],
)
def test_pandas_column_numbers_are_a_header(
    tmp_path: Path, content: str, values: list, columns: tuple | None, note: str
) -> None:
    """A frame made from an array has columns 0, 1, ...: to_csv writes them as a line of numbers."""
    samples = read(tmp_path, content)
    assert samples.values.tolist() == values and samples.columns == columns
    assert any(note in said for said in samples.notes), samples.notes


def test_frames_of_arrays_written_by_pandas_read_back(tmp_path: Path) -> None:
    """What ``pd.DataFrame(array).to_csv(path)`` writes, with and without its index, floats and whole
    numbers, one column or five: the array back, and the index left out."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(2)
    arrays = {
        "floats": rng.normal(size=(50, 5)).astype(np.float32),
        "column": rng.normal(size=(50, 1)),
        "counts": rng.poisson(3.0, size=(50, 3)),
    }
    for label, array in arrays.items():
        for index in (True, False):
            path = tmp_path / f"{label}-{index}.csv"
            pd.DataFrame(array).to_csv(path, index=index)
            samples = load_samples(path, "X")
            assert samples.values.shape == array.shape, (label, index, samples.notes)
            np.testing.assert_array_equal(samples.values.astype(array.dtype), array, err_msg=label)
            assert samples.columns == tuple(str(j) for j in range(array.shape[1]))
            left_out = "X: first column (an unnamed index 0..49, as pandas' to_csv writes it) left out"
            assert (left_out in samples.notes) == index


def test_mitool_estimate_reads_frames_written_by_pandas_with_its_defaults(tmp_path: Path) -> None:
    """``pd.DataFrame(x).to_csv("x.csv")``, ``pd.DataFrame(y).to_csv("y.csv", index=False)``: the
    value of the arrays themselves (last stop's trial refused the first and read the second's header
    as a row)."""
    pd = pytest.importorskip("pandas")
    from mitool.cli.main import main
    from mitool.estimation import estimate

    rng = np.random.default_rng(3)
    x = rng.normal(size=(400, 2)).astype(np.float32)
    y = (x + rng.normal(size=(400, 2))).astype(np.float32)
    pd.DataFrame(x).to_csv(tmp_path / "x.csv")
    pd.DataFrame(y).to_csv(tmp_path / "y.csv", index=False)
    args = ["estimate", str(tmp_path / "x.csv"), str(tmp_path / "y.csv"), "--quiet", "--estimator", "ksg"]
    result = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["value"] == pytest.approx(estimate(x, y, estimator="ksg").value)
    assert "Y: columns 0, 1 (from the header of y.csv)" in report["notes"]


def test_mitool_estimate_leaves_a_pandas_index_out(tmp_path: Path) -> None:
    """Rows in the order of y: the index then says much about y (over 2 nats by KSG with it), the truth
    (y = x + noise of the same variance) is 0.5 log 2 = 0.35 nats."""
    from mitool.cli.main import main
    from mitool.estimation import estimate

    rng = np.random.default_rng(1)
    x = rng.normal(size=1000)
    y = x + rng.normal(size=1000)
    order = np.argsort(y)
    x, y = x[order], y[order]
    (tmp_path / "x.csv").write_text(",x\n" + "".join(f"{i},{float(value)!r}\n" for i, value in enumerate(x)))
    (tmp_path / "y.csv").write_text("".join(f"{float(value)!r}\n" for value in y))
    args = [
        "estimate",
        str(tmp_path / "x.csv"),
        str(tmp_path / "y.csv"),
        "--quiet",
        "--estimator",
        "ksg",
        "--json",
    ]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert abs(report["value"] - 0.5 * np.log(2)) < 0.1
    assert report["value"] == pytest.approx(estimate(x[:, None], y[:, None], estimator="ksg").value)
    assert (
        "X: first column (an unnamed index 0..999, as pandas' to_csv writes it) left out" in report["notes"]
    )


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("a,b\n1,2\n3,\n", [[1.0, 2.0], [3.0, None]]),  # an empty field
        ("a,b\n1,NA\nnan,3\nnull,N/A\n", [[1.0, None], [None, 3.0], [None, None]]),  # R, numpy, JSON
        (
            "a\n1.5\n\n2.5\n\n",
            [[1.5], [None], [2.5]],
        ),  # a blank line in one column; the last one ends the file
        ('a\n1.5\n""\n2.5\n""\n', [[1.5], [None], [2.5], [None]]),  # pandas' quoted empty field
        ("a,b\n1,2\n,\n3,4\n", [[1.0, 2.0], [None, None], [3.0, 4.0]]),  # a row of empty fields
        ("a,b\nu,2\n,3\n", [["u", 2.0], [None, 3.0]]),  # a missing label
    ],
)
def test_missing_values_keep_their_rows(tmp_path: Path, content: str, expected: list) -> None:
    """A missing value is NaN (None for a label) in its own row: leaving a row out of one file would
    pair every row below it with the wrong row of the other file."""
    path = tmp_path / "x.csv"
    path.write_text(content)
    values = load_samples(path, "X").values
    read = [[None if value is None or value != value else value for value in row] for row in values.tolist()]
    assert read == expected


def test_missing_values_pair_the_right_rows(tmp_path: Path) -> None:
    """Two one-column files with missing values in different rows, as pandas writes them: the
    estimate equals the one on the complete rows paired by hand, and the note gives the count."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=300)
    y = x + 0.5 * rng.normal(size=300)
    gaps_x, gaps_y = rng.random(300) < 0.1, rng.random(300) < 0.1
    with_gaps = [np.where(gaps, np.nan, values) for values, gaps in ((x, gaps_x), (y, gaps_y))]
    for name, values in zip(("x", "y"), with_gaps, strict=True):
        lines = ["v", *('""' if value != value else repr(float(value)) for value in values)]
        (tmp_path / f"{name}.csv").write_text("\n".join(lines) + "\n")
    result = CliRunner().invoke(
        cli, ["estimate", str(tmp_path / "x.csv"), str(tmp_path / "y.csv"), "--json", "--quiet"]
    )
    assert result.exit_code == 0, result.output
    reported = json.loads(result.stdout)
    complete = ~(gaps_x | gaps_y)
    by_hand = mitool.estimate(x[complete], y[complete])
    assert reported["n_pairs"] == int(complete.sum())
    assert reported["value"] == pytest.approx(by_hand.value, abs=1e-12)
    assert any(f"{int((~complete).sum())} of 300 rows left out" in note for note in reported["notes"])
    assert reported["details"]["rows_left_out"] == int((~complete).sum())
    assert f"{int((~complete).sum())} of 300 rows left out (missing values)" in reported["summary"]
    refused = CliRunner().invoke(
        cli, ["estimate", str(tmp_path / "x.csv"), str(tmp_path / "y.csv"), "--missing", "refuse"]
    )
    assert refused.exit_code == 2
    assert "--missing drop" in refused.output and "Traceback" not in refused.output


def test_row_names_are_left_out(tmp_path: Path) -> None:
    """pandas' default to_csv of a frame indexed by names (mtcars' car names): the first column is
    row names, once read as labels (the Gaussian estimate went to inf)."""
    path = tmp_path / "cars.csv"
    path.write_text(",mpg,wt\nMazda RX4,21.0,2.62\nDatsun 710,22.8,2.32\nValiant,18.1,3.46\n")
    samples = load_samples(path, "X")
    assert samples.columns == ("mpg", "wt")
    np.testing.assert_array_equal(samples.values, [[21.0, 2.62], [22.8, 2.32], [18.1, 3.46]])
    assert "read as row names" in samples.notes[0] and "'Mazda RX4'" in samples.notes[0]
    repeated = tmp_path / "groups.csv"  # a first column of labels that repeat is data, not row names
    repeated.write_text(",mpg\na,1.0\nb,2.0\na,3.0\n")
    assert load_samples(repeated, "X").values[:, 0].tolist() == ["a", "b", "a"]


def test_dates_become_days_since_the_first(tmp_path: Path) -> None:
    """A date column was 478 labels ("Y has no class with two points or more")."""
    path = tmp_path / "economics.csv"
    path.write_text("date,pce\n1967-07-01,506.7\n1967-08-01,509.8\n,515.6\n1968-07-01 12:00:00,512.2\n")
    samples = load_samples(path, "X")
    assert samples.values[:, 0].tolist()[:2] == [0.0, 31.0] and np.isnan(samples.values[2, 0])
    assert samples.values[3, 0] == pytest.approx(366.5)
    assert any(
        "column date holds dates and times, read as days since 1967-07-01" in note for note in samples.notes
    )


def test_columns_of_one_table_by_name(tmp_path: Path) -> None:
    """--x and --y name columns of one table: the same estimate as the columns in files of their own."""
    rng = np.random.default_rng(5)
    a = rng.normal(size=300)
    b, c = a + rng.normal(size=300), rng.normal(size=300)
    table = tmp_path / "table.csv"
    rows = zip(a.tolist(), b.tolist(), c.tolist(), strict=True)
    table.write_text("a,b,c\n" + "\n".join(f"{u!r},{v!r},{w!r}" for u, v, w in rows) + "\n")
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "bc.npy", np.column_stack([b, c]))
    by_name = CliRunner().invoke(cli, ["estimate", str(table), "--x", "a", "--y", "b,c", "--json", "--quiet"])
    by_file = CliRunner().invoke(
        cli, ["estimate", str(tmp_path / "a.npy"), str(tmp_path / "bc.npy"), "--json", "--quiet"]
    )
    assert by_name.exit_code == 0, by_name.output
    assert json.loads(by_name.stdout)["value"] == pytest.approx(
        json.loads(by_file.stdout)["value"], abs=1e-12
    )
    assert "Y: columns b, c of table.csv" in json.loads(by_name.stdout)["notes"]
    wrong = CliRunner().invoke(cli, ["test", str(table), "--x", "a", "--y", "d"])
    assert (
        wrong.exit_code == 2
        and wrong.output.strip() == "Error: --y names 'd', not a column of table.csv; its columns: a, b, c"
    )
    alone = CliRunner().invoke(cli, ["estimate", str(table), "--x", "a"])
    assert alone.exit_code == 2 and "--y is needed too" in alone.output


def test_a_bad_column_of_a_table_matters_only_to_questions_that_use_it(tmp_path: Path) -> None:
    """Cars93's Cylinders holds 'rotary' among numbers: asking Min.Price against Type refused the
    whole table; now only a question that uses Cylinders is refused, naming the field."""
    path = tmp_path / "cars.csv"
    rows = [f"{price},{kind},{cylinders}" for price, kind, cylinders in
            zip(range(40), ["Small", "Large"] * 20, ["4"] * 39 + ["rotary"], strict=True)]  # fmt: skip
    path.write_text("price,kind,cylinders\n" + "\n".join(rows) + "\n")
    fine = CliRunner().invoke(cli, ["estimate", str(path), "--x", "price", "--y", "kind", "--quiet"])
    assert fine.exit_code == 0, fine.output
    bad = CliRunner().invoke(cli, ["estimate", str(path), "--x", "price", "--y", "cylinders", "--quiet"])
    assert bad.exit_code == 2 and "line 41, column 3: 'rotary' is not a number" in bad.output
    whole = CliRunner().invoke(cli, ["estimate", str(path), str(path)])
    assert whole.exit_code == 2 and "'rotary' is not a number" in whole.output
