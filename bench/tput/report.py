"""The benchmark's outputs: one table on stdout, results.json with every figure, and chart.png (matplotlib)."""

from __future__ import annotations

import json
import textwrap
import traceback
from pathlib import Path
from typing import Any


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit in ("tweets/s", "keys/s"):
        return f"{value:,.0f} {unit}"
    if unit == "x":
        return f"{value:.3g}x"
    if unit == "s":
        return f"{value:.2f} s"
    if unit == "MB":
        return f"{value:,.0f} MB"
    return f"{value} {unit}"


def cpu_row(label: str, drain: dict[str, Any], labels: dict[str, str]) -> tuple[str, str, str] | None:
    """How busy the cores were during a drain, and each component's core-seconds per txid (what caps a ratio)."""
    cpu, per = drain.get("cpu"), drain.get("cpu_per_txid")
    if not cpu or not per:
        return None
    parts = ", ".join(f"{labels.get(name, name)} {s:.2f}" for name, s in per.items() if name != "all" and s >= 0.01)
    return (f"{label}: cores busy", f"{cpu['busy_share']:.0%}",
            f"of {cpu['cores']} cores; core-s per txid {per['all']:.2f}: {parts}")


P1_DRAINS = ("txdag_warm", "txdag_source", "txdag_kafka", "txdag_pg", "txdag_cold")  # key[6:]: warm, source...


def rows(results: dict[str, Any], labels: dict[str, str] | None = None) -> list[tuple[str, str, str]]:
    """(figure, value, note) rows for the table, in the order of issue 5's list, then the cluster's (``labels``: the
    names of the CPU's components, CPU_LABELS by default)."""
    labels = CPU_LABELS if labels is None else labels
    out: list[tuple[str, str, str]] = []
    s = results["settings"]
    p1 = results.get("p1")
    if p1:
        for key, label in (("txdag_warm", "P1 txdag, warm Spark (connect)"),
                           ("txdag_source", "P1 txdag, runs started by its source, warm Spark (connect)"),
                           ("txdag_kafka", "P1 txdag over Kafka, warm Spark (connect)"),
                           ("txdag_pg", "P1 txdag, states in PostgreSQL, warm Spark (connect)"),
                           ("txdag_cold", "P1 txdag, cold spark-submit"),
                           ("baseline", "P1 Python baseline (no fault tolerance)"),
                           ("peer", "P1 Spark Structured Streaming peer"),
                           ("peer_kafka", "P1 Spark Structured Streaming peer over Kafka")):
            if key in p1:
                f = p1[key]
                note = f"{f['tweets']:,} tweets in {f['seconds']:.1f} s"
                if "txids" in f:
                    note += f", {f['txids']} txids of {f['batch']:,}, {f['mat']} in flight"
                if "partitions" in f:
                    note += f", {f['partitions']} partitions"
                if "micro_batches" in f:
                    note += f", {f['micro_batches']} micro-batches of <= {f.get('batch', s['batch']):,}"
                out.append((label, _fmt(f["rate"], "tweets/s"), note))
        for key in P1_DRAINS:
            med = p1.get(key, {}).get("median_per_txid")
            if med:
                out.append((f"P1 {key[6:]}, per txid: coordinate / process / commit", " / ".join(
                    f"{med[k]:.2f}" for k in ("coordinate", "process", "commit")) + " s",
                    f"medians; scheduler gaps c>p {med['gap c>p']:.2f} s, p>c {med['gap p>c']:.2f} s "
                    "(incl. commit waits)"))
        for key in P1_DRAINS:
            steps = p1.get(key, {}).get("job_per_txid")
            if steps:
                out.append((f"P1 {key[6:]}, process task: {' / '.join(steps)}",
                            " / ".join(f"{v:.2f}" for v in steps.values()) + " s",
                            "medians per txid; the job's own steps (its log line), airflow = the rest of the task"))
        for key in P1_DRAINS:
            row = cpu_row(f"P1 {key[6:]}", p1.get(key, {}), labels)
            out += [row] if row else []
        for name, value in p1.get("ratios", {}).items():
            out.append((f"P1 ratio {name}", _fmt(value, "x"), "same backlog, same run"))
    for mode, p2 in results.get("p2", {}).items():
        med = {k: v["median"] for k, v in p2["summary"].items()}
        out.append((f"P2 1-tweet txid, {mode}: trigger -> committed", _fmt(med["total"], "s"),
                    f"median of {len(p2['samples'])} (min {p2['summary']['total']['min']:.2f}, "
                    f"max {p2['summary']['total']['max']:.2f})"))
        out.append((f"P2 {mode}: scheduler wait / coordinate / process / commit",
                    " / ".join(f"{med[k]:.2f}" for k in ("wait", "coordinate", "process", "commit")) + " s",
                    "medians; wait = trigger -> coordinate start + gaps between tasks"))
        steps = p2.get("job")
        if steps:
            out.append((f"P2 {mode}, process task: {' / '.join(steps)}", " / ".join(f"{v:.2f}" for v in steps.values())
                        + " s", "medians; the job's own steps (its log line), airflow = the rest of the task"))
        row = cpu_row(f"P2 {mode}", p2, labels)
        out += [row] if row else []
        above = p2.get("cpu_per_txid_above_idle")
        if above:
            parts = ", ".join(f"{labels.get(n, n)} {s:.2f}" for n, s in above.items() if n != "all" and s >= 0.01)
            idle = p2["idle_cpu"]
            out.append((f"P2 {mode}: core-s per txid above idle", f"{above['all']:.2f}",
                        f"{parts}; idle: {idle['busy_core_seconds'] / idle['seconds']:.2f} core-s per second "
                        f"({idle['seconds']:.0f} s before the samples)"))
    p3 = results.get("p3")
    if p3:
        for name, rate in p3["rows"]:
            out.append((f"P3 {name}", _fmt(rate, "keys/s"), f"{p3['keys']:,} distinct keys, best of {p3['repeat']}"))
        for name, value in p3["ratios"].items():
            out.append((f"P3 ratio {name}", _fmt(value, "x"), "same Redis, same run"))
    p4 = results.get("p4")
    if p4:
        for mat, f in p4["drains"].items():
            out.append((f"P4 max_active_transactions = {mat}", _fmt(f["rate"], "tweets/s"),
                        f"{f['tweets']:,} tweets, {f['txids']} txids of {f['batch']:,}, {f['seconds']:.1f} s"))
        for mat, f in p4["drains"].items():
            row = cpu_row(f"P4 max_active_transactions = {mat}", f, labels)
            out += [row] if row else []
        if p4.get("ratio_4_1") is not None:
            out.append(("P4 ratio mat=4 / mat=1", _fmt(p4["ratio_4_1"], "x"), "same backlog size"))
    for group, m in results.get("memory", {}).items():
        out.append((f"peak RSS: {group}", _fmt(m["peak_mb"], "MB"),
                    f"{m['processes']} process(es), largest {m['peak_process_mb']:,.0f} MB"))
    return out + cluster_rows(results)


