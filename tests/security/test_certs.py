"""The test PKI is what it says: Python's ssl accepts the right pairs and refuses the wrong."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest

from tests.security.certs import Pair, make_pki


def _handshake(server: Pair, cafile: Path, host: str = "localhost") -> None:
    srv_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    srv_ctx.load_cert_chain(server.cert, server.key)
    cli_ctx = ssl.create_default_context(cafile=str(cafile))
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]

        def accept() -> None:
            conn, _ = listener.accept()
            try:
                with srv_ctx.wrap_socket(conn, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                pass

        t = threading.Thread(target=accept, daemon=True)
        t.start()
        try:
            with (
                socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
                cli_ctx.wrap_socket(raw, server_hostname=host),
            ):
                pass
        finally:
            t.join(5)


def test_the_right_pairs_handshake_and_the_wrong_ones_are_refused(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    _handshake(pki.server, pki.ca)
    with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer"):
        _handshake(pki.untrusted_server, pki.ca)
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        _handshake(pki.wrong_host_server, pki.ca)
    assert oct(pki.client.key.stat().st_mode & 0o777) == "0o600"
