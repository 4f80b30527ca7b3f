"""``cebroker serve`` as a real process: secrets absent from the database files (WAL included)
after create, replace and restart; a wrong key refused at start; ``cebroker secrets rotate``;
a non-loopback host without authentication refused; HTTPS; the audit log."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import ssl
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from support.tls import self_signed

from cebroker.sealing.keys import load_key_file
from security.processes import Served, run_cli

KEY = "cbk_serve-test-key"
SECRETS = {
    "plain": "plain-secret-6c1f09",
    "token": "access-token-77a0e2",
    "refresh": "refresh-token-3b9d41",
    "webhook": "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LTEyMzQ1Ng==",
    "webhook2": "whsec_" + "YW5vdGhlci1zZWNyZXQtYW5vdGhlci1zZWNyZXQtOTg3Ng==",
}


def keys_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys.json"
    digest = hashlib.sha256(KEY.encode()).hexdigest()
    path.write_text(
        json.dumps({"keys": [{"id": "ops", "sha256": digest, "tenant": "acme", "scopes": ["admin"]}]})
    )
    return path


@pytest.fixture
def served(tmp_path: Path) -> Iterator[list[Served]]:
    running: list[Served] = []
    yield running
    for broker in running:
        broker.stop()


def database_bytes(db: Path) -> bytes:
    """Every file of the database: the file itself, its WAL and shared memory."""
    return b"".join(
        p.read_bytes() for p in db.parent.glob(db.name + "*") if not p.name.endswith((".key", ".lock"))
    )


def present(db: Path, *values: str) -> list[str]:
    data = database_bytes(db)
    return [value for value in values if value.encode() in data]


def test_secrets_never_reach_the_database_files(tmp_path: Path, served: list[Served]) -> None:
    db = tmp_path / "data" / "broker.db"
    broker = Served(db, tmp_path / "broker.log", "--api-keys", str(keys_file(tmp_path)))
    served.append(broker)
    broker.start()
    auth = {"authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=broker.url, headers=auth, timeout=10) as http:
        plain = http.post(
            "/subscriptions",
            json={
                "protocol": "HTTP",
                "sink": "https://hooks.example/a",
                "sinkcredential": {"credentialtype": "PLAIN", "identifier": "u", "secret": SECRETS["plain"]},
                "protocolsettings": {"webhooksecret": SECRETS["webhook"]},
            },
        )
        assert plain.status_code == 201, plain.text
        refresh = http.post(
            "/subscriptions",
            json={
                "protocol": "HTTP",
                "sink": "https://hooks.example/b",
                "sinkcredential": {
                    "credentialtype": "REFRESHTOKEN",
                    "accesstoken": SECRETS["token"],
                    "accesstokenexpiresutc": "2030-01-01T00:00:00Z",
                    "accesstokentype": "bearer",
                    "refreshtoken": SECRETS["refresh"],
                    "refreshtokenendpoint": "https://id.example/token",
                },
            },
        )
        assert refresh.status_code == 201, refresh.text
        replaced = http.put(
            f"/subscriptions/{plain.json()['id']}",
            json={
                "protocol": "HTTP",
                "sink": "https://hooks.example/a2",
                "sinkcredential": {"credentialtype": "PLAIN", "identifier": "u", "secret": SECRETS["plain"]},
                "protocolsettings": {"webhooksecret": SECRETS["webhook2"]},
            },
        )
        assert replaced.status_code == 200, replaced.text
        for doc in (plain.json(), refresh.json(), replaced.json()):
            assert not [v for v in SECRETS.values() if v in json.dumps(doc)]
    assert present(db, *SECRETS.values()) == []
    assert b"sealed:v1:" in database_bytes(db)  # the secrets are there, sealed
    broker.stop()
    assert present(db, *SECRETS.values()) == []  # after the shutdown's checkpoint too
    key_file = db.with_name("broker.db.key")
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert f"created the key that encrypts stored secrets: {key_file}" in broker.log.read_text()
    broker.start()
    with httpx.Client(base_url=broker.url, headers=auth, timeout=10) as http:
        assert len(http.get("/subscriptions").json()) == 2
    broker.stop()
    assert present(db, *SECRETS.values()) == []
    log = broker.log.read_text()
    assert [v for v in SECRETS.values() if v in log] == []
    # The audit log: one line per management write, with principal, tenant and outcome.
    audit = [
        json.loads(line.split("cebroker.audit: ", 1)[1])
        for line in log.splitlines()
        if "cebroker.audit: " in line
    ]
    assert [(a["action"], a["outcome"], a["principal"], a["tenant"]) for a in audit] == [
        ("subscription.create", "ok", "key:ops", "acme"),
        ("subscription.create", "ok", "key:ops", "acme"),
        ("subscription.replace", "ok", "key:ops", "acme"),
    ]
    assert audit[0]["target"].endswith(f"/subscriptions/{plain.json()['id']}")

    # A wrong key file: refused at start, naming the key ids.
    wrong = tmp_path / "wrong.key"
    wrong.write_text("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n")
    refused = run_cli(
        "serve", "--db", str(db), "--secrets-key-file", str(wrong), "--api-keys", str(keys_file(tmp_path))
    )
    assert refused.returncode == 2
    assert "the stored secrets do not open" in refused.stderr
    assert "was sealed with the key" in refused.stderr
    assert "Traceback" not in refused.stderr

    # Rotation: a new key, every value sealed again, the old key gone from the file.
    before = load_key_file(key_file).ids
    rotated = run_cli("secrets", "rotate", "--db", str(db))
    assert rotated.returncode == 0, rotated.stderr
    after = load_key_file(key_file).ids
    assert len(after) == 1
    assert after[0] not in before
    assert f"sealed:v1:{after[0]}:".encode() in database_bytes(db)
    broker.start()
    with httpx.Client(base_url=broker.url, headers=auth, timeout=10) as http:
        assert len(http.get("/subscriptions").json()) == 2
    broker.stop()


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10"])
def test_a_public_host_without_authentication_is_refused(tmp_path: Path, host: str) -> None:
    result = run_cli("serve", "--host", host, "--db", str(tmp_path / "b.db"))
    assert result.returncode == 2
    assert f"--host {host} is not a loopback address and no authentication is configured" in result.stderr
    assert not (tmp_path / "b.db").exists()


def test_a_bad_api_keys_file_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "keys.json"
    bad.write_text(json.dumps({"keys": [{"id": "x", "sha256": "abc", "tenant": "t", "scopes": []}]}))
    result = run_cli("serve", "--api-keys", str(bad), "--db", str(tmp_path / "b.db"))
    assert result.returncode == 2
    assert "'sha256' must be 64 hexadecimal digits" in result.stderr


def test_https(tmp_path: Path, served: list[Served]) -> None:
    cert_file, key_file = self_signed(tmp_path)
    broker = Served(
        tmp_path / "tls.db",
        tmp_path / "tls.log",
        "--tls-cert",
        str(cert_file),
        "--tls-key",
        str(key_file),
        scheme="https",
    )
    served.append(broker)
    trust = ssl.create_default_context(cafile=str(cert_file))
    broker.start(verify=trust)
    with httpx.Client(base_url=broker.url, verify=trust, timeout=10) as http:
        assert http.get("/subscriptions").status_code == 200
    with pytest.raises(httpx.TransportError):
        httpx.get(broker.url.replace("https", "http") + "/readyz", timeout=5)


def test_sighup_rereads_the_api_keys(tmp_path: Path, served: list[Served]) -> None:
    """The file is rewritten in place with the same size, inode and modification time, so only
    the signal can make the broker read it again."""
    keys = keys_file(tmp_path)
    broker = Served(tmp_path / "hup.db", tmp_path / "hup.log", "--api-keys", str(keys))
    served.append(broker)
    broker.start()
    new_key = KEY[:-4] + "next"
    before = keys.stat()
    text = keys.read_text().replace(
        hashlib.sha256(KEY.encode()).hexdigest(), hashlib.sha256(new_key.encode()).hexdigest()
    )
    with keys.open("r+") as out:
        out.write(text)
    os.utime(keys, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (keys.stat().st_ino, keys.stat().st_size, keys.stat().st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )
    assert broker.proc is not None
    broker.proc.send_signal(signal.SIGHUP)

    def accepted() -> bool:
        return (
            httpx.get(
                f"{broker.url}/subscriptions", headers={"authorization": f"Bearer {new_key}"}
            ).status_code
            == 200
        )

    deadline = time.monotonic() + 15
    while not accepted():
        assert time.monotonic() < deadline, broker.log.read_text()
        time.sleep(0.05)
    assert (
        httpx.get(f"{broker.url}/subscriptions", headers={"authorization": f"Bearer {KEY}"}).status_code
        == 401
    )
    assert "API keys reloaded" in broker.log.read_text()


def test_secrets_init_creates_a_key_file_once(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "secrets.key"
    made = run_cli("secrets", "init", str(path))
    assert made.returncode == 0, made.stderr
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(load_key_file(path).keys) == 1
    first = path.read_bytes()
    again = run_cli("secrets", "init", str(path))
    assert again.returncode == 0, again.stderr
    assert "exists already" in again.stdout
    assert path.read_bytes() == first  # a key that may seal stored secrets is never replaced
