"""URLs as they may be logged."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

# Query options that are secrets too: a TLS key's passphrase (redis-py's `ssl_password`).
_SECRET_OPTION = re.compile(r"(?<=[?&])(ssl_password)=[^&,]*")


def redact_url(url: str) -> str:
    """The URL with its password replaced by `***`, fit for logs and reprs. A Redis
    Cluster seed list (`redis://u:pw@h1:p1,h2:p2` or several full URLs, comma-separated)
    is redacted item by item. A secret query option (`ssl_password`) is `***` too."""
    url = _SECRET_OPTION.sub(r"\1=***", url)
    if "," in url:
        return ",".join(redact_url(item) if "@" in item else item for item in url.split(","))
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port is not None else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))
