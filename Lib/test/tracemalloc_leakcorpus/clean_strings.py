"""Strings built with join, f-strings, concatenation and io.StringIO."""

import io


def run():
    parts = [f"{n:05d}:{n * n:x}" for n in range(300)]
    joined = ",".join(parts)
    buffer = io.StringIO()
    for part in parts:
        buffer.write(part.upper())
        buffer.write("\n")
    text = ""
    for n in range(100):
        text += str(n)
    return len(joined) + len(buffer.getvalue()) + len(text)
