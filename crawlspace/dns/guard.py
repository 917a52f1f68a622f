"""Refuse addresses a public-web crawler has no business connecting to (SSRF defence).

Checked after resolution, on the address the connection will use. IPv4-mapped IPv6 addresses
are judged by the IPv4 address they carry.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class GuardRefused(Exception):
    """The address is not a public unicast address and is not on the allow-list."""

    def __init__(self, host: str, address: str, reason: str) -> None:
        super().__init__(f"{host} resolves to {address} ({reason}): refused")
        self.host = host
        self.address = address
        self.reason = reason


class AddressGuard:
    def __init__(self, allow_private: bool = False, allow_networks: Iterable[str] = ()) -> None:
        self.allow_private = allow_private
        self.allow_networks: list[IPNetwork] = [ipaddress.ip_network(net, strict=False) for net in allow_networks]

    def refusal_reason(self, address: str) -> str | None:
        """Why `address` is refused, or None when it may be contacted."""
        ip: IPAddress = ipaddress.ip_address(address)
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if self.allow_private or any(ip in net for net in self.allow_networks):
            return None
        for reason, flag in (
            ("loopback", ip.is_loopback),
            ("unspecified", ip.is_unspecified),
            ("link-local", ip.is_link_local),
            ("multicast", ip.is_multicast),
            ("private", ip.is_private),
            ("reserved", ip.is_reserved),
        ):
            if flag:
                return reason
        if not ip.is_global:
            return "not globally routable"
        return None

    def check(self, host: str, address: str) -> None:
        reason = self.refusal_reason(address)
        if reason is not None:
            raise GuardRefused(host, address, reason)
