"""`txdag warm`'s --url is a Spark Connect URL, checked before anything is loaded or connected."""

from __future__ import annotations

import argparse

import pytest

from txdag.cli.main import build_parser
from txdag.cli.warm import connect_url_arg


@pytest.mark.parametrize("url", ["sc://127.0.0.1:15002", "sc://spark-connect:15002/;token=s3cret"])
def test_a_spark_connect_url_is_taken_as_given(url: str) -> None:
    assert connect_url_arg(url) == url
    assert build_parser().parse_args(["warm", "t", "--url", url]).url == url


@pytest.mark.parametrize("url, why", [("localhost:15002", "give sc://HOST:PORT"), ("sc://h:abc", "Port could not"),
                                      ("sc://h:99999", "out of range"), ("sc://:15002", "give sc://HOST:PORT"),
                                      ("sc://h", "give sc://HOST:PORT"), ("http://h:15002", "give sc://HOST:PORT")])
def test_anything_else_is_refused_by_name(url: str, why: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=why) as refused:
        connect_url_arg(url)
    assert repr(url) in str(refused.value)
