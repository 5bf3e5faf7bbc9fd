"""Certificates made in the test: a CA, server and client certificates, and the wrong ones.

Nothing is checked in. `make_pki(dir)` writes PEM files (keys in unencrypted PKCS#8, which
both Python's ssl and Kafka's PEM key stores read) and returns their paths:

- `ca`: the trusted CA; `server` (CN localhost, SAN localhost + 127.0.0.1) and `client`
  (CN `worker`, for mutual TLS) are signed by it;
- `other_ca` and `untrusted_server`: a second CA and a server certificate it signed (a
  broker whose certificate the worker must refuse);
- `wrong_host_server`: signed by `ca`, but for the name `elsewhere.invalid` only (a
  hostname mismatch).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pair:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    ca: Path
    server: Pair
    client: Pair
    other_ca: Path
    untrusted_server: Pair
    wrong_host_server: Pair


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _builder(
    subject: str, issuer: x509.Name, public: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=2))
    )


def _ca(cn: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    cert = (
        _builder(cn, _name(cn), key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    return cert, key


def _leaf(
    cn: str,
    names: list[str],
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    usage: ExtendedKeyUsageOID,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    alt: list[x509.GeneralName] = []
    for n in names:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            alt.append(x509.DNSName(n))
    builder = _builder(cn, ca[0].subject, key.public_key()).add_extension(
        x509.ExtendedKeyUsage([usage]), critical=False
    )
    if alt:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    return builder.sign(ca[1], hashes.SHA256()), key


def _write_cert(path: Path, *certs: x509.Certificate) -> Path:
    path.write_bytes(b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs))
    return path


def _write_pair(
    out: Path, stem: str, pair: tuple[x509.Certificate, ec.EllipticCurvePrivateKey]
) -> Pair:
    cert = _write_cert(out / f"{stem}.crt", pair[0])
    key = out / f"{stem}.key"
    key.write_bytes(
        pair[1].private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key.chmod(0o600)
    return Pair(cert, key)


def make_pki(out: Path) -> Pki:
    out.mkdir(parents=True, exist_ok=True)
    ca = _ca("derender test CA")
    other = _ca("some other CA")
    server_names = ["localhost", "127.0.0.1"]
    return Pki(
        ca=_write_cert(out / "ca.crt", ca[0]),
        server=_write_pair(
            out, "server", _leaf("localhost", server_names, ca, ExtendedKeyUsageOID.SERVER_AUTH)
        ),
        client=_write_pair(out, "client", _leaf("worker", [], ca, ExtendedKeyUsageOID.CLIENT_AUTH)),
        other_ca=_write_cert(out / "other-ca.crt", other[0]),
        untrusted_server=_write_pair(
            out,
            "untrusted-server",
            _leaf("localhost", server_names, other, ExtendedKeyUsageOID.SERVER_AUTH),
        ),
        wrong_host_server=_write_pair(
            out,
            "wrong-host-server",
            _leaf("elsewhere.invalid", ["elsewhere.invalid"], ca, ExtendedKeyUsageOID.SERVER_AUTH),
        ),
    )
