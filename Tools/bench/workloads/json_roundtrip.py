"""JSON round trips.

Builds a nested document (objects, arrays, strings with escapes, floats,
ints, booleans, nulls), then dumps and loads it repeatedly, compact and
indented, with sorted keys and with an object_hook.
"""
import json

from _common import main


def make_doc(seed, width):
    users = []
    for i in range(width):
        users.append({
            "id": seed * 1000 + i,
            "name": f"user-{i}",
            "email": f"user{i}@example.org",
            "score": (i * 7.25) % 101,
            "active": i % 3 != 0,
            "tags": ["t%d" % (i % 5), "quote\"s", "line\nbreak", "ünïcode"],
            "address": {"street": f"{i} Main St", "zip": f"{10000 + i}",
                        "geo": [i / 3.0, -i / 7.0]},
            "manager": None if i % 4 else i // 4,
        })
    return {"page": seed, "users": users, "meta": {"count": width, "ok": True}}


class Record(dict):
    pass


def run(n):
    check = 0
    for r in range(n):
        doc = make_doc(r, 60)
        s = json.dumps(doc)
        back = json.loads(s)
        s2 = json.dumps(back, indent=2, sort_keys=True)
        back2 = json.loads(s2, object_hook=Record)
        assert back2["meta"]["count"] == 60
        check = (check * 131 + len(s) + len(s2) + len(back2["users"])) % 1000000007
    return check


if __name__ == "__main__":
    main("json_roundtrip", run, 160, __doc__)
