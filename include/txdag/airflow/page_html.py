"""The transactions page's HTML: rendered on the server from the views of txdag.airflow.transactions, plain HTML
with a little CSS and JavaScript (no build step). Figures carry ``data-*`` attributes so tests read them
without parsing text. Links are relative to ``/txdag/`` and open in the top window (the page runs in the UI's
iframe)."""

from __future__ import annotations

import json
from html import escape
from typing import Any
from urllib.parse import quote

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#1a202c;background:#fff}
h1{font-size:20px;margin:0 0 12px}h2{font-size:17px;margin:0}h3{font-size:14px;margin:14px 0 4px}
section.topology{border:1px solid #cbd5e0;border-radius:6px;padding:12px 16px;margin:0 0 16px}
header{display:flex;gap:12px;align-items:center;flex-wrap:wrap}
dl{display:flex;gap:24px;margin:10px 0;flex-wrap:wrap}
dt{font-size:12px;color:#4a5568}dd{margin:0;font-size:20px;font-weight:600}
table{border-collapse:collapse;width:100%;margin:4px 0}
th,td{text-align:left;padding:3px 8px;border-bottom:1px solid #edf2f7;vertical-align:top}
th{font-size:12px;color:#4a5568}td.meta{font-family:monospace;font-size:12px;max-width:420px;overflow-wrap:anywhere}
.phase,.state{border-radius:4px;padding:0 6px;font-size:12px;background:#edf2f7}.failed{background:#fed7d7}
.paused{background:#feebc8;border-radius:4px;padding:2px 8px}.error{color:#c53030}.empty{color:#718096}
button{font:inherit;padding:2px 10px;cursor:pointer}#message{min-height:20px;margin:0 0 8px}
ul.ways{margin:4px 0;padding-left:18px;color:#1a202c}pre{white-space:pre-wrap;font-size:12px}
"""

SCRIPT = """
async function act(topology, action, body, confirmText) {
  if (!confirm(confirmText)) return;
  const msg = document.getElementById('message');
  msg.textContent = action + ' ' + topology + '…'; msg.className = '';
  const r = await fetch('api/topologies/' + encodeURIComponent(topology) + '/' + action, {method: 'POST',
    credentials: 'same-origin', headers: {'Content-Type': 'application/json', 'X-Txdag-Csrf': '1'},
    body: JSON.stringify(body)});
  const data = await r.json().catch(() => ({detail: r.statusText}));
  msg.textContent = r.ok ? action + ' ' + topology + ': done ' + JSON.stringify(data) : 'HTTP ' + r.status + ': ' +
    (data.detail || JSON.stringify(data));
  msg.className = r.ok ? 'done' : 'error';
  msg.dataset.status = r.status;
  if (r.ok) setTimeout(() => location.reload(), 1500);
}
document.addEventListener('click', (e) => {
  const b = e.target.closest('button[data-action]'); if (!b) return;
  const t = b.dataset.topology;
  if (b.dataset.action === 'pause') {
    const paused = b.dataset.paused !== 'true';
    act(t, 'pause', {paused}, (paused ? 'Pause' : 'Unpause') + ' topology ' + t + '?');
  } else {
    const n = parseInt(b.dataset.txid || document.getElementById('replay-' + t).value, 10);
    act(t, 'replay', {from_txid: n}, 'Replay topology ' + t + ' from txid ' + n +
      ': clear the run of txid ' + n + ' and of every later txid?');
  }
});
setInterval(() => { if (!document.getElementById('message').textContent) location.reload(); }, 15000);
"""


def text(value: Any) -> str:
    """Any value as HTML text: numbers from ZooKeeper, and whatever a store's JSON holds (a rejection's txid)."""
    return escape(str(value))


def render_page(views: list[dict[str, Any]], error: str | None, can_act: dict[str, bool]) -> str:
    body = "".join(topology_html(v, can_act.get(v["topology"], False)) for v in views)
    if error:
        body = f'<p class="error" data-error>{escape(error)}</p>' + body
    if not views and not error:
        body = '<p class="empty">No topologies in the DAG folder or in ZooKeeper yet.</p>'
    return (f'<!doctype html><html><head><meta charset="utf-8"><title>txdag transactions</title>'
            f"<style>{STYLE}</style></head><body><h1>Transactions</h1><p id=\"message\"></p>{body}"
            f"<script>{SCRIPT}</script></body></html>")


def topology_html(v: dict[str, Any], can_act: bool) -> str:
    name = v["topology"]
    head = f'<header><h2><a target="_top" href="../dags/{quote(name)}">{escape(name)}</a></h2>'
    if v.get("paused"):
        head += '<span class="paused" data-paused="true">paused</span>'
    if can_act and not v.get("error"):
        label = "Unpause" if v.get("paused") else "Pause"
        head += (f'<button data-action="pause" data-topology="{escape(name)}" '
                 f'data-paused="{str(bool(v.get("paused"))).lower()}">{label}</button>')
        if v.get("last_txid"):
            start = v["failed"][0]["txid"] if v["failed"] else v["last_txid"]
            head += (f'<span>replay from txid <input id="replay-{escape(name)}" type="number" min="1" '
                     f'max="{text(v["last_txid"])}" value="{text(start)}" '
                     f'style="width:6em"> <button data-action="replay" data-topology="{escape(name)}">Replay'
                     f"</button></span>")
    head += "</header>"
    if v.get("error"):
        return f'<section class="topology" data-topology="{escape(name)}">{head}' \
               f'<p class="error" data-error>{escape(v["error"])}</p></section>'
    lag = v["lag"] if v["lag"] is not None else "?"
    figures = [("committed txid", "committed", v["committed_txid"]), ("last txid", "last", v["last_txid"]),
               ("in flight", "in-flight", len(v["in_flight"])),
               ("failed", "failed", sum(1 + len(f["cascade"]) for f in v["failed"])),
               ("lag (entries not in a batch)", "lag", lag),
               ("commits / min (10 min)", "rate", v["commits_per_minute"]),
               ("rejected entries", "rejected", v["rejected"] if v.get("rejected") is not None else "?")]
    dl = "".join(f'<div><dt>{label}</dt><dd data-figure="{key}">{text(value)}</dd></div>'
                 for label, key, value in figures)
    parts = [head, failed_html(name, v["failed"], can_act), stalled_html(v.get("stalled") or []),  # they lead
             run_slots_html(v.get("run_slots")), f"<dl>{dl}</dl>"]
    if v.get("never_ran"):
        parts.append('<p class="empty">No txid yet: the topology has not run.</p>')
    if v.get("lag_error"):
        parts.append(f'<p class="error" data-lag-error>lag unknown: {escape(v["lag_error"])}</p>')
    if v.get("rejections_error"):
        parts.append(f'<p class="error" data-rejections-error>rejections unknown: {escape(v["rejections_error"])}</p>')
    parts += [in_flight_html(name, v["in_flight"]),
              rejections_html(name, v.get("rejections") or [], v.get("rejected")), txids_html(name, v["txids"])]
    return f'<section class="topology" data-topology="{escape(name)}">{"".join(parts)}</section>'


def error_html(f: dict[str, Any]) -> str:
    """A failure's headline (txdag's own error), its ways out as commands, and, folded away, the whole error."""
    text = f["error"] or ""
    ways = "".join(f'<li data-way-out>{escape(w["when"])}: <code>{escape(w["command"])}</code></li>'
                   for w in f["ways_out"])
    full = "" if text.strip() == f["headline"] else \
        f"<details><summary>full error</summary><pre>{escape(text)}</pre></details>"
    return f'<span data-headline>{escape(f["headline"])}</span><ul class="ways">{ways}</ul>{full}'


def run_link(dag: str, run_id: str | None) -> str:
    if not run_id:
        return "-"
    return f'<a target="_top" href="../dags/{quote(dag)}/runs/{quote(run_id, safe="")}">{escape(run_id)}</a>'


def failed_html(dag: str, failed: list[dict[str, Any]], can_act: bool) -> str:
    if not failed:
        return ""
    rows = "".join(
        f'<tr data-failed-txid="{text(f["txid"])}" data-cascade="{text(",".join(map(str, f["cascade"])))}">'
        f'<td>{text(f["txid"])}</td><td>{text(f["attempt"])}</td><td>{run_link(dag, f["run_id"])}</td>'
        f'<td class="error">{error_html(f)}</td><td>{text(", ".join(map(str, f["cascade"])) or "-")}</td><td>'
        + (f'<button data-action="replay" data-topology="{escape(dag)}" data-txid="{text(f["txid"])}">Replay from '
           f'{text(f["txid"])}</button>' if can_act else "") + "</td></tr>" for f in failed)
    return ('<h3>Failed (and the later txids waiting on them)</h3><table><tr><th>txid</th><th>attempt</th>'
            f"<th>run</th><th>error</th><th>failed behind it</th><th></th></tr>{rows}</table>")


def in_flight_html(dag: str, rows: list[dict[str, Any]]) -> str:
    if not rows:
        return '<h3>In flight</h3><p class="empty" data-in-flight-empty>none</p>'
    body = "".join(
        f'<tr data-txid="{text(r["txid"] if r["txid"] is not None else "")}" data-phase="{escape(r["phase"])}">'
        f'<td>{text(r["txid"] if r["txid"] is not None else "-")}</td>'
        f'<td><span class="phase">{escape(r["phase"])}</span></td>'
        f'<td>{text(r["attempt"] or "-")}</td><td>{text(r.get("batch_size", "-"))}</td>'
        f'<td data-waits-on>{escape(r.get("waits_on") or "-")}</td><td>{escape(r.get("for") or "-")}</td>'
        f'<td>{run_link(dag, r["run_id"])}</td>'
        f'<td><span class="state">{text(r.get("run_state") or "-")}</span></td></tr>' for r in rows)
    return ('<h3>In flight</h3><table data-in-flight><tr><th>txid</th><th>phase</th><th>attempt</th><th>batch size</th>'
            f"<th>waits on</th><th>for</th><th>run</th><th>run state</th></tr>{body}</table>")


def stalled_html(advice: list[str]) -> str:
    """The head of the line, stalled: what it waits on, since when, and the command that retries it now."""
    return "".join(f'<p class="error" data-stalled>{escape(a)}</p>' for a in advice)


def run_slots_html(slots: dict[str, Any] | None) -> str:
    """Runs queued in Airflow: behind which runs (max_active_runs), and which of them frees a slot, and how."""
    return f'<p class="error" data-run-slots>{escape(slots["text"])}</p>' if slots else ""


def rejections_html(dag: str, rows: list[dict[str, Any]], total: int | None) -> str:
    """The newest rejected source entries: id, txid, attempt, when, and the reason (``txdag rejections``)."""
    if not rows:
        return ""
    body = "".join(
        f'<tr data-rejected-id="{escape(r["id"])}"><td>{escape(r["id"])}</td><td>{text(r["txid"] or "-")}</td>'
        f'<td>{text(r["attempt"] or "-")}</td><td>{text(r.get("partition") or "-")}</td>'
        f'<td>{text(r["at"] or "-")}</td><td class="error">{text(r["reason"])}</td></tr>' for r in rows)
    newest = f" (the newest {len(rows)} of {total})" if total is not None and total > len(rows) else ""
    return (f'<h3>Rejected source entries{newest}</h3><table data-rejections><tr><th>entry id</th><th>txid</th>'
            f'<th>attempt</th><th>partition</th><th>when</th><th>reason</th></tr>{body}</table>'
            f'<p class="empty">all of them: <code>txdag rejections {escape(dag)}</code>, or '
            f'<a target="_blank" href="api/topologies/{quote(dag)}/rejections?limit=1000">as JSON</a></p>')


def txid_anchor(topology: str, txid: int) -> str:
    """The id of a txid's row among the kept txids: what a task's "Transaction" link points at (txdag.airflow.links;
    a topology id is letters, digits, ``_``, ``-`` and ``.``)."""
    return f"{quote(topology, safe='')}-txid-{txid}"


def txids_html(dag: str, rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    body = "".join(
        f'<tr id="{escape(txid_anchor(dag, r["txid"]))}" data-row-txid="{text(r["txid"])}"><td>{text(r["txid"])}</td>'
        f'<td><span class="phase{" failed" if r["phase"] == "failed" else ""}">{escape(r["phase"])}</span></td>'
        f'<td>{text(r["attempt"])}</td><td>{text(r["batch_size"] if r["batch_size"] is not None else "-")}</td>'
        f'<td>{escape(r["batch"])}</td>'
        f'<td class="meta">{escape(json.dumps(r["metadata"], sort_keys=True))}</td><td>{run_link(dag, r["run_id"])}'
        f'</td><td>{escape(r["updated_at"])}</td></tr>' for r in rows)
    return ('<h3>Kept txids (newest first)</h3><table data-txids><tr><th>txid</th><th>phase</th><th>attempt</th>'
            '<th>batch size</th><th>batch</th><th>metadata</th><th>run</th><th>updated</th></tr>'
            f"{body}</table>")
