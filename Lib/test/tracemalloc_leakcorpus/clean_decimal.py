"""Decimal arithmetic in a local context."""

import decimal


def run():
    with decimal.localcontext() as context:
        context.prec = 40
        total = decimal.Decimal(0)
        for n in range(1, 200):
            total += decimal.Decimal(1) / decimal.Decimal(n)
        return str(total.sqrt().quantize(decimal.Decimal("1e-20")))
