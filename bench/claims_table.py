"""Markdown tables of a vision sweep's summary.csv: one row per method and loss, one column per
value of the swept axis (K or batch size), each cell the mean over seeds and, in brackets, the
seeds' range.

    python bench/claims_table.py bench/results/claims/cpu/eqco/summary.csv --axis negatives
    python bench/claims_table.py bench/results/claims/cpu/dcl/summary.csv --axis batch_size --value npc_mean
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from mitool.files import read_csv  # noqa: E402


def table(rows: list[dict[str, str]], axis: str, value: str, scale: float) -> str:
    cells: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row["status"] != "done" or not row[axis] or not row[value]:
            continue
        label = f"{row['method']} {row['loss']}" + (
            f" (alpha {float(row['alpha']):g})" if row["alpha"] else ""
        )
        cells[label][int(float(row[axis]))].append(scale * float(row[value]))
    columns = sorted({x for line in cells.values() for x in line})
    lines = [f"| {value} | " + " | ".join(f"{axis} {x}" for x in columns) + " |"]
    lines.append("|---|" + "---:|" * len(columns))
    for label, line in sorted(cells.items()):
        texts = []
        for x in columns:
            values = line.get(x, [])
            if not values:
                texts.append("")
                continue
            mean = sum(values) / len(values)
            spread = f" ({min(values):.2f}–{max(values):.2f})" if len(values) > 1 else ""
            texts.append(f"{mean:.2f}{spread}")
        lines.append(f"| {label} | " + " | ".join(texts) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("summary", help="a sweep's summary.csv")
    parser.add_argument("--axis", default="negatives", help="the swept column (negatives, batch_size, ...)")
    parser.add_argument("--value", default="knn_top1", help="the column shown (default knn_top1, in %)")
    arguments = parser.parse_args()
    scale = 100.0 if arguments.value in ("knn_top1", "knn_top5", "linear_top1") else 1.0
    print(table(read_csv(arguments.summary), arguments.axis, arguments.value, scale))
    return 0


if __name__ == "__main__":
    sys.exit(main())
