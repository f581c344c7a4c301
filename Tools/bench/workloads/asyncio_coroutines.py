"""Coroutines under asyncio.

A producer/consumer pipeline over asyncio.Queue, many short tasks gathered
concurrently, async generators and ``async with`` locks: every round runs a
fresh event loop with asyncio.run().
"""
import asyncio

from _common import main


async def producer(queue, count, base):
    for i in range(count):
        await queue.put({"id": base + i, "payload": [i, i * 2, str(i)]})
    await queue.put(None)


async def consumer(queue, results, lock):
    total = 0
    while True:
        item = await queue.get()
        if item is None:
            break
        total += item["payload"][1]
        if item["id"] % 50 == 0:
            await asyncio.sleep(0)
    async with lock:
        results.append(total)


async def ticker(k):
    for i in range(k):
        yield i
        await asyncio.sleep(0)


async def small_task(i):
    await asyncio.sleep(0)
    acc = 0
    async for t in ticker(3):
        acc += t * i
    return acc


async def one_round(r):
    lock = asyncio.Lock()
    results = []
    queues = [asyncio.Queue(maxsize=64) for _ in range(4)]
    jobs = []
    for q_i, q in enumerate(queues):
        jobs.append(producer(q, 300, q_i * 10000 + r))
        jobs.append(consumer(q, results, lock))
    await asyncio.gather(*jobs)
    small = await asyncio.gather(*(small_task(i) for i in range(200)))
    return sum(results) + sum(small)


def run(n):
    check = 0
    for r in range(n):
        check = (check * 131 + asyncio.run(one_round(r))) % 1000000007
    return check


if __name__ == "__main__":
    main("asyncio_coroutines", run, 85, __doc__)
