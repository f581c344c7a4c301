"""Regular expressions: compile and match.

Each round empties the ``re`` cache and compiles a set of realistic patterns
(the compiler is written in Python and allocation heavy), then matches,
searches, splits, substitutes and iterates over generated log lines.
"""
import re

from _common import main

PATTERNS = [
    r"(?P<ip>\d{1,3}(?:\.\d{1,3}){3}) - - \[(?P<ts>[^\]]+)\] \"(?P<verb>[A-Z]+) (?P<path>\S+)",
    r"[\w.+-]+@[\w-]+\.[\w.-]+",
    r"\b(?:error|warn(?:ing)?|fatal)\b",
    r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})",
    r"^\s*(#|//).*$",
    r"(?i)user-(\d+)",
    r"\s+",
    r"key=(\w+);value=([^;]*)",
]


def make_text(r):
    lines = []
    for i in range(200):
        lines.append(
            f'10.0.{i % 256}.{(i * 7 + r) % 256} - - [2024-03-{1 + i % 28:02d} 12:{i % 60:02d}] '
            f'"GET /api/v1/items/{i}?user=User-{i} HTTP/1.1" 200 '
            f'key=k{i};value={"warn" if i % 9 == 0 else "ok"}; mail u{i}@example.org')
    return "\n".join(lines)


def run(n):
    check = 0
    for r in range(n):
        re.purge()
        compiled = [re.compile(p, re.M) for p in PATTERNS]
        text = make_text(r)
        count = 0
        for line in text.splitlines():
            m = compiled[0].match(line)
            if m:
                count += len(m.group("path"))
        count += len(compiled[1].findall(text))
        count += sum(1 for _ in compiled[2].finditer(text))
        count += len(compiled[3].sub(r"\3/\2/\1", text))
        count += len(compiled[5].findall(text))
        count += len(compiled[6].split(text))
        count += sum(len(v) for _, v in compiled[7].findall(text))
        check = (check * 131 + count) % 1000000007
    return check


if __name__ == "__main__":
    main("regex", run, 92, __doc__)
