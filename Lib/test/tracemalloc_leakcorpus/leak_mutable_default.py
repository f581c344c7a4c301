"""A mutable default argument used as an accumulator."""


def log(message, _lines=[]):
    _lines.append(message.upper() * 10)  # LEAK
    return len(_lines)


def run():
    log("request handled")


def reset():
    log.__defaults__[0].clear()
