"""Generator: determinism, shape (heavy tails, sizes), configuration, speed."""

from __future__ import annotations

import dataclasses
import statistics

import numpy as np
import pytest

from crawlspace.simweb import SimWeb, SimWebConfig, SimWebConfigError
from tests.simweb.conftest import TEST_CONFIG


def test_same_seed_same_web(web: SimWeb) -> None:
    again = SimWeb.generate(TEST_CONFIG)
    assert again.fingerprint() == web.fingerprint()
    sample = list(web.all_urls())[::97]
    assert [again.body(url) for url in sample] == [web.body(url) for url in sample]
    assert again.seeds(5) == web.seeds(5)


def test_other_seed_other_web(web: SimWeb) -> None:
    other = SimWeb.generate(TEST_CONFIG.replace(seed=8))
    assert other.fingerprint() != web.fingerprint()
    assert other.body(other.seeds(1)[0]) != web.body(web.seeds(1)[0])


def test_hosts_are_reserved_names_with_own_addresses(web: SimWeb) -> None:
    assert all(name.endswith(".test") for name in web.hosts)
    assert any(name.startswith("www.") for name in web.hosts)
    assert web.hosts[42] in ("site0042.test", "www.site0042.test")
    lines = web.hosts_file_text(octet=77).splitlines()
    assert len(lines) == len(web.hosts)
    addresses = [line.split()[0] for line in lines]
    assert all(address.startswith("127.77.") for address in addresses)
    shared = [address for address in set(addresses) if addresses.count(address) > 1]
    assert len(shared) == 1 and addresses.count(shared[0]) == TEST_CONFIG.shared_ip_hosts
    assert all(not address.endswith((".0", ".255")) for address in addresses)


def test_pages_per_host_and_in_degree_are_heavy_tailed(web: SimWeb) -> None:
    data = web.data
    sizes = np.diff(data.host_start)
    assert sizes.min() >= 1
    assert sizes.max() >= 8 * np.median(sizes)
    assert abs(sizes.mean() - TEST_CONFIG.mean_pages_per_host) < 0.3 * TEST_CONFIG.mean_pages_per_host
    targets = data.link_dst[data.link_dst >= 0]
    in_degree = np.bincount(targets, minlength=data.nodes)
    assert in_degree.max() >= 30 * max(1.0, float(np.median(in_degree)))
    # the most linked-to pages are host roots of popular hosts
    top = np.argsort(in_degree)[::-1][:5]
    assert any(web.url_of(int(node)).endswith(".test/") for node in top)


def test_cross_host_links_mostly_intra(web: SimWeb) -> None:
    data = web.data
    sources = np.repeat(np.arange(data.pages), np.diff(data.link_start))
    keep = data.link_dst >= 0
    source_host = data.page_host[sources[keep]]
    target_host = np.array([data.host_of_node(int(node)) for node in data.link_dst[keep]])
    intra = float((source_host == target_host).mean())
    assert 0.6 < intra < 0.95


def test_page_sizes_are_realistic(web: SimWeb) -> None:
    pages = [web.url_of(node) for node in range(0, web.data.pages, 23)]
    sizes = [len(web.body(url)) for url in pages]
    assert min(sizes) >= 5_000
    assert max(sizes) <= 75_000
    assert 17_000 <= statistics.mean(sizes) <= 30_000


def test_every_page_is_reachable_from_its_root(web: SimWeb) -> None:
    data = web.data
    for host in range(0, len(web.hosts), 10):
        start, end = int(data.host_start[host]), int(data.host_start[host + 1])
        reached = {start}
        frontier = [start]
        while frontier:
            node = frontier.pop()
            for link in web.links(web.url_of(node)):
                target = web.node_of(link.target) if link.target else None
                if target is not None and start <= target < end and target not in reached:
                    reached.add(target)
                    frontier.append(target)
        assert reached == set(range(start, end))


def test_urls_carry_a_non_default_port(web_8080: SimWeb) -> None:
    urls = list(web_8080.all_urls())
    assert all(":8080/" in url for url in urls)
    assert web_8080.seeds(1)[0].endswith(".test:8080/")


@pytest.mark.parametrize(
    "change",
    [{"hosts": 0}, {"intra_host_link_fraction": 1.5}, {"page_bytes": (100, 50)}, {"port": 0}, {"latency": -1.0}],
)
def test_bad_config_values_are_errors(change: dict[str, object]) -> None:
    with pytest.raises(SimWebConfigError):
        SimWebConfig(**change)  # type: ignore[arg-type]


def test_config_round_trips_and_rejects_unknown_keys() -> None:
    assert SimWebConfig.from_dict(TEST_CONFIG.to_dict()) == TEST_CONFIG
    with pytest.raises(SimWebConfigError, match="hostz"):
        SimWebConfig.from_dict({"hostz": 3})


def test_ten_thousand_hosts_are_held_as_arrays_and_rendered_on_request() -> None:
    """How fast this goes is bench/simweb/bench_generate.py's to measure; here, that the big web keeps
    no page bodies: its arrays stay a small fraction of the text it serves, and a page far into it is
    rendered on request, the same each time, near its drawn size."""
    big = SimWeb.generate(SimWebConfig(hosts=10_000, seed=1))
    assert 150_000 <= big.data.pages <= 250_000
    arrays = [getattr(big.data, field.name) for field in dataclasses.fields(big.data)]
    stored = sum(array.nbytes for array in arrays if isinstance(array, np.ndarray))
    served = int(big.data.page_bytes.sum())
    assert stored < served / 20, (stored, served)
    host = big.host_index(big.hosts[9_999])
    response = big.response(host, "/")
    assert response.status == 200 and response.body == big.response(host, "/").body
    page = int(big.data.host_start[host])
    assert 0.5 * big.data.page_bytes[page] <= len(response.body) <= 2 * big.data.page_bytes[page] + 4096
