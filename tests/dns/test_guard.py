"""The SSRF guard: every class of non-public address refused in IPv4, IPv6 and IPv6 forms that carry
IPv4; allow-lists that open exactly what they name; refusals counted per host."""

from __future__ import annotations

import pytest

from crawlspace.dns import AddressGuard, GuardRefused

REFUSED = {
    "127.0.0.1": "loopback",
    "127.255.0.9": "loopback",
    "10.1.2.3": "private",
    "172.16.0.1": "private",
    "192.168.1.1": "private",
    "169.254.169.254": "link-local",  # cloud metadata service
    "224.0.0.1": "multicast",
    "0.0.0.0": "unspecified",
    "240.0.0.1": "reserved",
    "100.64.0.1": "not globally routable",  # shared address space (CGNAT)
    "192.0.2.1": "private",  # documentation
    "::1": "loopback",
    "::": "unspecified",
    "fe80::1": "link-local",
    "fe80::1%eth0": "link-local",
    "fc00::1": "private",
    "ff02::1": "multicast",
    "::ffff:127.0.0.1": "loopback",  # IPv4-mapped
    "::ffff:10.0.0.1": "private",
    "::ffff:169.254.169.254": "link-local",
    "::127.0.0.1": "loopback",  # IPv4-compatible (deprecated)
    "64:ff9b::a00:1": "private",  # NAT64 of 10.0.0.1
    "2002:7f00:1::1": "loopback",  # 6to4 of 127.0.0.1
    "2002:c0a8:101::1": "private",  # 6to4 of 192.168.1.1
}
PUBLIC = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2001:4860:4860::8888", "::ffff:8.8.8.8", "64:ff9b::808:808"]


@pytest.mark.parametrize(("address", "kind"), sorted(REFUSED.items()))
def test_non_public_addresses_are_refused(address: str, kind: str) -> None:
    reason = AddressGuard().refusal_reason(address)
    assert reason is not None and reason.startswith(kind), reason


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_pass(address: str) -> None:
    assert AddressGuard().refusal_reason(address) is None


def test_not_an_address_is_refused() -> None:
    assert AddressGuard().refusal_reason("example.com") == "not an IP address"


def test_allow_private_opens_everything() -> None:
    guard = AddressGuard(allow_private=True)
    assert all(guard.refusal_reason(address) is None for address in REFUSED)


def test_allow_list_opens_exactly_its_networks() -> None:
    guard = AddressGuard(allow_networks=["127.0.0.0/8", "10.1.0.0/16", "fd00::/8"])
    for address in ("127.0.0.1", "127.1.2.3", "10.1.255.255", "fd12::1", "::ffff:127.0.0.1", "2002:7f00:1::1"):
        assert guard.refusal_reason(address) is None, address
    for address in ("10.2.0.1", "192.168.0.1", "::1", "169.254.169.254", "::ffff:10.2.0.1", "fc00::1"):
        assert guard.refusal_reason(address) is not None, address


def test_bad_allow_list_entry_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="allow_networks"):
        AddressGuard(allow_networks=["10.0.0.0/33"])


def test_refusals_are_counted_and_reported_per_host() -> None:
    guard = AddressGuard()
    for _ in range(3):
        with pytest.raises(GuardRefused, match=r"metadata.test resolves to 169.254.169.254 \(link-local\)"):
            guard.check("metadata.test", "169.254.169.254")
    with pytest.raises(GuardRefused):
        guard.check("intranet.test", "10.0.0.5")
    guard.check("public.test", "8.8.8.8")
    stats = guard.stats()
    assert stats["refused"] == 4 and stats["refused_hosts"] == 2
    assert list(stats["hosts"]) == ["metadata.test", "intranet.test"]  # most refused first
    assert stats["hosts"]["metadata.test"] == {"address": "169.254.169.254", "reason": "link-local", "count": 3}
