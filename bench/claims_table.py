"""Markdown tables of a vision sweep's summary.csv, each cell the mean over seeds and, in brackets, the
seeds' range.

With ``--axis``: one row per method and loss, one column per value of the swept axis (K or batch
size). With ``--columns``: one row per method and loss (and nnclr's support set), one column per
summary column named (kNN top-1, alignment, uniformity, ...), equal steps; ``--figure`` draws the
same runs: kNN top-1 per configuration (each seed a dot, the mean a bar) and every run in the
plane of alignment against uniformity (Wang & Isola's figure: lower left is better for both);
``--reference`` adds the kNN top-1 of the networks at step 0 (a JSON list of {"knn_top1": ...},
e.g. the init_reference.json of ``bash bench/claims_cpu.sh nnclr``) as a dashed line.

    python bench/claims_table.py bench/results/claims/cpu/eqco/summary.csv --axis negatives
    python bench/claims_table.py bench/results/claims/cpu/dcl/summary.csv --axis batch_size --value npc_mean
    python bench/claims_table.py bench/results/claims/cpu/nnclr/summary.csv \\
        --columns knn_top1,alignment,uniformity,mi_final,npc_final \\
        --figure bench/results/claims/cpu/nnclr/nnclr.png \\
        --reference bench/results/claims/cpu/nnclr/init_reference.json
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness import argument_parser  # noqa: E402

from mitool._infra.files import read_csv  # noqa: E402

PERCENT = ("knn_top1", "knn_top5", "linear_top1")
"""Columns shown in % (fractions in summary.csv)."""


def _label(row: dict[str, str]) -> str:
    label = f"{row['method']} {row['loss']}"
    if row.get("alpha"):
        label += f" (alpha {float(row['alpha']):g})"
    if row.get("support_size"):
        label += f" (support {row['support_size']})"
    return label


def _cell(values: list[float], digits: int = 2) -> str:
    if not values:
        return ""
    mean = sum(values) / len(values)
    spread = f" ({min(values):.{digits}f}–{max(values):.{digits}f})" if len(values) > 1 else ""
    return f"{mean:.{digits}f}{spread}"


def table(rows: list[dict[str, str]], axis: str, value: str, scale: float) -> str:
    cells: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row["status"] != "done" or not row[axis] or not row[value]:
            continue
        cells[_label(row)][int(float(row[axis]))].append(scale * float(row[value]))
    columns = sorted({x for line in cells.values() for x in line})
    lines = [f"| {value} | " + " | ".join(f"{axis} {x}" for x in columns) + " |"]
    lines.append("|---|" + "---:|" * len(columns))
    for label, line in sorted(cells.items()):
        lines.append(f"| {label} | " + " | ".join(_cell(line.get(x, [])) for x in columns) + " |")
    return "\n".join(lines)


def _by_configuration(rows: list[dict[str, str]], columns: list[str]) -> dict[str, dict[str, list[float]]]:
    """{label: {column: values over the seeds}} of the finished runs (kNN columns in %)."""
    grouped: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row["status"] != "done":
            continue
        for column in columns:
            if row.get(column):
                grouped[_label(row)][column].append(
                    (100.0 if column in PERCENT else 1.0) * float(row[column])
                )
    return grouped


def columns_table(rows: list[dict[str, str]], columns: list[str]) -> str:
    """One row per configuration, one column per summary column: mean (seeds' range), with the
    number of seeds and the steps."""
    grouped = _by_configuration(rows, [*columns, "steps", "seed"])
    header = [f"{column} (%)" if column in PERCENT else column for column in columns]
    lines = [
        "| run | seeds | steps | " + " | ".join(header) + " |",
        "|---|---:|---:|" + "---:|" * len(columns),
    ]
    for label, values in grouped.items():
        steps = sorted({int(step) for step in values["steps"]})
        digits = {column: 2 if column in PERCENT else 3 for column in columns}
        cells = [_cell(values[column], digits[column]) for column in columns]
        lines.append(
            f"| {label} | {len(values['seed'])} | {'/'.join(map(str, steps))} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def figure(rows: list[dict[str, str]], path: str, reference: list[float] | None = None) -> str:
    """kNN top-1 per configuration (dots: seeds; bars: means; ``reference``: the step-0 values, %)
    and alignment against uniformity."""
    from mitool.figures import PAGE_WIDTH, paper_style, save

    grouped = _by_configuration(rows, ["knn_top1", "alignment", "uniformity"])
    labels = list(grouped)
    with paper_style() as plt:
        fig, (left, right) = plt.subplots(1, 2, figsize=(PAGE_WIDTH, 2.8))
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for index, label in enumerate(labels):
            colour = colours[index % len(colours)]
            knn = grouped[label]["knn_top1"]
            left.bar(index, sum(knn) / len(knn), color=colour, alpha=0.35, width=0.6)
            left.plot([index] * len(knn), knn, "o", color=colour, markersize=4)
            right.plot(grouped[label]["uniformity"], grouped[label]["alignment"], "o", color=colour,
                       label=label, markersize=5)  # fmt: skip
        values = [value for label in labels for value in grouped[label]["knn_top1"]]
        if reference:
            mean = sum(reference) / len(reference)
            left.axhline(mean, color="0.3", linestyle="--", linewidth=1, label=f"step 0 ({mean:.2f}%)")
            left.legend(fontsize=7, loc="upper left")
            values += reference
        left.set_ylim(min(values) - 1.0, max(values) + 1.0)
        left.set_xticks(range(len(labels)), [label.replace(" (", "\n(") for label in labels], fontsize=7)
        left.set_ylabel("kNN top-1 (%)")
        left.set_title("kNN top-1 (dots: seeds)")
        right.set_xlabel("uniformity $\\mathcal{L}_{unif}$ (lower: more uniform)")
        right.set_ylabel("alignment $\\mathcal{L}_{align}$")
        right.set_title("held-out batch (lower left: better)")
        right.legend(fontsize=7)
        for axis in (left, right):
            axis.grid(alpha=0.3)
        fig.tight_layout()
    return str(save(fig, path))


def main() -> int:
    parser = argument_parser(__doc__)
    parser.add_argument("summary", help="a sweep's summary.csv")
    parser.add_argument("--axis", default="negatives", help="the swept column (negatives, batch_size, ...)")
    parser.add_argument("--value", default="knn_top1", help="the column shown (default knn_top1, in %%)")
    parser.add_argument("--columns", default=None, help="comma-separated columns: one row per configuration")
    parser.add_argument("--figure", default=None, help="with --columns: the figure's path (png, pdf, svg)")
    parser.add_argument("--reference", default=None, help="with --figure: the step-0 kNN (a JSON list)")
    arguments = parser.parse_args()
    rows = read_csv(arguments.summary)
    if arguments.columns:
        print(columns_table(rows, arguments.columns.split(",")))
        if arguments.figure:
            reference = None
            if arguments.reference:
                with open(arguments.reference) as file:
                    reference = [100.0 * float(entry["knn_top1"]) for entry in json.load(file)]
            print(f"wrote {figure(rows, arguments.figure, reference)}", file=sys.stderr)
        return 0
    scale = 100.0 if arguments.value in PERCENT else 1.0
    print(table(rows, arguments.axis, arguments.value, scale))
    return 0


if __name__ == "__main__":
    sys.exit(main())
