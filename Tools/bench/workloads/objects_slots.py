"""Object churn: instances of classes with __slots__.

Same shape as objects_dict but every class declares __slots__, so an
instance is a single fixed-size allocation without a dict: a tree of nodes
is built, walked and thrown away, plus short-lived value objects.
"""
from _common import main


class Node:
    __slots__ = ("key", "left", "right", "size")

    def __init__(self, key):
        self.key = key
        self.left = None
        self.right = None
        self.size = 1


class Pair:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a = a
        self.b = b


def insert(root, key):
    # Iterative BST insert (keys are pseudo-random, so depth stays small).
    if root is None:
        return Node(key)
    node = root
    while True:
        node.size += 1
        if key < node.key:
            if node.left is None:
                node.left = Node(key)
                return root
            node = node.left
        else:
            if node.right is None:
                node.right = Node(key)
                return root
            node = node.right


def walk(root):
    out = []
    stack = []
    node = root
    while stack or node is not None:
        while node is not None:
            stack.append(node)
            node = node.left
        node = stack.pop()
        out.append(Pair(node.key, node.size))
        node = node.right
    return out


def run(n):
    check = 0
    x = 12345
    for b in range(n):
        root = None
        for i in range(400):
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
            root = insert(root, x >> 8)
        pairs = walk(root)
        check = (check + sum(p.b for p in pairs) + pairs[len(pairs) // 2].a) % 1000000007
    return check


if __name__ == "__main__":
    main("objects_slots", run, 890, __doc__)
