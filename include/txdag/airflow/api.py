"""A small client of Airflow 3.3's REST API (v2): the txdag CLI, the demo and the end-to-end tests use it.

    api = AirflowAPI("http://127.0.0.1:8791", "admin", password)   # logs in with POST /auth/token
    api.wait_dag_parsed("my_dag", timeout=60)
    run_id = api.trigger("my_dag", conf={"x": 1})
    assert api.wait_run("my_dag", run_id, timeout=120) == "success"

Dates are ``datetime`` (timezone-aware; naive ones are taken as UTC) or ISO 8601 strings. Non-2xx answers raise
``AirflowAPIError`` with the status and the server's detail.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import requests

from txdag import hints

TERMINAL_RUN_STATES = frozenset({"success", "failed"})
TERMINAL_TI_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})
EVENT_FIELDS = ("action", "reason")  # what Airflow's "Retry policy decision" event says beside its text


class AirflowAPIError(RuntimeError):
    def __init__(self, method: str, path: str, status: int, detail: Any) -> None:
        super().__init__(f"{method} {path} -> HTTP {status}: {detail}")
        self.path = path
        self.status = status
        self.detail = detail


def iso(value: datetime | str | None) -> str | None:
    """ISO 8601 for the API; naive datetimes are UTC."""
    if value is None or isinstance(value, str):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.isoformat()


class AirflowAPI:
    def __init__(self, base_url: str, username: str = "", password: str = "", *, timeout: float = 30.0,
                 token: str | None = None) -> None:
        """Logs in with the user and password, or uses ``token`` (a user's own JWT: the UI's transactions page
        acts as the logged-in user, so Airflow's own permission checks apply to what it does)."""
        self.base_url = base_url.rstrip("/")
        self.username = username
        self.password = password
        self.timeout = timeout
        self.session = requests.Session()
        if token is None:
            self.login()
        else:
            self.session.headers["Authorization"] = f"Bearer {token}"

    # --- plumbing -------------------------------------------------------------------------------------------

    def login(self) -> str:
        """``POST /auth/token`` → a bearer token (valid 24 h), used for every later request."""
        response = self.session.post(
            f"{self.base_url}/auth/token",
            json={"username": self.username, "password": self.password},
            timeout=self.timeout,
        )
        if response.status_code not in (200, 201):
            raise AirflowAPIError("POST", "/auth/token", response.status_code, _detail(response))
        token = response.json()["access_token"]
        self.session.headers["Authorization"] = f"Bearer {token}"
        return token

    def request(self, method: str, path: str, *, ok: Iterable[int] = (), **kwargs: Any) -> requests.Response:
        """A request to ``/api/v2`` + path; raises unless the status is 2xx or in ``ok``."""
        url = f"{self.base_url}/api/v2{path}"
        kwargs.setdefault("timeout", self.timeout)
        response = self.session.request(method, url, **kwargs)
        if response.status_code == 401 and self.password:  # token expired: log in again, once
            self.login()
            response = self.session.request(method, url, **kwargs)
        if not (200 <= response.status_code < 300 or response.status_code in set(ok)):
            raise AirflowAPIError(method, path, response.status_code, _detail(response))
        return response

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items() if v is not None}).json()

    # --- DAGs -----------------------------------------------------------------------------------------------

    def dag(self, dag_id: str) -> dict | None:
        """The DAG's record, or None while the DAG processor has not serialised it."""
        response = self.request("GET", f"/dags/{dag_id}", ok=(404,))
        return None if response.status_code == 404 else response.json()

    def wait_dag_parsed(self, dag_id: str, timeout: float = 60.0) -> dict:
        """Waits until the DAG is known (parsed and serialised); on timeout, the error names the import errors."""
        deadline = time.monotonic() + timeout
        while True:
            dag = self.dag(dag_id)
            if dag is not None:
                return dag
            if time.monotonic() > deadline:
                errors = self.import_errors()
                detail = "; ".join(f"{e.get('filename')}: {e.get('stack_trace', '')[-500:]}" for e in errors)
                raise TimeoutError(f"DAG {dag_id} not parsed within {timeout}s (import errors: {detail or 'none'})")
            time.sleep(0.5)

    def import_errors(self) -> list[dict]:
        return self.get("/importErrors", limit=100)["import_errors"]

    def set_paused(self, dag_id: str, paused: bool) -> dict:
        return self.request("PATCH", f"/dags/{dag_id}", json={"is_paused": paused}).json()

    def unpause(self, dag_id: str) -> dict:
        return self.set_paused(dag_id, False)

    def pause(self, dag_id: str) -> dict:
        return self.set_paused(dag_id, True)

    # --- runs -----------------------------------------------------------------------------------------------

    def trigger(
        self,
        dag_id: str,
        logical_date: datetime | str | None = None,
        conf: dict | None = None,
        run_id: str | None = None,
    ) -> str:
        """``POST /dags/{id}/dagRuns``; returns the run id. Without ``logical_date`` the run has none (null)."""
        body: dict[str, Any] = {"logical_date": iso(logical_date), "conf": conf or {}}
        if run_id is not None:
            body["dag_run_id"] = run_id
        return self.request("POST", f"/dags/{dag_id}/dagRuns", json=body).json()["dag_run_id"]

    def run(self, dag_id: str, run_id: str) -> dict:
        return self.get(f"/dags/{dag_id}/dagRuns/{_q(run_id)}")

    def runs(self, dag_id: str, **params: Any) -> list[dict]:
        params.setdefault("limit", 100)
        params.setdefault("order_by", "id")
        return self.get(f"/dags/{dag_id}/dagRuns", **params)["dag_runs"]

    def wait_run(self, dag_id: str, run_id: str, timeout: float = 120.0, *, poll: float = 0.5) -> str:
        """Polls until the run is success or failed; returns that state (TimeoutError otherwise)."""
        deadline = time.monotonic() + timeout
        while True:
            state = self.run(dag_id, run_id)["state"]
            if state in TERMINAL_RUN_STATES:
                return state
            if time.monotonic() > deadline:
                raise TimeoutError(f"run {dag_id}/{run_id} still {state} after {timeout}s")
            time.sleep(poll)

    def task_instances(self, dag_id: str, run_id: str) -> list[dict]:
        """The run's task instances (``task_id``, ``state``, ``try_number``, ``start_date``, ``end_date``, ...)."""
        return self.get(f"/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances", limit=1000)["task_instances"]

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict:
        return self.get(f"/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/{task_id}")

    def task_tries(self, dag_id: str, run_id: str, task_id: str) -> list[dict]:
        """Every try of a task instance (the current one included)."""
        return self.get(f"/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/{task_id}/tries")["task_instances"]

    def set_task_state(self, dag_id: str, run_id: str, task_id: str, state: str) -> dict:
        """``PATCH`` a task instance's state (success, failed or skipped): no callback runs, and a supervisor that
        is still alive is told at its next heartbeat to stop its task."""
        return self.request("PATCH", f"/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/{task_id}",
                            json={"new_state": state}).json()

    def wait_task_state(
        self, dag_id: str, run_id: str, task_id: str, states: Iterable[str], timeout: float = 60.0
    ) -> dict:
        wanted = set(states)
        deadline = time.monotonic() + timeout
        while True:
            ti = self.task_instance(dag_id, run_id, task_id)
            if ti["state"] in wanted:
                return ti
            if time.monotonic() > deadline:
                raise TimeoutError(f"{dag_id}/{run_id}/{task_id} is {ti['state']}, not {wanted}, after {timeout}s")
            time.sleep(0.25)

    def clear(
        self,
        dag_id: str,
        run_id: str | None = None,
        *,
        start_date: datetime | str | None = None,
        end_date: datetime | str | None = None,
        task_ids: list[str] | None = None,
        include_future: bool = False,
        include_past: bool = False,
        include_downstream: bool = False,
        only_failed: bool = False,
        reset_dag_runs: bool = True,
        dry_run: bool = False,
    ) -> list[dict]:
        """``POST /dags/{id}/clearTaskInstances``: clears one run's tasks (``run_id``) or the runs whose logical
        date is within [start_date, end_date]; all tasks, successful ones too, unless ``only_failed``/``task_ids``.

        Note the API's own defaults are the opposite (dry_run=True, only_failed=True); this sends every flag.
        ``include_future``/``include_past`` go by logical date: the API answers 400 for a run without one.
        Returns the task instances cleared (or that would be, with ``dry_run``).
        """
        body: dict[str, Any] = {
            "dry_run": dry_run,
            "only_failed": only_failed,
            "reset_dag_runs": reset_dag_runs,
            "include_future": include_future,
            "include_past": include_past,
            "include_downstream": include_downstream,
        }
        if run_id is not None:
            body["dag_run_id"] = run_id
        if start_date is not None:
            body["start_date"] = iso(start_date)
        if end_date is not None:
            body["end_date"] = iso(end_date)
        if task_ids is not None:
            body["task_ids"] = task_ids
        return self.request("POST", f"/dags/{dag_id}/clearTaskInstances", json=body).json()["task_instances"]

    def clear_run(self, dag_id: str, run_id: str, *, only_failed: bool = False, dry_run: bool = False) -> Any:
        """``POST /dags/{id}/dagRuns/{run}/clear``: every task of the run again; answers the run (with
        ``dry_run``, the task instances that would be cleared)."""
        return self.request(
            "POST", f"/dags/{dag_id}/dagRuns/{_q(run_id)}/clear", json={"dry_run": dry_run, "only_failed": only_failed}
        ).json()

    def backfill(
        self,
        dag_id: str,
        from_date: datetime | str,
        to_date: datetime | str,
        max_active_runs: int = 1,
        *,
        run_backwards: bool = False,
        reprocess_behavior: str = "none",
        dag_run_conf: dict | None = None,
    ) -> dict:
        """``POST /backfills``: runs for the DAG's schedule between the dates (the DAG needs a schedule).
        ``reprocess_behavior``: "none", "failed" or "completed". Returns the backfill (its ``id``...)."""
        body = {
            "dag_id": dag_id,
            "from_date": iso(from_date),
            "to_date": iso(to_date),
            "max_active_runs": max_active_runs,
            "run_backwards": run_backwards,
            "reprocess_behavior": reprocess_behavior,
            "dag_run_conf": dag_run_conf or {},
        }
        return self.request("POST", "/backfills", json=body).json()

    def backfill_state(self, backfill_id: int) -> dict:
        return self.get(f"/backfills/{backfill_id}")

    # --- variables, pools, logs ------------------------------------------------------------------------------

    def set_variable(self, key: str, value: Any, description: str | None = None) -> dict:
        """Creates or overwrites a variable (value: a string, or anything JSON, stored as its JSON text)."""
        body = {"key": key, "value": value, "description": description}
        response = self.request("PATCH", f"/variables/{key}", json=body, ok=(404,))
        if response.status_code == 404:
            response = self.request("POST", "/variables", json=body)
        return response.json()

    def get_variable(self, key: str) -> str | None:
        response = self.request("GET", f"/variables/{key}", ok=(404,))
        return None if response.status_code == 404 else response.json()["value"]

    def delete_variable(self, key: str) -> bool:
        """True if it existed."""
        return self.request("DELETE", f"/variables/{key}", ok=(404,)).status_code != 404

    def pool(self, name: str) -> dict | None:
        response = self.request("GET", f"/pools/{_q(name)}", ok=(404,))
        return None if response.status_code == 404 else response.json()

    def create_pool(self, name: str, slots: int, description: str | None = None,
                    include_deferred: bool = False) -> dict:
        body = pool_body(name, slots, description, include_deferred)
        return self.request("POST", "/pools", json=body).json()

    def update_pool(self, name: str, slots: int, description: str | None = None,
                    include_deferred: bool = False) -> dict:
        """Sets the slots, description and include_deferred of an existing pool (404 if it does not exist)."""
        body = pool_body(name, slots, description, include_deferred)
        mask = ["slots", "description", "include_deferred"]
        return self.request("PATCH", f"/pools/{_q(name)}", json=body, params={"update_mask": mask}).json()

    def task_log_events(
        self, dag_id: str, run_id: str, task_id: str, try_number: int = 1, *, map_index: int = -1
    ) -> list[dict]:
        """The task's structured log for one try: dicts with ``event``, ``timestamp``, ``level``, ``logger``..."""
        path = f"/dags/{dag_id}/dagRuns/{_q(run_id)}/taskInstances/{task_id}/logs/{try_number}"
        params: dict[str, Any] = {"full_content": "true", "map_index": map_index}
        events: list[dict] = []
        while True:
            body = self.request("GET", path, params=params, headers={"Accept": "application/json"}).json()
            content = body.get("content") or []
            events.extend(content)
            token = body.get("continuation_token")
            if not token or not content:
                return events
            params["token"] = token

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1, *, map_index: int = -1) -> str:
        """The task's log for one try as text: one line per event (``<time> <level> <logger>: <event>``, then the
        fields an event carries of its own, such as the retry policy's ``action=`` and ``reason=``), an exception's
        details on the lines after its event."""
        lines = []
        for event in self.task_log_events(dag_id, run_id, task_id, try_number, map_index=map_index):
            head = " ".join(str(event[k]) for k in ("timestamp", "level") if event.get(k))
            logger = f"{event['logger']}: " if event.get("logger") else ""
            own = "".join(f" {k}={event[k]}" for k in EVENT_FIELDS if event.get(k) is not None)
            lines.append(f"{head} {logger}{event.get('event', '')}{own}".strip())
            if event.get("error_detail"):
                lines.append(f"  {event['error_detail']}")
        return "\n".join(lines)

    def health(self) -> dict:
        return self.get("/monitor/health")


