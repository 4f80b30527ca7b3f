"""The composed app answers health checks and maps unknown routes to problem+json (RFC 9457)."""

from pathlib import Path

from starlette.testclient import TestClient

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
