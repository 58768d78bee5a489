"""The transactions page: a FastAPI app the txdag plugin mounts in Airflow's API server at ``/txdag``.

Airflow does not authenticate a plugin's app, so every route here does: the UI's JWT (cookie ``_token``, or an
``Authorization: Bearer`` header) is validated by Airflow's own ``resolve_user_from_token``, reads need the
user to be allowed to read the topology's DAG, actions to edit its runs (replay) or the DAG (pause). Actions are
POSTs that must carry the ``X-Txdag-Csrf`` header, which a cross-site form cannot send.

Every refusal is a JSON ``{"detail": "<one sentence: the problem and what to do>"}``: 401 not logged in, 403 not
allowed, 404 a topology no DAG file defines, 409 a refused action (a replay beyond the last txid), 422 a malformed
request, 500 txdag's connections on this server to fix (a wrong password), 502 Airflow answered badly, 503 ZooKeeper,
Redis or Airflow's REST API did not answer: a read that cannot read what it reports, and an action that cannot reach
ZooKeeper within its session timeout (answered then, and never carried out later).
"""

from __future__ import annotations

import hmac
import time
from typing import Any, Literal

from fastapi import Body, FastAPI, HTTPException, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response

from txdag.airflow import config, metrics, transactions
from txdag.airflow.page_html import render_page
from txdag.errors import ConfigError, ServiceUnavailable, TxdagError
from txdag.topology.owner import names

CSRF_HEADER = "X-Txdag-Csrf"
app = FastAPI(title="txdag transactions", description="Per topology: txids committed, in flight, failed; replay, pause")


def bearer(request: Request) -> str:
    """The request's ``Authorization: Bearer`` token, '' without one."""
    header = request.headers.get("authorization", "")
    return header[7:].strip() if header.lower().startswith("bearer ") else ""


async def authenticated(request: Request) -> tuple[Any, str]:
    """(user, token) of the request, or 401 (no token, expired) / 403 (a token Airflow did not sign)."""
    from airflow.api_fastapi.auth.managers.base_auth_manager import COOKIE_NAME_JWT_TOKEN

    token = bearer(request) or request.cookies.get(COOKIE_NAME_JWT_TOKEN)
    if not token:
        raise HTTPException(401, "not logged in to Airflow: log in to the Airflow UI (or send a bearer token from "
                                 "POST /auth/token), then open the transactions page again")
    from airflow.api_fastapi.core_api.security import resolve_user_from_token

    return await resolve_user_from_token(token), token


Method = Literal["GET", "POST", "PUT", "DELETE"]  # what the auth manager authorizes


def allowed(user: Any, dag_id: str, method: Method, runs: bool = False) -> bool:
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

    return get_auth_manager().is_authorized_dag(method=method, user=user, details=DagDetails(id=dag_id),
                                                access_entity=DagAccessEntity.RUN if runs else None)


def require(user: Any, dag_id: str, method: Method, what: str, runs: bool = False) -> None:
    if not allowed(user, dag_id, method, runs):
        raise HTTPException(403, f"user {getattr(user, 'get_name', lambda: '?')()!r} may not {what} of topology "
                                 f"{dag_id!r}: ask an Airflow admin for edit permission on DAG {dag_id!r}")


def readable_views(user: Any) -> tuple[list[dict[str, Any]], str | None]:
    """The views of every topology the user may read, and an error that kept them from being listed."""
    try:
        names = transactions.topology_names()
    except Exception as exc:  # ZooKeeper down, a connection missing: say so on the page
        return [], f"cannot list the topologies: {type(exc).__name__}: {exc}"
    return transactions.views([n for n in names if allowed(user, n, "GET")], transactions.PAGE_SECONDS), None


@app.get("/", response_class=HTMLResponse)
async def page(request: Request) -> Response:
    try:
        user, _ = await authenticated(request)
    except HTTPException as exc:
        if exc.status_code != 401:
            raise
        from airflow.api_fastapi.app import get_auth_manager

        return RedirectResponse(get_auth_manager().get_url_login(next_url=str(request.url)), status_code=302)
    views, error = await run_in_threadpool(readable_views, user)
    return HTMLResponse(render_page(views, error, {v["topology"]: allowed(user, v["topology"], "PUT", True)
                                                   for v in views}))


@app.get("/api/topologies")
async def list_views(request: Request) -> Response:
    """Every topology the user may read; a ZooKeeper or Redis that does not answer is a 503 (a script must not
    take an outage for no topologies), one topology's unreadable record stays in the list as its ``error``."""
    user, _ = await authenticated(request)
    return await act(lambda: {"topologies": [transactions.view(n, strict=True) for n in transactions.topology_names()
                                             if allowed(user, n, "GET")]})


@app.get("/metrics")
async def scrape(request: Request) -> Response:
    """Every topology's figures in Prometheus' text format (txdag.airflow.metrics). A scraper sends ``[txdag]
    metrics_token`` as its bearer token and reads every topology; an Airflow user's token reads the topologies they
    may read. ZooKeeper not answering is a 503 (Prometheus' ``up`` then says the scrape failed); one topology's
    unreadable records, or records not read within the scraper's timeout, are its ``txdag_up 0``."""
    given, expected = bearer(request), config.option("metrics_token").strip()  # a _CMD's output ends with a newline
    scraper, user = bool(expected) and hmac.compare_digest(given.encode(), expected.encode()), None
    if not scraper:
        try:
            user, _ = await authenticated(request)
        except HTTPException as exc:
            raise HTTPException(exc.status_code, f"{exc.detail}; a scraper sends the [txdag] metrics_token of this "
                                "Airflow as its bearer token (Prometheus: authorization: credentials)") from None
    deadline = time.monotonic() + metrics.time_limit(request.headers.get("x-prometheus-scrape-timeout-seconds"))

    def figures() -> bytes:  # the limit counts from the request: listing the topologies is part of the scrape
        names = [n for n in transactions.topology_names() if scraper or allowed(user, n, "GET")]
        return metrics.exposition(transactions.views(names, max(0.5, deadline - time.monotonic())))

    try:
        body = await run_in_threadpool(figures)
    except TxdagError as exc:  # the topologies could not be listed: a connection to fix (500), else a service (503)
        return PlainTextResponse(f"txdag metrics: {exc}\n", status_code=500 if isinstance(exc, ConfigError) else 503)
    return Response(body, media_type=metrics.CONTENT_TYPE)


