"""The recovery benchmark's outputs: one table on stdout, results.json with every trial, chart.png (matplotlib).

With ``--compare`` an earlier results.json (e.g. the run before a settings change) is shown beside this one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

BUDGET = 30.0  # seconds: Storm's message timeout, the bound on top of one txid's normal time


def _s(value: float | None) -> str:
    return "never" if value is None else f"{value:.0f}"


def baseline(results: dict[str, Any], mode: str) -> float | None:
    """The no-fault trial's seconds from the process phase to the second txid's commit, in ``mode``."""
    rows = [r for r in results.get("trials", []) if r["fault"] == "none" and r["mode"] == mode and r["next_s"]]
    return rows[0]["next_s"] if rows else None


def verdict(row: dict[str, Any], base: float | None) -> str:
    """Whether the trial met the bound: both txids committed by themselves within 30 s + the no-fault time."""
    if row["fault"] == "none":
        return "baseline"
    if not row["recovered"]:
        return "NO (replayed by hand)"
    if not row["landed"]:
        return "missed (committed before the fault)"
    if base is None or row["next_s"] is None:
        return "?"
    over = row["next_s"] - BUDGET - base
    return "yes" if over <= 0 else f"NO ({over:.0f} s over)"


def key(row: dict[str, Any]) -> tuple[str, str, str]:
    return row["mode"], row["fault"], row["phase"]


def lines(results: dict[str, Any], before: dict[str, Any] | None = None) -> list[str]:
    earlier = {key(r): r for r in (before or {}).get("trials", [])}
    head = f"{'mode':<8}{'fault':<15}{'phase':<8}{'in-flight s':>12}{'next s':>8}"
    head += f"{'before':>14}" if before else ""
    head += f"  {'exact':<6}{'order':<6}{'<= 30 s + normal':<26}{'stale keys':<11}"
    out = [head, "-" * len(head)]
    for row in results.get("trials", []):
        base = baseline(results, row["mode"])
        line = f"{row['mode']:<8}{row['fault']:<15}{row['phase']:<8}{_s(row['in_flight_s']):>12}{_s(row['next_s']):>8}"
        if before:
            old = earlier.get(key(row))
            line += f"{(_s(old['in_flight_s']) + ' / ' + _s(old['next_s'])) if old else '-':>14}"
        line += f"  {'yes' if not row['exact'] else 'NO':<6}{'yes' if not row['order'] else 'NO':<6}"
        line += f"{verdict(row, base):<26}{len(row['leftovers']):<11}"
        out.append(line)
    out.append("seconds from the fault to the commit of the faulted txid (in-flight) and of the txid after it (next); "
               "'none' is the same trial without a fault")
    return out


def print_table(results: dict[str, Any], before: dict[str, Any] | None = None) -> str:
    text = "\n".join(lines(results, before))
    print(text)
    return text


def write_chart(results: dict[str, Any], out: Path, before: dict[str, Any] | None = None,
                path: Path | None = None) -> Path | None:
    """chart.png: per fault and phase, seconds to the next txid's commit (and the earlier run's, if given), with
    the bound (30 s + the no-fault time) as a line. None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no chart: matplotlib is not installed (pip install -e '.[bench]'; scripts/setup.sh installs it)")
        return None
    rows = [r for r in results.get("trials", [])]
    earlier = {key(r): r for r in (before or {}).get("trials", [])}
    labels = [f"{r['fault']} ({r['phase']}, {r['mode']})" for r in rows]
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(rows) + 1.8))
    y = list(range(len(rows)))
    now = [r["next_s"] if r["next_s"] is not None else 0 for r in rows]
    if before:
        old = [(earlier.get(key(r)) or {}).get("next_s") or 0 for r in rows]
        ax.barh([i + 0.2 for i in y], old, height=0.4, color="#c44e52", label=before.get("label", "before"))
        ax.barh([i - 0.2 for i in y], now, height=0.4, color="#4c72b0", label=results.get("label", "after"))
    else:
        ax.barh(y, now, color="#4c72b0", label="fault -> next txid committed")
    runs = [(results, "#4c72b0")] + ([(before, "#c44e52")] if before else [])
    for run, color in runs:  # each run's own bound: its no-fault time depends on how busy the machine was
        base = baseline(run, "submit")
        if base is not None:
            ax.axvline(BUDGET + base, color=color, linestyle="--",
                       label=f"{run.get('label') or 'this run'}: 30 s + its no-fault time ({base:.0f} s)")
    ax.set_yticks(y, labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds from the fault to the commit of the txid after the faulted one")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(f"txdag recovery, one fault at a time ({results.get('started', '')})", fontsize=10)
    fig.tight_layout()
    path = path or out / "chart.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
