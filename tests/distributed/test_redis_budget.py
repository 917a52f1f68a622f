"""The cluster's page budget in Redis: never more claims than the limit over every node, blocks given back,
a resume that does not count its pages twice, and a lost server that bounds what a node takes."""

from __future__ import annotations

import threading

from crawlspace.distributed.redisbudget import BLOCK, RedisBudget
from crawlspace.distributed.redislink import Keys
from tests.distributed.redis_server import RedisServer

KEYS = Keys("budget-test")


def test_nodes_claiming_at_once_never_take_more_than_the_limit(redis_server: RedisServer) -> None:
    budgets = [RedisBudget(redis_server.url, KEYS, node, 3, 100) for node in range(3)]
    granted = [0, 0, 0]

    def claim_all(node: int) -> None:
        while budgets[node].claim():
            granted[node] += 1

    threads = [threading.Thread(target=claim_all, args=(node,)) for node in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(granted) == 100
    assert all(budget.exhausted() for budget in budgets)
    for budget in budgets:
        budget.close()


def test_a_block_not_used_goes_back_to_the_others(redis_server: RedisServer) -> None:
    first, second = (RedisBudget(redis_server.url, KEYS, node, 2, 1000) for node in range(2))
    assert first.claim()  # takes a block, uses one page of it
    assert first._reserve == BLOCK - 1
    first.close()  # gives the rest back
    taken = 0
    while second.claim():
        taken += 1
    assert taken == 999
    second.close()


def test_a_resumed_node_raises_its_count_to_its_checkpoint_and_never_adds_it_twice(redis_server: RedisServer) -> None:
    budget = RedisBudget(redis_server.url, KEYS, 0, 2, 50)
    for _ in range(20):
        assert budget.claim()
    budget.close()
    resumed = RedisBudget(redis_server.url, KEYS, 0, 2, 50)
    resumed.set_used(20)  # what its checkpoint counted: already in Redis
    assert resumed.used == 20
    lost = RedisBudget(redis_server.url, Keys("budget-test-lost"), 0, 2, 50)
    lost.set_used(20)  # a Redis that lost the crawl's keys: the pages still count
    assert lost.used == 20
    for budget in (resumed, lost):
        taken = 0
        while budget.claim():
            taken += 1
        assert taken == 30
        budget.close()


def test_without_redis_a_node_takes_at_most_its_share_of_what_was_left(redis_server: RedisServer) -> None:
    budget = RedisBudget(redis_server.url, KEYS, 0, 4, 100)
    assert budget.claim()
    while budget._reserve:  # the block it holds
        assert budget.claim()
    left = 100 - budget.used
    redis_server.kill()
    taken = 0
    while budget.claim():
        taken += 1
    assert taken == left // 4  # its share of what was left, no more
    redis_server.start()
    budget._retry_at = 0.0
    budget.close()  # the pages it owed are counted in Redis
    after = RedisBudget(redis_server.url, KEYS, 1, 4, 100)
    after.set_used(0)
    assert after.used == budget.used
    after.close()
