#!/usr/bin/env python3
"""Bar chart of vm-compare's table.csv: requests/s per test for (a) Redis in a Linux guest,
(b) kayvee-server in a Linux guest, (c) the Kayvee unikernel; one panel per pipeline depth.

usage: chart.py table.csv chart.png   (needs python3-matplotlib; `cargo xtask vm-compare`
installs it)
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SYSTEMS = [
    ("linux_redis_rps", "(a) Redis 7.0 in Linux guest", "#c0392b"),
    ("linux_kayvee_rps", "(b) kayvee-server in Linux guest", "#2980b9"),
    ("unikernel_rps", "(c) Kayvee unikernel", "#27ae60"),
]


def value(text):
    """A table cell as a number ('-' is missing: 0)."""
    try:
        return float(text)
    except ValueError:
        return 0.0


def main(src, dest):
    with open(src, newline="") as f:
        rows = list(csv.DictReader(f))
    pipelines = sorted({int(r["pipeline"]) for r in rows})
    fig, axes = plt.subplots(len(pipelines), 1, figsize=(13, 4.5 * len(pipelines)), squeeze=False)
    for ax, p in zip(axes[:, 0], pipelines):
        prow = [r for r in rows if int(r["pipeline"]) == p]
        width = 0.27
        for i, (col, label, color) in enumerate(SYSTEMS):
            xs = [j + (i - 1) * width for j in range(len(prow))]
            ys = [value(r[col]) / 1000 for r in prow]
            ax.bar(xs, ys, width, label=label, color=color)
        for j, r in enumerate(prow):
            ratio = r["ratio_c_a"]
            if ratio != "-":
                top = max(value(r[c]) for c, _, _ in SYSTEMS) / 1000
                ax.text(j, top * 1.15, f"c/a {float(ratio):.2f}", ha="center", fontsize=8)
        # Log scale: LRANGE_600 and PING differ by 100x; ratios read as equal steps.
        ax.set_yscale("log")
        peak = max(value(r[c]) for r in prow for c, _, _ in SYSTEMS) / 1000
        ax.set_ylim(top=peak * 2 if peak > 0 else 1)
        ax.set_xticks(range(len(prow)))
        ax.set_xticklabels([r["test"] for r in prow], rotation=30, ha="right", fontsize=9)
        ax.set_ylabel("thousand requests/s (log)")
        ax.set_title(f"redis-benchmark -c 50 -P {p} (QEMU q35, 1 vCPU, 256 MiB, virtio-net-pci, tap)")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=9)
    fig.tight_layout()
    fig.savefig(dest, dpi=90)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
