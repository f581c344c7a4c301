"""Regular expressions compiled and matched (re's cache refills each
round: the checker purges it before each snapshot)."""

import re

WORDS = "alpha beta gamma delta 2024-01-31 epsilon 10.0.0.1 zeta".split()


def run():
    date = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
    address = re.compile(r"^(\d+)\.(\d+)\.(\d+)\.(\d+)$")
    found = 0
    for word in WORDS * 10:
        if date.fullmatch(word) or address.match(word):
            found += 1
        found += len(re.findall(r"[aeiou]", word))
    return re.sub(r"\s+", " ", " ".join(WORDS)), found
