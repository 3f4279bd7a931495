"""`--redis` read: one Redis (left to redis-py), a cluster's seeds, a Sentinel set's master."""

from __future__ import annotations

import re

import pytest

from pushserver.config import ConfigError, parse
from pushserver.redis_urls import BadRedisUrl, RedisTarget, parse_redis_url, redacted


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6379/0",
        "rediss://user:pw@cache.example:6380/2",
        "unix:///run/redis.sock?db=1",
        "REDIS://h:1/0",
    ],
)
def test_one_redis_is_left_whole_to_redis_py(url: str) -> None:
    assert parse_redis_url(url) == RedisTarget(url, "single")


def test_cluster_seeds_in_order_with_default_port_ipv6_and_tls() -> None:
    url = "rediss+cluster://app:p%40ss@10.0.0.1:7000,[::1]:7001,node-3"
    assert parse_redis_url(url) == RedisTarget(
        url,
        "cluster",
        (("10.0.0.1", 7000), ("::1", 7001), ("node-3", 6379)),
        tls=True,
        username="app",
        password="p@ss",
    )
    plain = parse_redis_url("redis+cluster://127.0.0.1:7000/")
    assert (plain.kind, plain.hosts, plain.tls, plain.db) == (
        "cluster",
        (("127.0.0.1", 7000),),
        False,
        0,
    )
    assert parse_redis_url("redis+cluster://h:1/0").hosts == (("h", 1),)


def test_sentinel_hosts_master_and_database() -> None:
    url = "redis+sentinel://:secret@s1:26380,s2,s3:26381/mymaster/3"
    assert parse_redis_url(url) == RedisTarget(
        url,
        "sentinel",
        (("s1", 26380), ("s2", 26379), ("s3", 26381)),
        master="mymaster",
        db=3,
        password="secret",
    )
    assert parse_redis_url("redis+sentinel://s:1/m").db == 0


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("localhost:6379", "a redis://, rediss://, unix://, redis+cluster://"),
        ("http://h:1", "redis+sentinel://"),
        ("redis://h:99999/0", "a port of 0..65535"),
        ("redis+cluster://", "HOST:PORT pairs"),
        ("redis+cluster://a:1,,b:2", "HOST:PORT pairs"),
        ("redis+cluster://a:1;b:2", "HOST:PORT pairs"),
        ("redis+cluster://a:0", "a PORT of 1..65535"),
        ("redis+cluster://a:65536", "a PORT of 1..65535"),
        ("redis+cluster://a:1/2", "database 0 only"),
        ("redis+cluster://a:1?timeout=3", "no ?query"),
        ("redis+sentinel://a:1", "MASTER"),
        ("redis+sentinel://a:1/", "MASTER"),
        ("redis+sentinel://a:1/my master", "MASTER"),
        ("redis+sentinel://a:1/m/x", "DB: a database number"),
        ("redis+sentinel://a:1/m/0/extra", "DB: a database number"),
        ("redis+sentinel://[zz]:1/m", "HOST:PORT pairs"),
    ],
)
def test_a_bad_url_says_what_is_wrong(url: str, words: str) -> None:
    with pytest.raises(BadRedisUrl, match=re.escape(words)):
        parse_redis_url(url)


def test_the_setting_error_names_the_form_and_hides_the_password() -> None:
    with pytest.raises(ConfigError) as caught:
        parse(["--redis", "redis+sentinel://u:hunter2@s1:1,s2:2"])
    message = str(caught.value)
    assert message.startswith("--redis must be redis+sentinel://HOST:PORT[,HOST:PORT...]/MASTER")
    assert "hunter2" not in message and "u:***@s1:1,s2:2" in message
    settings = parse(["--redis", "redis+cluster://127.0.0.1:7000,127.0.0.1:7001"])
    assert settings.redis_target.hosts == (("127.0.0.1", 7000), ("127.0.0.1", 7001))


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:pw@h:1/0", "redis://:***@h:1/0"),
        ("redis://user:pw@h:1/0", "redis://user:***@h:1/0"),
        ("redis://user@h:1/0", "redis://user@h:1/0"),
        ("unix:///s.sock?db=0&password=pw", "unix:///s.sock?db=0&password=***"),
        ("redis+cluster://u:p@a:1,b:2", "redis+cluster://u:***@a:1,b:2"),
        ("redis://h:1/0", "redis://h:1/0"),
    ],
)
def test_redacted_hides_only_the_password(url: str, shown: str) -> None:
    assert redacted(url) == shown
