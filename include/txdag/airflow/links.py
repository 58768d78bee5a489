"""The extra link of each txdag task: its txid on the Transactions page (the plugin's ``/txdag/``).

Airflow 3 serializes an operator's extra links as their names and XCom keys, and its API server reads the URL from
that XCom of the task instance: each task pushes its link as soon as it knows the txid (every try, since a try
starts with its task's XComs cleared).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperatorLink

from txdag.airflow.page_html import txid_anchor


class TxidLink(BaseOperatorLink):
    """The "Transaction" link: the task's txid on the Transactions page."""

    name = "Transaction"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        """What the task pushed (the API server reads the same XCom itself)."""
        from airflow.sdk.bases.xcom import BaseXCom

        return BaseXCom.get_value(ti_key=ti_key, key=self.xcom_key) or ""


def page_url(topology: str, txid: int) -> str:
    """The txid's row on the Transactions page, under Airflow's ``[api] base_url`` (relative without one)."""
    from airflow.configuration import conf

    base = (conf.get("api", "base_url", fallback="") or "").rstrip("/")
    return f"{base}/txdag/#{txid_anchor(topology, txid)}"


def push_link(context: Any, topology: str, txid: int) -> None:
    """Sets the task's link; a context without a task instance (an operator run outside Airflow) has none to set."""
    ti = context.get("ti")
    if ti is not None:
        ti.xcom_push(key=TxidLink().xcom_key, value=page_url(topology, txid))