def cluster_rows(results: dict[str, Any]) -> list[tuple[str, str, str]]:
    """--cluster's rows: its figures as the single node's are shown, then each ratio cluster / single node."""
    c = results.get("cluster")
    if not c:
        return []
    inner = {"settings": results["settings"], **{k: c[k] for k in ("p1", "p4", "memory") if k in c}}
    out = [(f"cluster: {figure}", value, note) for figure, value, note in rows(inner, CLUSTER_CPU_LABELS)]
    return out + [(f"cluster / single node: {figure}", _fmt(ratio, "x"), note)
                  for figure, ratio, note in cluster_ratios(results)]


MODES = {"connect": "warm Spark Connect", "submit": "spark-submit"}


def cluster_ratios(results: dict[str, Any]) -> list[tuple[str, float, str]]:
    """(figure, cluster's rate / single node's, note) for each drain measured on both: P1 cold, P4 per
    max_active_transactions (the single node's P4 has warm Spark, the cluster's spark-submit: the note says so)."""
    c = results.get("cluster") or {}
    pairs = [("P1 cold", results.get("p1", {}).get("txdag_cold"), c.get("p1", {}).get("txdag_cold"))]
    single, cluster = results.get("p4", {}).get("drains", {}), c.get("p4", {}).get("drains", {})
    pairs += [(f"P4 max_active_transactions = {m}", single.get(m), cluster[m]) for m in cluster]
    return [(figure, on["rate"] / one["rate"],
             f"{on['rate']:,.0f} tweets/s ({MODES[on['mode']]}) / {one['rate']:,.0f} ({MODES[one['mode']]}), "
             f"{on['tweets']:,} tweets each")
            for figure, one, on in pairs if one and on]


def print_table(results: dict[str, Any]) -> str:
    table = rows(results)
    width = max((len(r[0]) for r in table), default=10)
    vwidth = max((len(r[1]) for r in table), default=10)
    lines = [f"{'figure':<{width}}  {'value':>{vwidth}}  note", "-" * (width + vwidth + 40)]
    lines += [f"{a:<{width}}  {b:>{vwidth}}  {c}" for a, b, c in table]
    text = "\n".join(lines)
    print(text)
    return text


def write_json(results: dict[str, Any], out: Path) -> Path:
    path = out / "results.json"
    path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    return path


