"""A network link with delay and a bandwidth cap, for the remote tests (this kernel has no netem).

Each byte that enters one end leaves the other `--delay-ms` later (one way), and no faster than
`--rate` bytes per second, in order. Two forms:

  delay_relay.py --connect HOST:PORT [--pidfile F]   stdin/stdout <-> HOST:PORT: an ssh ProxyCommand
  delay_relay.py --listen PORT --connect HOST:PORT   a TCP relay (for `serve --port`); prints its port

Killing the relay cuts the link; with --refuse-if FILE, new relays refuse to start while FILE
exists, so the link stays down until the test removes it (the tests do both, to check that the
dashboard says so, keeps its view, and reconnects).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time


async def pump(read, write, delay: float, rate: float) -> None:
    """Copies chunks from `read` to `write`, each due `delay` after it came, paced at `rate`."""
    queue: asyncio.Queue = asyncio.Queue()
    free_at = 0.0  # when the link is free to carry the next byte

    async def sender() -> None:
        while True:
            due, chunk = await queue.get()
            if chunk is None:
                await write(None)
                return
            now = time.monotonic()
            if due > now:
                await asyncio.sleep(due - now)
            await write(chunk)

    task = asyncio.create_task(sender())
    while True:
        chunk = await read()
        now = time.monotonic()
        if not chunk:
            await queue.put((now + delay, None))
            break
        free_at = max(free_at, now) + len(chunk) / rate
        await queue.put((free_at + delay, chunk))
    await task


async def relay(reader_a, write_a, reader_b, write_b, delay: float, rate: float) -> None:
    await asyncio.gather(pump(reader_a, write_b, delay, rate), pump(reader_b, write_a, delay, rate))


def stream_ends(reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
    async def read():
        return await reader.read(65536)

    async def write(chunk):
        if chunk is None:
            if writer.can_write_eof():
                writer.write_eof()
            return
        writer.write(chunk)
        await writer.drain()

    return read, write


async def stdio_mode(host: str, port: int, delay: float, rate: float) -> None:
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.open_connection(host, port)
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin.buffer)
    out_fd = sys.stdout.fileno()

    async def read_in():
        return await stdin.read(65536)

    async def write_out(chunk):
        if chunk is None:
            os.close(out_fd)
            return
        view = memoryview(chunk)
        while view:
            n = os.write(out_fd, view)
            view = view[n:]

    sock_read, sock_write = stream_ends(reader, writer)
    await relay(read_in, write_out, sock_read, sock_write, delay, rate)


async def listen_mode(listen: int, host: str, port: int, delay: float, rate: float) -> None:
    async def handle(r, w):
        try:
            r2, w2 = await asyncio.open_connection(host, port)
        except OSError:
            w.close()
            return
        a_read, a_write = stream_ends(r, w)
        b_read, b_write = stream_ends(r2, w2)
        try:
            await relay(a_read, a_write, b_read, b_write, delay, rate)
        except (ConnectionError, OSError):
            pass
        w.close()
        w2.close()

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connect", required=True, help="HOST:PORT the relay connects to")
    ap.add_argument("--listen", type=int, help="listen on 127.0.0.1:PORT (0: any) instead of stdin/stdout")
    ap.add_argument("--delay-ms", type=float, default=25.0, help="one-way delay (default 25 ms)")
    ap.add_argument("--rate", type=float, default=10e6, help="bytes per second each way (default 10 MB/s)")
    ap.add_argument("--pidfile", help="append this process's pid here")
    ap.add_argument("--refuse-if", help="exit at once (the link is down) while this file exists")
    args = ap.parse_args()
    if args.refuse_if and os.path.exists(args.refuse_if):
        print("delay_relay: the link is down", file=sys.stderr)
        sys.exit(1)
    if args.pidfile:
        with open(args.pidfile, "a") as f:
            f.write(f"{os.getpid()}\n")
    host, _, port = args.connect.rpartition(":")
    delay = args.delay_ms / 1000.0
    try:
        if args.listen is not None:
            asyncio.run(listen_mode(args.listen, host, int(port), delay, args.rate))
        else:
            asyncio.run(stdio_mode(host, int(port), delay, args.rate))
    except (KeyboardInterrupt, ConnectionError, OSError):
        pass


if __name__ == "__main__":
    main()
