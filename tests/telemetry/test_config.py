"""Telemetry configuration: the broker's settings first, then the standard ``OTEL_*`` variables,
then the defaults; off unless an endpoint is configured; a bad value stops ``serve`` naming it,
and OTLP headers (often an API key) are never repeated."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from ceprotocols.tracecontext import TraceContext, mqtt_user_properties
from prometheus_client import CollectorRegistry

from cebroker.settings import Settings
from cebroker.telemetry import TelemetryConfig, TelemetryConfigError, build_telemetry
from cebroker.telemetry.config import DEFAULT_SERVICE_NAME
from cebroker.telemetry.tracing import parse_stored, sink_host


def test_off_by_default() -> None:
    config = TelemetryConfig.resolve(Settings(), {})
    assert not config.enabled
    assert config.traces_endpoint is None
    assert config.metrics_endpoint is None
    telemetry = build_telemetry(config, CollectorRegistry())
    assert not telemetry.tracing.enabled
    assert telemetry.tracing.provider is None


def test_the_standard_variables_configure_it() -> None:
    environ = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/",
        "OTEL_EXPORTER_OTLP_HEADERS": "api-key=s%3Dcret,x-team=a",
        "OTEL_SERVICE_NAME": "edge-broker",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=prod,service.namespace=events",
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0.25",
    }
    config = TelemetryConfig.resolve(Settings(), environ)
    assert config.traces_endpoint == "http://collector:4318/v1/traces"
    assert config.metrics_endpoint == "http://collector:4318/v1/metrics"
    assert dict(config.headers or {}) == {"api-key": "s=cret", "x-team": "a"}
    assert config.service_name == "edge-broker"
    assert dict(config.resource_attributes or {}) == {
        "deployment.environment": "prod",
        "service.namespace": "events",
    }
    assert (config.sampler, config.sampler_ratio) == ("parentbased_traceidratio", 0.25)
    assert "s=cret" not in repr(config)


def test_settings_win_over_the_variables_and_signals_can_be_turned_off() -> None:
    settings = Settings(
        otel_exporter_otlp_endpoint="http://mine:4318",
        otel_service_name="mine",
        otel_traces_sampler="always_off",
        otel_traces_sampler_arg=0.5,
    )
    environ = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://theirs:4318",
        "OTEL_SERVICE_NAME": "theirs",
        "OTEL_TRACES_SAMPLER": "always_on",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": "http://metrics:9090/otlp/v1/metrics",
    }
    config = TelemetryConfig.resolve(settings, environ)
    assert config.traces_endpoint == "http://mine:4318/v1/traces"
    assert config.metrics_endpoint == "http://metrics:9090/otlp/v1/metrics"  # a signal's own, as given
    assert (config.service_name, config.sampler, config.sampler_ratio) == ("mine", "always_off", 0.5)
    off = TelemetryConfig.resolve(settings, {"OTEL_METRICS_EXPORTER": "none"})
    assert (off.traces_endpoint is not None, off.metrics_endpoint) == (True, None)
    assert not TelemetryConfig.resolve(settings, {"OTEL_SDK_DISABLED": "true"}).enabled
    assert TelemetryConfig.resolve(Settings(), {"OTEL_SERVICE_NAME": "x"}).service_name == "x"
    assert TelemetryConfig.resolve(Settings(), {}).service_name == DEFAULT_SERVICE_NAME


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://u:pw@collector/v1/traces"}, "credentials"),
        ({"OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER"),
        ({"OTEL_TRACES_SAMPLER_ARG": "2"}, "OTEL_TRACES_SAMPLER_ARG"),
        ({"OTEL_RESOURCE_ATTRIBUTES": "novalue"}, "OTEL_RESOURCE_ATTRIBUTES"),
        ({"OTEL_EXPORTER_OTLP_HEADERS": "api-key=hunter2,bad"}, "OTEL_EXPORTER_OTLP_HEADERS"),
    ],
)
def test_a_bad_variable_is_refused_naming_it(environ: dict[str, str], named: str) -> None:
    with pytest.raises(TelemetryConfigError, match=named) as refused:
        TelemetryConfig.resolve(Settings(), environ)
    assert "hunter2" not in str(refused.value)


def test_serve_refuses_a_bad_variable_with_exit_status_2(tmp_path: Path) -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "cebroker", "serve", "--db", str(tmp_path / "b.db"), "--port", "0"],
        env={
            "PATH": "/usr/bin:/bin",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318",
            "OTEL_TRACES_SAMPLER": "x",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 2
    assert "OTEL_TRACES_SAMPLER" in ran.stderr
    assert "Traceback" not in ran.stderr


def test_a_bad_headers_flag_does_not_repeat_the_secret(tmp_path: Path) -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "cebroker", "serve", "--otel-exporter-otlp-headers", "api-key=hunter2,oops"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert ran.returncode == 2
    assert "--otel-exporter-otlp-headers" in ran.stderr
    assert "hunter2" not in ran.stderr


def test_trace_context_helpers() -> None:
    trace = TraceContext("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "a=1")
    assert trace.pairs() == (("traceparent", trace.traceparent), ("tracestate", "a=1"))
    # MQTT 5 binary mode: an event's own traceparent user property is kept, nothing added.
    own = (("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),)
    assert mqtt_user_properties(trace, own) == own
    assert mqtt_user_properties(trace, (("id", "1"),)) == (("id", "1"), *trace.pairs())
    assert mqtt_user_properties(None, (("id", "1"),)) == (("id", "1"),)
    # The stored form reads back; a broken one is no context; a sink's user info is never kept.
    assert parse_stored(f"{trace.traceparent};a=1;b") is not None
    assert parse_stored("00-broken") is None
    assert parse_stored(None) is None
    assert sink_host("mqtts://user:secret@broker.example:8883/topic") == ("broker.example", 8883)
