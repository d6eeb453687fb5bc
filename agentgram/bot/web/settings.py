"""The web view's config section, ``web``.

The token is checked with the section (a field validator on ``token``, which
runs even when it is left out), so the error names ``web.token`` as every
other config error names its key: enabled without a token is refused, and so
is any listen address that is not loopback without one (``enabled: false``
with a public address is refused too, so turning it on later cannot expose it).
``public_url`` is where the web view's root is: pages link from ``/``, so a
path prefix (a reverse proxy serving it under ``/agentgram/``) is refused
rather than producing links that miss.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, ValidationInfo, field_validator

from agentgram.runtime.infra.config import HttpUrl, Section

DEFAULT_LISTEN = "127.0.0.1:8765"


def split_listen(value: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:8765`` for IPv6) as uvicorn takes it."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536 or not host:
        raise ValueError(f"{value!r} is not host:port (e.g. {DEFAULT_LISTEN})")
    return host.removeprefix("[").removesuffix("]"), int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


class WebSettings(Section):
    enabled: bool = False
    """``true``: served in the bot's own process, started and stopped with it."""
    listen: str = DEFAULT_LISTEN
    """``host:port`` the web view binds; anything but loopback needs ``token``."""
    public_url: HttpUrl | None = None
    """Where the owner opens the web view (``/trace`` links to it); ``None``: no links."""
    token: SecretStr | None = Field(default=None, validate_default=True)
    """The bearer token every page and API call needs (also accepted once as ``?token=``)."""

    @field_validator("listen")
    @classmethod
    def _host_and_port(cls, value: str) -> str:
        split_listen(value)
        return value

    @field_validator("public_url")
    @classmethod
    def _root_only(cls, value: str | None) -> str | None:
        if value is not None and urlsplit(value).path not in ("", "/"):
            raise ValueError(
                f"{value!r} has a path; the web view is served at the root (e.g. https://agent.example.org)"
            )
        return value

    @field_validator("token")
    @classmethod
    def _token_when_needed(cls, value: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        """``enabled`` and ``listen`` are declared first, so they are in ``info.data`` by now."""
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("use at least 16 characters (e.g. `openssl rand -hex 24`)")
        if value is not None:
            return value
        if info.data.get("enabled"):
            raise ValueError("is required when web.enabled is true (e.g. `openssl rand -hex 24`)")
        listen = info.data.get("listen")
        if listen is not None and not is_loopback(split_listen(listen)[0]):
            raise ValueError(f"is required to listen on {listen}, which is not a loopback address")
        return value

    @property
    def host(self) -> str:
        return split_listen(self.listen)[0]

    @property
    def port(self) -> int:
        return split_listen(self.listen)[1]
