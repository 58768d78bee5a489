"""--batches: P1 once per batch size on the same backlog, each a whole run of its own (out/batch-<size>/), then the
curve: tweets/s and the machine's core-seconds per 1,000 tweets against the batch size, txdag beside the Spark peer
beside the Python baseline, with each component's peak RSS (curve.json, curve.png, a table on stdout).

One size at a time shows what a single run hides: a cost that grows with the batch is behind the fixed costs at
20,000 tweets per txid and in front of them at 500,000. A size that fails is a row with its error; the next one runs.
"""

from __future__ import annotations

import copy
import json
from argparse import Namespace
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tput.report import P1_DRAINS, pyplot, save

SIDES = (*P1_DRAINS, "peer", "peer_kafka", "baseline")  # the P1 figures a row can have, txdag's drains first
LABELS = {"txdag_warm": "txdag", "txdag_source": "txdag by its source", "txdag_kafka": "txdag over Kafka",
          "txdag_pg": "txdag, states in PostgreSQL", "txdag_cold": "txdag cold", "peer": "Spark peer",
          "peer_kafka": "Spark peer over Kafka", "baseline": "Python baseline"}


def row(batch: int, results: dict[str, Any]) -> dict[str, Any]:
    """One size's figures from its run's results: each side's tweets/s and core-seconds per 1,000 tweets (the
    machine's busy core-seconds over the side's drain: Airflow's idle loops count for every side alike), txdag's
    ratios to the peer and the baseline, peak RSS per component, the run's error if it failed."""
    p1 = results.get("p1", {})
    out: dict[str, Any] = {"batch": batch, "rate": {}, "core_s_per_1k": {}}
    for side in SIDES:
        f = p1.get(side)
        if not isinstance(f, dict) or "rate" not in f:
            continue
        out["rate"][side] = f["rate"]
        busy = (f.get("cpu") or {}).get("busy_core_seconds", f.get("busy_core_seconds"))
        if busy is not None and f.get("tweets"):
            out["core_s_per_1k"][side] = 1000 * busy / f["tweets"]
    rates = out["rate"]
    pairs = (("txdag/peer", "txdag_warm", "peer"), ("txdag/baseline", "txdag_warm", "baseline"),
             ("txdag kafka/peer kafka", "txdag_kafka", "peer_kafka"))
    out["ratios"] = {name: rates[a] / rates[b] for name, a, b in pairs if rates.get(a) and rates.get(b)}
    if "txdag_warm" in p1:
        out["txids"] = p1["txdag_warm"].get("txids")
    out["peak_rss_mb"] = {group: m["peak_mb"] for group, m in results.get("memory", {}).items()}
    if "error" in results:
        out["error"] = results["error"]
    return out


def table(rows: list[dict[str, Any]]) -> str:
    """The curve as text: a line per size and side."""
    lines = [f"{'batch':>9}  {'side':<28} {'tweets/s':>10} {'core-s/1k tweets':>17}"]
    for r in rows:
        for i, side in enumerate(s for s in SIDES if s in r["rate"]):
            cores = r["core_s_per_1k"].get(side)
            lines.append(f"{r['batch'] if i == 0 else '':>9}  {LABELS[side]:<28} {r['rate'][side]:>10,.0f} "
                         f"{'-' if cores is None else f'{cores:.3f}':>17}")
        lines += [f"{'':>9}  {name:<28} {value:>10.3g}x" for name, value in r.get("ratios", {}).items()]
        if "error" in r:
            lines.append(f"{r['batch']:>9}  FAILED: {r['error']}")
    return "\n".join(lines)


def run_curve(args: Namespace, out: Path, settings: Callable[[Namespace, dict], dict],
              run: Callable[[Namespace, Path, Callable], int]) -> int:
    """Runs ``run`` (tput.runner.run) once per size of ``args.batches``; writes curve.json and curve.png; 1 if any
    size failed."""
    rows, code = [], 0
    for batch in args.batches:
        one = copy.copy(args)
        one.batch, one.out = batch, str(out / f"batch-{batch}")
        written = Path(one.out) / "results.json"
        written.unlink(missing_ok=True)  # an earlier run's into the same --out is not this one's
        (Path(one.out) / "logs").mkdir(parents=True, exist_ok=True)
        print(f"bench: === P1 at {batch:,} tweets per txid ({args.tweets:,} tweets) ===", flush=True)
        try:
            code = run(one, Path(one.out), settings) or code
        except Exception as exc:  # noqa: BLE001 - outside run()'s own guard (its set-up, its report): the next size
            code = 1
            print(f"bench: P1 at {batch:,} tweets per txid: FAILED: {type(exc).__name__}: {exc}", flush=True)
        results = json.loads(written.read_text()) if written.exists() else {"error": f"no {written}: see above"}
        rows.append(row(batch, results))
        text = table(rows)  # written after each size: an interrupted curve keeps the sizes it has
        (out / "curve.json").write_text(json.dumps({"started": args.started, "tweets": args.tweets, "rows": rows,
                                                    "table": text}, indent=2) + "\n")
    print(f"\nbench: the curve ({args.tweets:,} tweets at each size)\n{text}")
    write_chart(rows, args.tweets, out)
    return code


def write_chart(rows: list[dict[str, Any]], tweets: int, out: Path) -> Path | None:
    """curve.png: tweets/s, core-seconds per 1,000 tweets and peak RSS against the batch size (log axes but RSS)."""
    plt = pyplot("curve chart")
    if plt is None:
        return None
    fig, axes = plt.subplots(1, 3, figsize=(18, 6))
    for ax, key, title in ((axes[0], "rate", "tweets/s committed"),
                           (axes[1], "core_s_per_1k", "core-seconds per 1,000 tweets (whole machine)"),
                           (axes[2], "peak_rss_mb", "peak RSS (MB) during the drains")):
        names = [n for n in (*SIDES, *sorted({g for r in rows for g in r[key]})) if any(n in r[key] for r in rows)]
        for name in dict.fromkeys(names):
            points = [(r["batch"], r[key][name]) for r in rows if name in r[key]]
            ax.plot(*zip(*points, strict=True), marker="o", label=LABELS.get(name, name))
        ax.set_xscale("log")
        ax.set_yscale("linear" if key == "peak_rss_mb" else "log")
        ax.set_xticks([r["batch"] for r in rows], [f"{r['batch']:,}" for r in rows])
        ax.minorticks_off()
        ax.set_xlabel("tweets per txid (the peer's micro-batch)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7, loc="best")
    return save(plt, fig, f"txdag P1 against the batch size ({tweets:,} tweets at each size)", out / "curve.png")
