"""Object churn: instances of ordinary classes (with a __dict__).

Builds batches of small records and a linked structure, reads and updates
their attributes, adds an attribute after creation (which materialises the
instance dict), then lets the batch die.  Typical of ORM rows, AST nodes and
"data holder" classes.
"""
from _common import main


class Vec:
    def __init__(self, x, y):
        self.x = x
        self.y = y

    def dot(self, other):
        return self.x * other.x + self.y * other.y


class Item:
    def __init__(self, key, price, qty, parent=None):
        self.key = key
        self.price = price
        self.qty = qty
        self.parent = parent
        self.tags = []

    def total(self):
        return self.price * self.qty


def run(n):
    check = 0
    batch = 500
    for b in range(n):
        items = []
        parent = None
        for i in range(batch):
            it = Item(f"k{i}", (i % 97) + 0.5, i % 13, parent)
            it.tags.append(i & 7)
            if i % 50 == 0:
                parent = it
            if i % 3 == 0:
                it.note = "late"          # attribute added after __init__
            items.append(it)
        vecs = [Vec(i, b) for i in range(batch)]
        acc = 0
        for v, w in zip(vecs, reversed(vecs)):
            acc += v.dot(w)
        total = sum(it.total() for it in items)
        noted = sum(1 for it in items if "note" in it.__dict__)
        check = (check * 31 + int(total) + acc + noted) % 1000000007
    return check


if __name__ == "__main__":
    main("objects_dict", run, 670, __doc__)