def pool_body(name: str, slots: int, description: str | None, include_deferred: bool) -> dict[str, Any]:
    """The body of ``POST /pools`` and ``PATCH /pools/{name}`` (both take the name as ``name``)."""
    return {"name": name, "slots": slots, "description": description, "include_deferred": include_deferred}


def unique_run_id(prefix: str = "e2e") -> str:
    return f"{prefix}__{uuid.uuid4().hex[:12]}"


def _q(segment: str) -> str:
    """A run id as one URL path segment (run ids hold ':' and '+')."""
    return quote(segment, safe="")


def _detail(response: requests.Response) -> Any:
    try:
        return response.json().get("detail", response.json())
    except ValueError:
        return response.text[:500]


def api_from_env(timeout: float = 30.0) -> AirflowAPI:
    """A client for TXDAG_AIRFLOW_URL/_USER/_PASSWORD; without them, for the Airflow where txdag runs: scripts/
    airflow.sh's in a checkout, ``AIRFLOW_HOME``'s (default ``~/airflow``) elsewhere (see :mod:`txdag.hints`)."""
    url = hints.airflow_url()
    user = os.environ.get("TXDAG_AIRFLOW_USER", "admin")
    password = os.environ.get("TXDAG_AIRFLOW_PASSWORD") or None  # set empty: as unset (no login has one)
    if password is None:
        candidates = hints.airflow_password_files()
        passwords = next((path for path in candidates if path.is_file()), None)
        if passwords is None:
            raise RuntimeError(f"no Airflow password: set TXDAG_AIRFLOW_PASSWORD, or AIRFLOW_HOME to the instance's "
                               f"home (no {' or '.join(map(str, candidates))}; {hints.how_to_env()})")
        try:
            password = str(json.loads(passwords.read_text())[user])  # a number, written by hand, is its digits
        except (ValueError, KeyError, TypeError):
            raise RuntimeError(f"no password of Airflow user {user!r} in {passwords}: set TXDAG_AIRFLOW_USER to one "
                               f"of its users, or TXDAG_AIRFLOW_PASSWORD") from None
    return AirflowAPI(url, user, password, timeout=timeout)
