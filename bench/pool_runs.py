"""Pool the rounds of several runs of ``bench/go2_vs_reference.py`` (issue 14): each run's paired ratios beside those
of all the runs' rounds taken together.

One run's paired ratio is the median over its rounds of two paths' speed ratio within the round. On the lent
machines that median moves by several percent from one run to the next (a ratio's rounds spread over +-20%), so a
figure near a mark is better read from every round of every run on the same code: the median of the pooled per-round
ratios and their interquartile range. Only rounds of one run are ever paired; runs whose paths lack a ratio's two
paths add nothing to it.

    cd bench/results && python ../pool_runs.py go2-franka-vs-reference-h100-c672db7.json \\
        go2-franka-vs-reference-h100-c672db7-2.json go2-franka-vs-reference-h100-93bf760.json \\
        --out go2-franka-pooled-h100-0e03227.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from go2_vs_reference import RATIOS, round_ratios  # imports torch, not Genesis (~2 s)


def pool(runs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{task: {n_envs: {ratio: {"by_run": [median or None per run], "median", "q1", "q3", "rounds"}}}}`` for every
    task, n_envs and ratio that some run measured."""
    pooled: dict[str, dict[str, dict[str, Any]]] = {}
    for run in runs:
        for task, by_size in run["tasks"].items():
            for n_envs in by_size:
                pooled.setdefault(task, {}).setdefault(n_envs, {})
    for task, by_size in pooled.items():
        for n_envs, entry in by_size.items():
            for key, (numerator, denominator) in RATIOS.items():
                per_run = [
                    round_ratios(run["tasks"].get(task, {}).get(n_envs, {}).get("paths", {}), numerator, denominator)
                    for run in runs
                ]
                rounds = [ratio for ratios in per_run for ratio in ratios]
                if len(rounds) < 2:
                    continue
                q1, _, q3 = statistics.quantiles(rounds, n=4)
                entry[key] = {
                    "by_run": [statistics.median(ratios) if ratios else None for ratios in per_run],
                    "median": statistics.median(rounds),
                    "q1": q1,
                    "q3": q3,
                    "rounds": len(rounds),
                }
    return pooled


def format_tables(pooled: dict[str, dict[str, dict[str, Any]]], names: list[str]) -> str:
    lines = [f"runs: {', '.join(f'{i + 1} = {name}' for i, name in enumerate(names))}"]
    for task, by_size in pooled.items():
        for n_envs, entry in by_size.items():
            lines += [
                f"\n{task}, {n_envs} envs",
                "| ratio | paths | paired, run by run | pooled median | interquartile range | rounds |",
                "|---|---|---|---:|---|---:|",
            ]
            for key, row in entry.items():
                numerator, denominator = RATIOS[key]
                by_run = " / ".join("-" if value is None else f"{value:.3f}" for value in row["by_run"])
                lines.append(
                    f"| {key} | {numerator}/{denominator} | {by_run} | {row['median']:.3f}"
                    f" | {row['q1']:.3f}-{row['q3']:.3f} | {row['rounds']} |"
                )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="JSON files written by bench/go2_vs_reference.py")
    parser.add_argument("--out", type=Path, default=None, help="JSON results (default: print only)")
    args = parser.parse_args()
    runs = [json.loads(path.read_text()) for path in args.runs]
    pooled = pool(runs)
    print(format_tables(pooled, [path.name for path in args.runs]))
    if args.out is not None:
        result = {
            "runs": [
                {"file": path.name, "machine": run.get("machine")} for path, run in zip(args.runs, runs, strict=True)
            ],
            "tasks": pooled,
        }
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
