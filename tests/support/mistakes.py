"""The corpus of mistakes (issue 21): what a careless or hostile user does, and the answer it must get.

The tables: tests/unit/cli/test_usage_mistakes.py (command lines, no environment), tests/unit/airflow/
test_page_mistakes.py and tests/unit/topology/test_dag_file_mistakes.py (no services), tests/integration/cli/
test_mistakes.py and tests/integration/airflow/test_page_service_mistakes.py (real Redis and ZooKeeper). Each case
is checked the same way: the exit code (txdag.cli.exits) or HTTP status it must get, text that names the problem
and the fix, and no traceback anywhere in the answer.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Sequence
from typing import Any

# The page tests' JWT secret: the auth manager keeps its token signer and validator for the process, so every test
# that builds one (tests/unit/airflow/test_transactions_page.py's too) must give the same secret.
JWT_SECRET = "unit-test-secret-" + "x" * 48


def check_answer(got: int, text: str, expected: int, fragments: Sequence[str], *, what: str = "") -> None:
    """``got`` is ``expected``, ``text`` holds every fragment, and no traceback reached the user."""
    assert "Traceback" not in text, f"{what}: a traceback reached the user:\n{text}"
    assert got == expected, f"{what}: answered {got}, not {expected}:\n{text}"
    missing = [f for f in fragments if f not in text]
    assert not missing, f"{what}: {missing} not in the answer:\n{text}"


def page_token(auth_manager: Any, secret: str, username: str = "admin", role: str = "admin") -> str:
    """A JWT of the page's auth manager for ``username``, without the ``jti`` claim: Airflow checks a token's jti
    against its database of revoked tokens, which a unit test does not have; the signature (HMAC, as Airflow signs
    with a secret) is still checked."""
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    token = auth_manager.generate_jwt(SimpleAuthManagerUser(username=username, role=role))
    head, payload, _ = token.split(".")
    header = json.loads(_unpad(head))
    claims = json.loads(_unpad(payload))
    claims.pop("jti", None)
    signing = f"{head}.{_pad(json.dumps(claims).encode())}"
    digest = getattr(hashlib, "sha" + header["alg"][2:])  # HS512 -> sha512
    return f"{signing}.{_pad(hmac.new(secret.encode(), signing.encode(), digest).digest())}"


def _pad(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unpad(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def detail_of(response: Any) -> str:
    """A page answer's text: its JSON ``detail`` (which must be one string), else its body."""
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        return response.text
    assert detail is None or isinstance(detail, str), f"detail is not one sentence: {json.dumps(detail)}"
    return detail if detail is not None else response.text
