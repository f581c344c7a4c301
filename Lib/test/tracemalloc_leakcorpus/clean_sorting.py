"""Sorting records with key functions: itemgetter, lambda, a method."""

import operator


def run():
    records = [("name%03d" % (n * 37 % 200), n % 13, -n) for n in range(200)]
    by_name = sorted(records, key=operator.itemgetter(0))
    by_score = sorted(records, key=lambda record: (record[1], record[2]))
    names = sorted((record[0] for record in records), key=str.lower)
    return by_name[0], by_score[-1], names[:3]
