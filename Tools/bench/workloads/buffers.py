"""Large buffers: bytes and bytearray objects over 512 bytes.

These bypass pymalloc and go to the system allocator (as do the buffers of
real I/O, serialisation and network code): framing records into a
bytearray, slicing out payloads, joining chunks, repeating, translating,
and converting big ints to and from bytes.
"""
from _common import main

TABLE = bytes.maketrans(b"abcdef", b"ABCDEF")


def one_round(r):
    buf = bytearray()
    chunks = []
    for i in range(120):
        size = 600 + (i * 97 + r) % 3000
        payload = bytes([(i + r) & 0xFF]) * size
        buf += size.to_bytes(4, "little") + payload
        chunks.append(payload[: size // 2])
    total = 0
    pos = 0
    view = memoryview(buf)
    while pos < len(buf):
        size = int.from_bytes(view[pos:pos + 4], "little")
        rec = bytes(view[pos + 4:pos + 4 + size])
        total += rec[0] + len(rec)
        pos += 4 + size
    view.release()
    joined = b"".join(chunks)
    text = (b"abcdefgh" * 200).translate(TABLE)
    big = int.from_bytes(joined[:4096], "big")
    back = big.to_bytes(4096, "big")
    copy = bytearray(joined)
    copy[::2] = bytes(len(copy[::2]))
    return total + len(joined) + text.count(b"A") + len(back) + sum(copy[:2000])


def run(n):
    check = 0
    for r in range(n):
        check = (check * 131 + one_round(r)) % 1000000007
    return check


if __name__ == "__main__":
    main("buffers", run, 270, __doc__)
