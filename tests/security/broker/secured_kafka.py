"""Apache Kafka with its security on: the same local KRaft broker as
`worker.adapters.local.kafka_server`, with the listeners a production cluster has, for
tests of the worker's TLS, SASL and ACLs (test code only: it lives under tests/, so the
package does not ship it).

`SecuredKafka` adds to `ApacheKafka`'s PLAINTEXT listener (which stays: the readiness
probes and the KRaft controller speak over it, as a broker's internal listener on a
private network; its principal, User:ANONYMOUS, is a super user):

- `SASL_SSL` (`sasl_port`): PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512. Each user of `users`
  gets all three: a PLAIN password in the listener's JAAS line, SCRAM credentials written
  into the storage by `kafka-storage format --add-scram` (the StorageTool's own option,
  so the users exist before the broker first serves);
- `MTLS` (`mtls_port`): TLS with `ssl.client.auth=required`; a client certificate's
  `CN=<name>` becomes the principal `User:<name>`, the same principal as SASL's;
- any number of `listeners` more (`port_of(name)`): SASL_SSL like the first, but each
  presenting its own certificate (one no trusted CA signed, one for another host name:
  a client's refusal of a broker is tested against a real one) and, when `mechanisms`
  names it, enabling only those SASL mechanisms;
- ACLs enforced: `StandardAuthorizer`, `allow.everyone.if.no.acl.found=false`, the
  `super_users` (and ANONYMOUS) allowed everything.

Certificates and keys are PEM files (unencrypted PKCS#8 keys), read by Kafka's PEM key
stores: nothing is converted to JKS, nothing is checked in. ACLs are managed over the
Kafka protocol by `kafka_acls` (aiokafka's CreateAcls / DeleteAcls), no JVM started.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worker.adapters.local.embedded import free_port
from worker.adapters.local.kafka_server import STORAGE_TOOL_MAIN, ApacheKafka

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
SASL_LISTENER = "SASL_SSL"
MTLS_LISTENER = "MTLS"
# A certificate's subject `CN=worker` (or `CN=worker,O=…`) is the principal User:worker.
PRINCIPAL_MAPPING = "RULE:^CN=([^,]+).*$/$1/,DEFAULT"


@dataclass(frozen=True)
class KeyPair:
    """A PEM certificate (chain) and its unencrypted PKCS#8 key."""

    cert: Path
    key: Path


def _quote(value: str) -> str:
    """A JAAS option value: double-quoted, with quotes and backslashes escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class SecuredKafka(ApacheKafka):
    """`ApacheKafka` with SASL_SSL, mutual TLS and ACLs (see the module docstring).

    `users`: name → password (each gets PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512);
    `server`: the broker's certificate, signed by `ca`, which also verifies client
    certificates on the MTLS listener; `listeners`: more SASL_SSL listeners, name → the
    certificate it presents; `mechanisms`: listener name → the only SASL mechanisms it
    enables (default: all of MECHANISMS)."""

    def __init__(
        self,
        *,
        ca: Path,
        server: KeyPair,
        users: Mapping[str, str],
        super_users: Sequence[str] = ("admin",),
        listeners: Mapping[str, KeyPair] | None = None,
        mechanisms: Mapping[str, Sequence[str]] | None = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.ca = Path(ca)
        self.server = server
        self.users = dict(users)
        self.super_users = tuple(super_users)
        self.listeners = dict(listeners or {})
        self.mechanisms = dict(mechanisms or {})
        reserved = {SASL_LISTENER, MTLS_LISTENER, "PLAINTEXT", "CONTROLLER"}
        if reserved & set(self.listeners) or any(not n.isalpha() for n in self.listeners):
            raise ValueError(f"listeners: names must be letters, and not {reserved}")
        self.sasl_port = free_port(self.host)
        self.mtls_port = free_port(self.host)
        self._ports = {name: free_port(self.host) for name in self.listeners}

    def port_of(self, listener: str) -> int:
        """The port of one of `listeners`."""
        return self._ports[listener]

    @property
    def sasl_bootstrap(self) -> str:
        return f"{self.host}:{self.sasl_port}"

    @property
    def mtls_bootstrap(self) -> str:
        return f"{self.host}:{self.mtls_port}"

    def _keystore(self, name: str, pair: KeyPair) -> Path:
        """Kafka's PEM key store is one file: the private key, then the chain."""
        path = self.workdir / f"{name.lower()}-keystore.pem"
        path.write_bytes(pair.key.read_bytes() + pair.cert.read_bytes())
        path.chmod(0o600)
        return path

    def _sasl_listener(self, name: str, pair: KeyPair) -> dict[str, str]:
        prefix = f"listener.name.{name.lower()}."
        plain_users = " ".join(f"user_{u}={_quote(p)}" for u, p in self.users.items())
        props = {
            prefix + "ssl.keystore.type": "PEM",
            prefix + "ssl.keystore.location": str(self._keystore(name, pair)),
            prefix + "plain.sasl.jaas.config": f"{PLAIN_MODULE} required {plain_users};",
        }
        for mechanism in SCRAM_MECHANISMS:
            props[f"{prefix}{mechanism.lower()}.sasl.jaas.config"] = f"{SCRAM_MODULE} required;"
        if name in self.mechanisms:
            props[prefix + "sasl.enabled.mechanisms"] = ",".join(self.mechanisms[name])
        return props

    def properties(self) -> dict[str, str]:
        props = super().properties()
        h = self.host
        ours = {SASL_LISTENER: self.sasl_port, MTLS_LISTENER: self.mtls_port, **self._ports}
        added = ",".join(f"{name}://{h}:{port}" for name, port in ours.items())
        props["listeners"] += "," + added
        props["advertised.listeners"] += "," + added
        protocols = {SASL_LISTENER: "SASL_SSL", MTLS_LISTENER: "SSL"}
        protocols |= dict.fromkeys(self._ports, "SASL_SSL")
        props["listener.security.protocol.map"] += "," + ",".join(
            f"{name}:{proto}" for name, proto in protocols.items()
        )
        supers = ["User:ANONYMOUS", *(f"User:{u}" for u in self.super_users)]
        props |= {
            "authorizer.class.name": AUTHORIZER,
            "allow.everyone.if.no.acl.found": "false",
            "super.users": ";".join(supers),
            "sasl.enabled.mechanisms": ",".join(MECHANISMS),
            "ssl.principal.mapping.rules": PRINCIPAL_MAPPING,
            **self._sasl_listener(SASL_LISTENER, self.server),
        }
        for name, pair in self.listeners.items():
            props |= self._sasl_listener(name, pair)
        mtls = f"listener.name.{MTLS_LISTENER.lower()}."
        props |= {
            mtls + "ssl.client.auth": "required",
            mtls + "ssl.keystore.type": "PEM",
            mtls + "ssl.keystore.location": str(self._keystore(MTLS_LISTENER, self.server)),
            mtls + "ssl.truststore.type": "PEM",
            mtls + "ssl.truststore.location": str(self.ca),
        }
        props.update(self.extra_config)
        return props

    def _java_argv(self, main: str, *args: str) -> list[str]:
        # The SCRAM users go into the storage when it is formatted (ApacheKafka.format
        # runs the StorageTool through here), so they exist from the first start.
        if main == STORAGE_TOOL_MAIN and args[:1] == ("format",):
            scram = [
                f"{mechanism}=[name={user},password={_quote(password)}]"
                for user, password in self.users.items()
                for mechanism in SCRAM_MECHANISMS
            ]
            args = (*args, *(a for s in scram for a in ("--add-scram", s)))
        return super()._java_argv(main, *args)
