"""Requests, each in a label of its own when asked.

A request-handling loop: each request parses a small JSON body, looks a
user up, builds a response dict and serialises it.  With the environment
variable BENCH_LABELS=1 (the labels configurations of allocations.py) and
an interpreter that has them, each request runs inside
``tracemalloc.label(endpoint=..., tenant=...)``: a label switch per
request, about 100 allocations under it.  Otherwise it runs the same code
without.
"""
import contextlib
import json
import os

from _common import main

ENDPOINTS = ("/users", "/orders", "/login", "/health")
TENANTS = ("acme", "globex", "initech")


def _label_factory():
    if os.environ.get("BENCH_LABELS") == "1":
        import tracemalloc
        if hasattr(tracemalloc, "label"):
            return tracemalloc.label
    return lambda **labels: contextlib.nullcontext()


USERS = {i: {"id": i, "name": f"user-{i}", "roles": ["r%d" % (i % 3)]}
         for i in range(100)}


def handle(endpoint, body):
    request = json.loads(body)
    user = USERS[request["user"] % 100]
    items = [{"sku": f"{endpoint}-{k}", "qty": k, "price": k * 1.5}
             for k in range(request["items"])]
    response = {"user": user["name"], "endpoint": endpoint, "items": items,
                "total": sum(item["price"] for item in items)}
    return json.dumps(response)


def run(n):
    label = _label_factory()
    check = 0
    for r in range(n):
        endpoint = ENDPOINTS[r % len(ENDPOINTS)]
        tenant = TENANTS[r % len(TENANTS)]
        body = json.dumps({"user": r, "items": r % 7})
        with label(endpoint=endpoint, tenant=tenant):
            out = handle(endpoint, body)
        check = (check * 131 + len(out)) % 1000000007
    return check


if __name__ == "__main__":
    main("requests_labelled", run, 20000, __doc__)
