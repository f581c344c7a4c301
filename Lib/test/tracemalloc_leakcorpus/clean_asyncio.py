"""An asyncio event loop run to completion, with tasks, a queue and sleeps."""

import asyncio


async def produce(queue, count):
    for n in range(count):
        await queue.put(n)
        await asyncio.sleep(0)
    await queue.put(None)


async def consume(queue):
    total = 0
    while (item := await queue.get()) is not None:
        total += item
    return total


async def main():
    queue = asyncio.Queue(maxsize=4)
    results = await asyncio.gather(produce(queue, 50), consume(queue))
    return results[1]


def run():
    return asyncio.run(main())
