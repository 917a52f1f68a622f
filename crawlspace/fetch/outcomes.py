"""The outcome taxonomy of a download attempt (Najork & Heydon's outcome table, seed 002)."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    OK = "2xx"
    REDIRECT = "3xx"
    CLIENT_ERROR = "4xx"
    SERVER_ERROR = "5xx"
    OTHER_STATUS = "other-status"
    DNS_ERROR = "dns-error"
    CONNECTION_REFUSED = "connection-refused"
    CONNECTION_RESET = "connection-reset"
    TLS_ERROR = "tls-error"
    TIMEOUT = "timeout"
    TOO_LARGE = "too-large"
    BAD_RESPONSE = "bad-response"
    ROBOTS_EXCLUDED = "robots-excluded"
    GUARD_REFUSED = "guard-refused"
    NETWORK_ERROR = "network-error"

    @classmethod
    def for_status(cls, status: int) -> Outcome:
        if 200 <= status < 300:
            return cls.OK
        if 300 <= status < 400:
            return cls.REDIRECT
        if 400 <= status < 500:
            return cls.CLIENT_ERROR
        if 500 <= status < 600:
            return cls.SERVER_ERROR
        return cls.OTHER_STATUS

    @property
    def is_transient(self) -> bool:
        """Worth another attempt later: the server or the path may recover."""
        return self in (Outcome.TIMEOUT, Outcome.CONNECTION_RESET, Outcome.CONNECTION_REFUSED, Outcome.NETWORK_ERROR)
