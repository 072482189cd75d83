"""Compare two PTS reports' rounds.csv: per round and element, every figure of the second
against the first, in %; then the worst |%| per element. docs/performance.md, "Converging
rounds".

usage: python3 benchmarks/pts/compare_rounds.py REF/iops/rounds.csv OTHER/iops/rounds.csv
"""

import csv
import math
import sys

FIGS = [
    "read_iops", "write_iops", "read_lat_mean_us", "read_lat_p99_us", "read_lat_p99_9_us", "read_lat_p99_99_us",
    "read_lat_max_us", "write_lat_mean_us", "write_lat_p99_us", "write_lat_p99_9_us", "write_lat_p99_99_us",
    "write_lat_max_us", "bytes_written_total",
]  # fmt: skip


def rows(path: str) -> dict[tuple[str, str], dict[str, str]]:
    with open(path) as f:
        return {(r["round"], r["element"]): r for r in csv.DictReader(f)}


def main() -> None:
    ref, other = rows(sys.argv[1]), rows(sys.argv[2])
    worst: dict[str, dict[str, float]] = {}
    share: dict[str, list[str]] = {}
    print("| round | element | timed share | " + " | ".join(FIGS) + " |")
    for key in sorted(set(ref) & set(other)):
        a_row, b_row = ref[key], other[key]
        cells = []
        for fig in FIGS:
            try:
                a, b = float(a_row[fig]), float(b_row[fig])
            except (KeyError, ValueError):
                cells.append("")
                continue
            d = 0.0 if a == b else (100 * (b - a) / a if a else math.inf)
            w = worst.setdefault(key[1], {})
            w[fig] = max(w.get(fig, 0.0), abs(d))
            cells.append(f"{d:+.2f}")
        share.setdefault(key[1], []).append(b_row.get("timed_share", ""))
        print(f"| {key[0]} | {key[1]} | {b_row.get('timed_share', '')} | " + " | ".join(cells) + " |")
    for element, w in sorted(worst.items()):
        print(element, "timed share", share[element], {k: round(v, 2) for k, v in w.items() if v})


if __name__ == "__main__":
    main()
