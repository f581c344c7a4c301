"""String building and formatting.

f-strings, %-formatting, str.format, join, split, replace, case changes,
padding and encode/decode, producing a small report and a CSV-like table
from generated records.
"""
from _common import main

NAMES = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


def one_round(r):
    lines = []
    for i in range(300):
        name = NAMES[(i + r) % len(NAMES)]
        price = (i * 37 + r) % 1000 / 7
        lines.append(f"{i:05d},{name.upper()},{price:.3f},{name[::-1]}")
    csv = "\n".join(lines)
    total = 0.0
    out = []
    for row in csv.split("\n"):
        idx, name, price, rev = row.split(",")
        total += float(price)
        out.append("%-10s|%8s|%s" % (name.lower(), price, rev.title()))
        out.append("{0}:{1!r}:{2:>12}".format(idx, name, rev))
    text = "".join(s + "\n" for s in out)
    text = text.replace("|", " | ").replace("ALPHA", "Alpha")
    words = text.split()
    encoded = " ".join(words[:500]).encode("utf-8")
    decoded = encoded.decode("utf-8")
    return len(text) + len(words) + len(decoded) + int(total)


def run(n):
    check = 0
    for r in range(n):
        check = (check * 131 + one_round(r)) % 1000000007
    return check


if __name__ == "__main__":
    main("strings", run, 530, __doc__)