def record_failure(results: dict[str, Any], out: Path, exc: Exception, name: str) -> None:
    """A benchmark that failed half-way keeps what it measured: the error in the results, its traceback in
    logs/error.txt, one line on stdout."""
    results["error"] = f"{type(exc).__name__}: {exc}"
    (out / "logs" / "error.txt").write_text(traceback.format_exc())
    print(f"{name}: FAILED: {results['error']}", flush=True)


def pyplot(chart: str):  # type: ignore[no-untyped-def]
    """matplotlib.pyplot drawing to files, or None (said, naming ``chart``) when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"no {chart}: matplotlib is not installed (pip install -e '.[bench]'; scripts/setup.sh installs it)")
        return None
    return plt


def write_chart(results: dict[str, Any], out: Path) -> Path | None:
    """chart.png: P1 rates, P2's latency split, P3 keys/s, P4 rates, peak memory. None without matplotlib."""
    plt = pyplot("chart")
    if plt is None:
        return None
    fig, axes = plt.subplots(3, 3, figsize=(17, 13))
    sides = (("", results), ("cluster ", results.get("cluster") or {}))  # the single node's figures, the cluster's
    _bars(axes[0][0], "P1: tweets/s committed (log)", {
        f"{side}{k}": v["rate"] for side, r in sides
        for k, v in r.get("p1", {}).items() if isinstance(v, dict) and "rate" in v}, log=True)
    _progress(axes[0][1], results.get("p1", {}))
    _phases(axes[0][2], phase_rows(results))
    _latency(axes[1][0], results.get("p2", {}))
    _bars(axes[1][1], "P3: keys/s", {n: r for n, r in results.get("p3", {}).get("rows", [])}, log=True)
    _bars(axes[1][2], "P4: tweets/s by max_active_transactions",
          {f"{side}mat={m}": f["rate"] for side, r in sides for m, f in r.get("p4", {}).get("drains", {}).items()})
    _bars(axes[2][0], "peak RSS (MB)", {f"{side}{g}": m["peak_mb"] for side, r in sides
                                        for g, m in r.get("memory", {}).items()})
    axes[2][1].axis("off")
    _cpu(axes[2][2], cpu_rows(results))
    s = results["settings"]
    text = "\n".join(textwrap.fill(f"{k}: {v}", 60, subsequent_indent="  ") for k, v in s.items() if k != "command")
    axes[2][1].text(0, 1, text, va="top", family="monospace", fontsize=7)
    return save(plt, fig, f"txdag benchmark {results['started']} ({s.get('tweets', 0):,} tweets, batch "
                f"{s.get('batch')})", out / "chart.png")


def save(plt, fig, title: str, path: Path) -> Path:  # type: ignore[no-untyped-def]
    """A chart's figure, titled, written to ``path`` and closed."""
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _bars(ax, title: str, values: dict[str, float], log: bool = False) -> None:  # type: ignore[no-untyped-def]
    ax.set_title(title, fontsize=10)
    if not values:
        ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
        return
    names = list(values)
    ax.barh(names, [values[n] for n in names], color="#4c72b0")
    if log:
        ax.set_xscale("log")
        ax.minorticks_off()
    for i, n in enumerate(names):
        ax.text(values[n], i, f" {values[n]:,.0f}", va="center", fontsize=8)
    ax.tick_params(axis="y", labelsize=8)
    ax.invert_yaxis()


def _latency(ax, p2: dict) -> None:  # type: ignore[no-untyped-def]
    ax.set_title("P2: 1-tweet txid, trigger -> committed (s, medians)", fontsize=10)
    if not p2:
        ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
        return
    left = {mode: 0.0 for mode in p2}
    for part, color in (("wait", "#c44e52"), ("coordinate", "#8172b2"), ("process", "#dd8452"), ("commit", "#55a868")):
        widths = [p2[m]["summary"][part]["median"] for m in p2]
        ax.barh(list(p2), widths, left=[left[m] for m in p2], color=color, label=part)
        for m, w in zip(p2, widths):
            left[m] += w
    ax.legend(fontsize=8)