@app.exception_handler(RequestValidationError)
async def malformed(request: Request, exc: RequestValidationError) -> JSONResponse:
    """FastAPI's list of pydantic errors as one sentence the page's message line can show."""
    said = "; ".join(f"{'.'.join(str(x) for x in e.get('loc', ())[1:]) or 'body'}: {e.get('msg')}"
                     for e in exc.errors())
    return JSONResponse({"detail": f"malformed request ({said}): send JSON such as the page's buttons do"},
                        status_code=422)


async def defined(dag_id: str, user: Any) -> None:
    """404 for a topology no DAG file defines: the page must not invent one (an empty record, a refusal). Asked
    once the user may act on ``dag_id``: it names the topologies the user may read, or the DAG file that names
    ``dag_id`` and failed to load. Its error is Airflow's to show: Airflow hides an import error's text from a user
    who may not read every DAG of the file, which a broken file cannot tell."""

    def answer() -> str | None:
        found, broken = transactions.folder()
        if dag_id in found:
            return None
        for path in sorted(broken):
            if names(path, dag_id) is not None:
                return (f"the DAG file {path}, which names topology {dag_id!r}, failed to load: Airflow's import "
                        f"errors (Browse > Import Errors, or `airflow dags list-import-errors`) say why; fix it")
        readable = [n for n in sorted(found) if allowed(user, n, "GET")]
        return (f"no DAG file defines topology {dag_id!r} (DAG folder {config.dags_folder()}; it defines "
                f"{', '.join(readable) or 'none you may read'}): check the name")

    missing = await run_in_threadpool(answer)
    if missing is not None:
        raise HTTPException(404, missing)


@app.get("/api/topologies/{dag_id}")
async def one_view(dag_id: str, request: Request) -> Response:
    user, _ = await authenticated(request)
    require(user, dag_id, "GET", "read the transactions")
    await defined(dag_id, user)
    return await act(lambda: transactions.read_view(dag_id, strict=True))


@app.get("/api/topologies/{dag_id}/rejections")
async def rejections(dag_id: str, request: Request, limit: int = Query(50, ge=0, le=10000)) -> Response:
    """The source entries the topology rejected, newest first (``txdag rejections``)."""
    user, _ = await authenticated(request)
    require(user, dag_id, "GET", "read the rejections")
    await defined(dag_id, user)
    return await act(lambda: transactions.rejections(dag_id, limit))


def check_csrf(request: Request) -> None:
    if request.headers.get(CSRF_HEADER) != "1":
        raise HTTPException(403, f"actions need the header {CSRF_HEADER}: 1 (the page's buttons send it)")


@app.post("/api/topologies/{dag_id}/replay")
async def replay(dag_id: str, request: Request, from_txid: int = Body(..., embed=True, strict=True)) -> Response:
    """``from_txid`` is a JSON integer (strict: not "3", 3.0 or true, as the command line takes digits alone)."""
    check_csrf(request)
    user, token = await authenticated(request)
    require(user, dag_id, "PUT", "clear the runs", runs=True)
    await defined(dag_id, user)
    if from_txid < 1:
        raise HTTPException(422, f"from_txid must be a txid >= 1, got {from_txid}")
    return await act(lambda: {"topology": dag_id, "from_txid": from_txid,
                              "cleared": transactions.replay(dag_id, from_txid, token)})


@app.post("/api/topologies/{dag_id}/pause")
async def pause(dag_id: str, request: Request, paused: bool = Body(..., embed=True)) -> Response:
    check_csrf(request)
    user, token = await authenticated(request)
    require(user, dag_id, "PUT", "pause or unpause the DAG")
    await defined(dag_id, user)
    return await act(lambda: {"topology": dag_id, "paused": transactions.set_paused(dag_id, paused, token)})


async def act(action: Any) -> Response:
    """Run an action (or a read) in a thread; a refusal is a 409 that says what to do, a service that does not
    answer a 503, a connection to fix on this server a 500."""
    import requests

    from txdag.airflow.api import AirflowAPIError

    try:
        return JSONResponse(await run_in_threadpool(action))
    except AirflowAPIError as exc:
        return JSONResponse({"detail": f"Airflow refused: {exc}"}, status_code=exc.status if exc.status >= 400 else 502)
    except requests.RequestException as exc:
        return JSONResponse({"detail": f"Airflow's REST API did not answer ({type(exc).__name__}): check the API "
                                       "server's [api] base_url, then retry"}, status_code=503)
    except ServiceUnavailable as exc:
        return JSONResponse({"detail": str(exc)}, status_code=503)
    except ConfigError as exc:  # this server's connections: an operator's fix, not the user's request
        return JSONResponse({"detail": f"txdag is misconfigured on this Airflow: {exc}"}, status_code=500)
    except TxdagError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=409)
