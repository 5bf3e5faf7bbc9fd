"""`serve` terminating TLS itself: the `derender-worker serve` command with certificates
made in the test (tests/security/certs.py), over real HTTPS: the server's certificate is
verified by the client, the API key (from a mounted file) still guards /v1, plain HTTP on
the port gets no answer, and with `--ssl-cert-reqs required` only a client holding a
certificate of the CA gets in."""

from __future__ import annotations

import http.client
import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.harness import ROOT
from tests.security.certs import Pki, make_pki
from worker.cli import main

API_KEY = "serve-key-5b21e0"
START_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("serve-pki"))


class Serve:
    def __init__(self, *flags: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "worker", "serve", "--host", "127.0.0.1", "--port", "0", *flags],
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.line = self.proc.stdout.readline().strip()
        self.port = int(self.line.rsplit(":", 1)[1]) if self.line else 0

    def stop(self) -> str:
        self.proc.terminate()
        _, err = self.proc.communicate(timeout=20)
        assert self.proc.returncode == 0, err
        return err


def _get(port: int, path: str, context: ssl.SSLContext, key: str | None = None) -> int:
    conn = http.client.HTTPSConnection("localhost", port, context=context, timeout=10)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {key}"} if key else {})
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.fixture(scope="module")
def https(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    key_file = tmp_path_factory.mktemp("secret") / "api-key"
    key_file.write_text(API_KEY + "\n")  # as `echo` writes it: the newline is dropped
    server = Serve(
        "--ssl-certfile", str(pki.server.cert), "--ssl-keyfile", str(pki.server.key),
        env={"DERENDER_API_KEY_FILE": str(key_file)},
    )  # fmt: skip
    try:
        assert server.line == f"DERENDER_SERVE_URL=https://127.0.0.1:{server.port}"
        yield server
    finally:
        err = server.stop()
        assert API_KEY not in err
        assert "serving on https://127.0.0.1:" in err


def test_https_with_the_api_key(https: Serve, pki: Pki) -> None:
    trusting = ssl.create_default_context(cafile=str(pki.ca))
    assert _get(https.port, "/health", trusting) == 200
    assert _get(https.port, "/v1/models", trusting) == 401
    assert _get(https.port, "/v1/models", trusting, "wrong-key") == 401
    assert _get(https.port, "/v1/models", trusting, API_KEY) == 200


def test_a_client_that_does_not_trust_the_ca_refuses(https: Serve, pki: Pki) -> None:
    other = ssl.create_default_context(cafile=str(pki.other_ca))
    with pytest.raises(ssl.SSLCertVerificationError):
        _get(https.port, "/health", other)


def test_plain_http_gets_no_answer(https: Serve) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", https.port, timeout=10)
    try:
        conn.request("GET", "/health")
        with pytest.raises((http.client.RemoteDisconnected, ConnectionResetError)):
            conn.getresponse()
    finally:
        conn.close()


def test_mutual_tls(pki: Pki) -> None:
    server = Serve(
        "--ssl-certfile", str(pki.server.cert), "--ssl-keyfile", str(pki.server.key),
        "--ssl-ca-certs", str(pki.ca), "--ssl-cert-reqs", "required",
    )  # fmt: skip
    try:
        anonymous = ssl.create_default_context(cafile=str(pki.ca))
        with pytest.raises((ssl.SSLError, ConnectionResetError)):
            _get(server.port, "/health", anonymous)
        holder = ssl.create_default_context(cafile=str(pki.ca))
        holder.load_cert_chain(str(pki.client.cert), str(pki.client.key))
        assert _get(server.port, "/health", holder) == 200
    finally:
        server.stop()


def test_tls_flags_that_cannot_work_exit_2(
    pki: Pki, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = {
        ("--ssl-cert-reqs", "required", "--ssl-certfile", str(pki.server.cert)): (
            "derender-worker serve: --ssl-cert-reqs required needs --ssl-ca-certs"
        ),
        ("--ssl-keyfile", str(pki.server.key)): (
            "derender-worker serve: --ssl-keyfile, --ssl-ca-certs and --ssl-cert-reqs need "
            "--ssl-certfile"
        ),
        ("--ssl-certfile", str(tmp_path / "none.crt")): (
            f"derender-worker serve: --ssl-certfile: cannot read {tmp_path / 'none.crt'}"
        ),
        ("--ssl-certfile", str(pki.server.cert), "--ssl-cert-reqs", "maybe"): (
            "derender-worker serve: --ssl-cert-reqs: expected none, optional or required, "
            "got 'maybe'"
        ),
    }
    for flags, message in cases.items():
        assert main(["serve", "--port", "0", *flags]) == 2
        assert capsys.readouterr().err.strip() == message
