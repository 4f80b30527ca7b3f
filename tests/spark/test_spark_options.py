"""Option parsing of the ``cloudevents`` data source: defaults, credentials, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from cebroker.spark.options import SinkConfigError, SinkOptions


def test_defaults_and_case_insensitive_names() -> None:
    """Spark option names are case-insensitive; unset options take the documented defaults."""
    opts = SinkOptions.parse({"URL": "http://h:1/events", "batchsize": "250", "Source": "/s"})
    assert (opts.url, opts.batch_size, opts.default_source, opts.default_type) == (
        "http://h:1/events",
        250,
        "/s",
        None,
    )
    assert opts.retry.max_time == 120.0
    assert opts.authorization is None


def test_credentials() -> None:
    """Bearer token or basic credentials become the Authorization header."""
    assert SinkOptions.parse({"url": "http://h/e", "bearerToken": "t"}).authorization == "Bearer t"
    basic = SinkOptions.parse({"url": "http://h/e", "username": "u", "password": "p"}).authorization
    assert basic == "Basic dTpw"


def test_error_path_defaults_beside_the_checkpoint(tmp_path: Path) -> None:
    """Without errorPath, a streaming query keeps rejected rows under its checkpoint."""
    opts = SinkOptions.parse({"url": "http://h/e", "checkpointLocation": str(tmp_path)})
    assert opts.error_path == tmp_path / "errors"
    assert SinkOptions.parse({"url": "http://h/e", "checkpointLocation": "s3a://b/c"}).error_path is None


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({}, "url"),
        ({"url": "ftp://h/e"}, "url"),
        ({"url": "http://h/e", "batchSize": "0"}, "batchSize"),
        ({"url": "http://h/e", "batchSize": "many"}, "batchSize"),
        ({"url": "http://h/e", "requestTimeout": "-1"}, "requestTimeout"),
        ({"url": "http://h/e", "bearerToken": "t", "username": "u"}, "bearerToken"),
        ({"url": "http://h/e", "username": "u"}, "username"),
        ({"url": "http://h/e", "source": ""}, "source"),
        ({"url": "http://h/e", "errorPath": "hdfs://nn/errors"}, "errorPath"),
    ],
)
def test_bad_options_name_the_option(options: dict[str, str], option: str) -> None:
    """Every unusable option fails when the query starts, naming the option."""
    with pytest.raises(SinkConfigError) as info:
        SinkOptions.parse(options)
    assert info.value.option == option
