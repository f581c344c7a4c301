"""JSON round-trips of freshly built documents."""

import json


def run():
    document = {"users": [{"id": n, "name": "user%d" % n,
                           "tags": ["a", "b", str(n)], "score": n / 7}
                          for n in range(50)]}
    text = json.dumps(document, sort_keys=True)
    assert json.loads(text) == document
    return len(json.dumps(json.loads(text), indent=2))