def phase_rows(results: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per measured case (P1 warm/cold per txid, P2 warm/cold, the cluster's P1), the seconds of each phase of one
    txid, in order: the scheduler's waits, coordinate, the process task's Airflow part and its job's steps, commit
    (medians)."""
    cases: dict[str, dict[str, float]] = {}
    for key in P1_DRAINS:
        f = results.get("p1", {}).get(key)
        if f and f.get("median_per_txid"):
            med = f["median_per_txid"]
            cases[f"P1 {key[6:]}"] = _split(med["gap c>p"] + med["gap p>c"], med, f.get("job_per_txid") or {})
    for mode, p2 in results.get("p2", {}).items():
        med = {k: v["median"] for k, v in p2["summary"].items()}
        cases[f"P2 {mode}"] = _split(med["wait"], med, p2.get("job") or {})
    if results.get("cluster"):
        cases.update({f"cluster {name}": phases for name, phases in phase_rows(results["cluster"]).items()})
    return cases


def _split(wait: float, med: dict[str, float], steps: dict[str, float]) -> dict[str, float]:
    process = {f"process: {k}": v for k, v in steps.items()} if steps else {"process": med["process"]}
    return {"scheduler wait": wait, "coordinate": med["coordinate"], **process, "commit": med["commit"]}


def _phases(ax, cases: dict[str, dict[str, float]]) -> None:  # type: ignore[no-untyped-def]
    ax.set_title("one txid, phase by phase (s, medians)", fontsize=10)
    if not cases:
        ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
        return
    names = list(dict.fromkeys(n for phases in cases.values() for n in phases))
    colors = matplotlib_colors(len(names))
    left = dict.fromkeys(cases, 0.0)
    for name, color in zip(names, colors):
        widths = [cases[c].get(name, 0.0) for c in cases]
        ax.barh(list(cases), widths, left=[left[c] for c in cases], color=color, label=name)
        for c, w in zip(cases, widths):
            left[c] += w
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.08), ncol=2)
    ax.invert_yaxis()


def matplotlib_colors(n: int) -> list:
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("tab20")
    return [cmap(i % 20) for i in range(n)]


# the scheduler's tree holds the LocalExecutor's workers and every task process (and cold mode's spark-submit JVMs)
CPU_LABELS = {"airflow scheduler": "airflow scheduler + tasks", "spark-connect": "Spark Connect (JVM + Python workers)"}
# on the cluster, the Celery workers' trees hold the tasks (and the spark-submit drivers), the Spark workers' the
# executors (and their Python workers)
CLUSTER_CPU_LABELS = {"celery worker": "Celery workers + tasks", "spark worker": "Spark workers + executors"}


def drains(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The drains measured, by name: P1 warm/cold, P4 per max_active_transactions, then the cluster's."""
    found = {f"P1 {k[6:]}": results.get("p1", {}).get(k) for k in P1_DRAINS}
    found.update({f"P4 mat={m}": f for m, f in results.get("p4", {}).get("drains", {}).items()})
    if results.get("cluster"):
        found.update({f"cluster {name}": f for name, f in drains(results["cluster"]).items()})
    return {name: f for name, f in found.items() if f}


def cpu_rows(results: dict[str, Any]) -> dict[str, tuple[float, dict[str, float]]]:
    """Per drain (P1 warm/cold, P4 per max_active_transactions, the cluster's): the cores' busy share and the
    core-seconds per txid of each component."""
    out = {}
    for name, f in drains(results).items():
        labels = CLUSTER_CPU_LABELS if name.startswith("cluster ") else CPU_LABELS
        if f.get("cpu_per_txid"):
            out[name] = (f["cpu"]["busy_share"],
                         {labels.get(k, k): v for k, v in f["cpu_per_txid"].items() if k != "all"})
    return out


def _cpu(ax, rows: dict[str, tuple[float, dict[str, float]]]) -> None:  # type: ignore[no-untyped-def]
    ax.set_title("CPU core-s per txid; % = cores busy", fontsize=10)
    if not rows:
        ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
        return
    names = list(dict.fromkeys(n for _, parts in rows.values() for n in parts))
    left = dict.fromkeys(rows, 0.0)
    for name, color in zip(names, matplotlib_colors(len(names))):
        widths = [rows[r][1].get(name, 0.0) for r in rows]
        ax.barh(list(rows), widths, left=[left[r] for r in rows], color=color, label=name)
        for r, w in zip(rows, widths):
            left[r] += w
    for i, r in enumerate(rows):
        ax.text(left[r], i, f" {rows[r][0]:.0%}", va="center", fontsize=8)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.08), ncol=2)
    ax.invert_yaxis()


def _progress(ax, p1: dict) -> None:  # type: ignore[no-untyped-def]
    ax.set_title("P1: tweets committed over time", fontsize=10)
    drawn = False
    for key in P1_DRAINS:
        f = p1.get(key)
        if f and f.get("commits"):
            done = [min((i + 1) * f["batch"], f["tweets"]) for i in range(len(f["commits"]))]
            ax.step([0.0, *f["commits"]], [0, *done], where="post", label=f"txdag {key[6:]}")
            drawn = True
    if not drawn:
        ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
        return
    ax.set_xlabel("seconds from the first trigger", fontsize=8)
    ax.legend(fontsize=8)
