"""The composed app answers health checks and maps unknown routes to problem+json (RFC 9457)."""

from pathlib import Path

from starlette.testclient import TestClient

from cebroker.api.ops import OpsComponent
from cebroker.app import create_app
from cebroker.settings import Settings


def test_health_and_unknown_route(tmp_path: Path) -> None:
    app = create_app(Settings(db=tmp_path / "b.db"))
    with TestClient(app) as client:
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/readyz").status_code == 200
        r = client.get("/no-such-thing")
        assert r.status_code == 404
        assert r.headers["content-type"] == "application/problem+json"
        assert r.json()["status"] == 404


def test_readiness_turns_503_once_told_to_stop(tmp_path: Path) -> None:
    """What ``cebroker serve`` does on SIGTERM before it stops accepting (cli.stopping_server)."""
    app = create_app(Settings(db=tmp_path / "b.db"))
    (ops,) = [part for part in app.state.components if isinstance(part, OpsComponent)]
    with TestClient(app) as client:
        assert client.get("/readyz").status_code == 200
        ops.stop_soon()
        stopping = client.get("/readyz")
        assert stopping.status_code == 503
        assert stopping.json() == {"status": "stopping"}
        assert client.get("/healthz").status_code == 200  # alive while it finishes
