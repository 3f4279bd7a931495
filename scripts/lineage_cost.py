"""Redis CPU per script call with and without the lineage read (`INFO replication`, see
`scripts.LINEAGE_LUA`), three rounds of 20,000 calls on a fresh redis-server.

    .venv/bin/python scripts/lineage_cost.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.redis_fixture import running

WITH = (
    "local i = redis.call('INFO', 'replication');"
    " local o = string.sub(string.match(i, 'master_replid:(%x+)'), 1, 8);"
    " redis.call('HINCRBY', KEYS[1], 'i', 1); return o"
)
WITHOUT = "redis.call('HINCRBY', KEYS[1], 'i', 1); return 'x'"


def cpu(c):
    i = c.info("cpu")
    return i["used_cpu_sys"] + i["used_cpu_user"]


with running() as r, r.client() as c:
    for rnd in range(3):
        for name, text in (("without", WITHOUT), ("with", WITH)):
            sha = c.script_load(text)
            before = cpu(c)
            p = c.pipeline(transaction=False)
            for n in range(20000):
                p.evalsha(sha, 1, "k")
                if n % 500 == 499:
                    p.execute()
            p.execute()
            print(
                rnd + 1,
                name,
                round((cpu(c) - before) / 20000 * 1e6, 2),
                "us Redis CPU per call",
                flush=True,
            )
