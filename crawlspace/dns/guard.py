"""Refuse addresses a public-web crawler has no business connecting to (SSRF defence).

Checked after resolution, on the very address the connection will use (the fetcher's connector
asks the guard and then connects to what it checked: no second lookup, so a DNS answer that
changes between check and connect, "DNS rebinding", cannot slip past). Redirect targets are not
followed inline; they come back through the frontier and are checked like any other URL.

Addresses that carry an IPv4 address inside IPv6 (IPv4-mapped ::ffff:a.b.c.d, IPv4-compatible
::a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16, Teredo) are judged by the IPv4 address as well,
since that is where the packets may end up. Anything not globally routable is refused: loopback,
private, link-local, multicast, unspecified, reserved, shared (CGNAT), documentation ranges.

Refusals are counted per host and reported in stats.json (a crawl that is refused everywhere
should say why).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
REPORTED_HOSTS = 100
DECISION_CACHE_SIZE = 1 << 16


class GuardRefused(Exception):
    """The address is not a public unicast address and is not on the allow-list."""

    def __init__(self, host: str, address: str, reason: str) -> None:
        super().__init__(f"{host} resolves to {address} ({reason}): refused")
        self.host = host
        self.address = address
        self.reason = reason


@dataclass(slots=True)
class Refusal:
    address: str
    reason: str
    count: int = 0


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]  # the client's (obfuscated-port) address
    if ip in _NAT64 or (ip in _IPV4_COMPATIBLE and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _classify(ip: IPAddress) -> str | None:
    for reason, flag in (
        ("loopback", ip.is_loopback),
        ("unspecified", ip.is_unspecified),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("reserved", ip.is_reserved),
        ("private", ip.is_private),
    ):
        if flag:
            return reason
    if not ip.is_global:
        return "not globally routable"
    return None


class AddressGuard:
    def __init__(self, allow_private: bool = False, allow_networks: Iterable[str] = ()) -> None:
        self.allow_private = allow_private
        try:
            self.allow_networks: list[IPNetwork] = [ipaddress.ip_network(net, strict=False) for net in allow_networks]
        except ValueError as exc:
            raise ValueError(f"allow_networks: {exc}") from None
        self.refusals: dict[str, Refusal] = {}  # host -> first refused address, reason and count
        self.refused = 0
        self._decisions: dict[str, str | None] = {}  # address -> refusal reason: ipaddress is slow

    def _allowed(self, ip: IPAddress) -> bool:
        return any(ip.version == net.version and ip in net for net in self.allow_networks)

    def refusal_reason(self, address: str) -> str | None:
        """Why `address` is refused, or None when it may be contacted. Pure: counts nothing."""
        try:
            ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return "not an IP address"
        if self.allow_private or self._allowed(ip):
            return None
        reason = _classify(ip)
        if not isinstance(ip, ipaddress.IPv6Address):
            return reason
        inner = _embedded_ipv4(ip)
        if inner is None:
            return reason
        # The packets end up at the IPv4 address: that is what must be public.
        if self._allowed(inner):
            return None
        inner_reason = _classify(inner)
        if inner_reason is not None:
            return f"{inner_reason} (IPv4 {inner} inside IPv6)"
        translated = ip.ipv4_mapped is not None or ip in _NAT64  # the IPv6 form is only a carrier
        return None if translated else reason

    def check(self, host: str, address: str) -> None:
        """Raise GuardRefused (and count it against `host`) unless `address` may be contacted."""
        try:
            reason = self._decisions[address]
        except KeyError:
            if len(self._decisions) >= DECISION_CACHE_SIZE:
                self._decisions.clear()
            reason = self._decisions[address] = self.refusal_reason(address)
        if reason is None:
            return
        self.refused += 1
        refusal = self.refusals.get(host)
        if refusal is None:
            refusal = self.refusals[host] = Refusal(address, reason)
        refusal.count += 1
        raise GuardRefused(host, address, reason)

    def stats(self) -> dict[str, Any]:
        """The "guard" section of stats.json: refusals in total and per host (most refused first)."""
        worst = sorted(self.refusals.items(), key=lambda item: -item[1].count)[:REPORTED_HOSTS]
        return {
            "refused": self.refused,
            "refused_hosts": len(self.refusals),
            "hosts": {host: {"address": r.address, "reason": r.reason, "count": r.count} for host, r in worst},
        }

    def __repr__(self) -> str:
        allowed = "all" if self.allow_private else [str(net) for net in self.allow_networks]
        return f"<AddressGuard allowed={allowed} refused={self.refused} hosts={len(self.refusals)}>"
