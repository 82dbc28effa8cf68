"""Our OpenAI client's own cost per streamed chunk, against an instant local SSE server.

The server (a separate process, so it holds no GIL of ours) answers every completions
request at once with the whole stream (``max_tokens`` chunks shaped like vLLM's, a
usage chunk and ``[DONE]``). With the bytes already there, a whole request's client
time divided by its chunks bounds what the client spends per chunk (reading, splitting
lines, stamping, parsing the JSON, appending; plus the request's fixed cost spread
thin). A bare aiohttp loop that reads and splits lines of the same stream without
parsing is the floor it is compared with.

    .venv/bin/python benchmarks/openai_client_overhead.py [--chunks 2000] [--repeats 15] [--concurrency 1,16,64,256]

Then, at each ``--concurrency``, that many streams at once from a paced server (one event per write,
``--itl-ms`` apart, as a decoding server sends them): the client's CPU time (user + system, the
whole process: loop, HTTP client, parsing, the driver's bookkeeping) per token event, and how late
its event loop ran. Target (issue 24): <= 15 us of client CPU per token event.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from engine.backends.base import Request
from engine.backends.openai.backend import OpenAIBackend
from engine.measure.records import RequestRecord


def _sse_body(n: int) -> bytes:
    parts = []
    for i in range(n):
        chunk = {
            "id": "cmpl-x",
            "object": "text_completion",
            "created": 0,
            "model": "instant",
            "choices": [{"index": 0, "text": f" tok{i}", "logprobs": None, "finish_reason": None, "stop_reason": None}],
        }
        parts.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    usage = {
        "id": "cmpl-x",
        "object": "text_completion",
        "created": 0,
        "model": "instant",
        "choices": [],
        "usage": {"prompt_tokens": 4, "completion_tokens": n, "total_tokens": n + 4},
    }
    parts.append(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
    return b"".join(parts)


def _serve(port_q: mp.Queue) -> None:  # type: ignore[type-arg]
    bodies: dict[int, bytes] = {}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await serve_connection(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            body = json.loads(await reader.readexactly(length)) if length else {}
            n = int(body.get("max_tokens", 16))
            if n not in bodies:
                bodies[n] = _sse_body(n)
            payload = bodies[n]
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                + f"Content-Length: {len(payload)}\r\n\r\n".encode()
            )
            model = str(body.get("model"))
            if model.startswith("paced"):  # one event per write, 1 ms (paced:MS) apart, like a decoding server
                gap = float(model.partition(":")[2] or 1) / 1000
                for event in payload.split(b"\n\n")[:-1]:
                    writer.write(event + b"\n\n")
                    await writer.drain()
                    await asyncio.sleep(gap)
            else:
                writer.write(payload)
            await writer.drain()
            if reader.at_eof():
                break

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port_q.put(server.sockets[0].getsockname()[1])
        async with server:
            await server.serve_forever()

    try:
        asyncio.run(main())
    except (asyncio.IncompleteReadError, KeyboardInterrupt):
        pass


_SESSION: list = []


async def _bare(url: str, n: int, model: str = "instant") -> list[int]:
    """The floor: aiohttp reads split into lines, one stamp per data line, no parsing."""
    import aiohttp

    if not _SESSION:
        _SESSION.append(aiohttp.ClientSession())
    s = _SESSION[0]
    if True:
        body = {"model": model, "prompt": [1, 2, 3], "max_tokens": n, "stream": True}
        async with s.post(url + "/completions", json=body) as resp:
            stamps = []
            pending = b""
            async for data in resp.content.iter_any():
                t = time.perf_counter_ns()
                lines = (pending + data).split(b"\n")
                pending = lines.pop()
                stamps.extend(t for line in lines if line.startswith(b"data:"))
            return stamps


def _at_concurrency(url: str, c: int, itl_ms: float, events: int) -> tuple[int, float, float, float]:
    """``c`` paced streams through the load driver: client CPU per token event (us), loop lag p99 (ms), wall (s)."""
    import resource

    from engine.run.driver import drive_phase
    from engine.run.plan import planned
    from engine.spec import Workload

    client = OpenAIBackend()
    client.configure(url, f"paced:{itl_ms:g}", "completions", None)
    try:
        drive_phase(client, planned([[1, 2, 3]] * min(c, 8), 4), Workload(requests=min(c, 8), arrival="max"))  # connect
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        result = drive_phase(client, planned([[1, 2, 3]] * c, events), Workload(requests=c, arrival="max"))
        r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    finally:
        client.unload()
    tokens = sum(r.output_tokens for r in result.records)
    assert tokens == c * events, (tokens, [r.error for r in result.records if r.error][:3])
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    lags = sorted(result.client[0].loop_lag_ns) or [0]
    return c, cpu / tokens * 1e6, lags[int(0.99 * (len(lags) - 1))] / 1e6, t1 - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--concurrency", default="1,16,64,256", help="streams at once for the CPU per token event")
    ap.add_argument("--itl-ms", type=float, default=10.0, help="the paced server's gap between events")
    ap.add_argument("--events", type=int, default=100, help="token events per stream at each concurrency")
    args = ap.parse_args()

    q: mp.Queue = mp.Queue()  # type: ignore[type-arg]
    server = mp.Process(target=_serve, args=(q,), daemon=True)
    server.start()
    try:
        url = f"http://127.0.0.1:{q.get(timeout=30)}/v1"
        client = OpenAIBackend()
        client.configure(url, "instant", "completions", None)
        request = Request(prompt=[1, 2, 3], max_new_tokens=args.chunks)
        ours, floor = [], []
        for i in range(args.repeats + 2):  # two warm-ups
            rec = RequestRecord(index=0, arrival_ns=0, send_ns=0, prompt_tokens=3)
            t0 = time.perf_counter_ns()
            client.run(client.stream([request], [rec]))
            t_ours = time.perf_counter_ns() - t0
            assert rec.output_tokens == args.chunks, rec.output_tokens
            t0 = time.perf_counter_ns()
            bare = client.run(_bare(url, args.chunks))
            t_bare = time.perf_counter_ns() - t0
            assert len(bare) == args.chunks + 2
            if i >= 2:
                ours.append(t_ours / args.chunks / 1000)
                floor.append(t_bare / args.chunks / 1000)
        # Paced: one chunk per read, as from a real server; client CPU time per chunk.
        paced = OpenAIBackend()
        paced.configure(url, "paced", "completions", None)
        n_paced = min(args.chunks, 300)
        cpu_ours, cpu_floor = [], []
        for i in range(max(3, args.repeats // 3) + 1):
            rec = RequestRecord(index=0, arrival_ns=0, send_ns=0, prompt_tokens=3)
            c0 = time.process_time_ns()
            paced.run(paced.stream([Request(prompt=[1, 2, 3], max_new_tokens=n_paced)], [rec]))
            c1 = time.process_time_ns()
            stamps = client.run(_bare(url, n_paced, "paced"))
            c2 = time.process_time_ns()
            assert rec.output_tokens == n_paced and len(stamps) == n_paced + 2
            if i >= 1:
                cpu_ours.append((c1 - c0) / n_paced / 1000)
                cpu_floor.append((c2 - c1) / n_paced / 1000)
        at_scale = [_at_concurrency(url, int(c), args.itl_ms, args.events) for c in args.concurrency.split(",")]
        client.run(_SESSION[0].close())
        paced.unload()
        client.unload()
    finally:
        server.terminate()
        server.join(5)
    o, f = statistics.median(ours), statistics.median(floor)
    print(f"chunks per request: {args.chunks}, repeats: {args.repeats}, load average: {os.getloadavg()[0]:.2f}")
    print(f"our client (read + split + stamp + parse + record), per chunk: median {o:.2f} us  (min {min(ours):.2f})")
    print(f"bare aiohttp read + split loop, per chunk:                    median {f:.2f} us  (min {min(floor):.2f})")
    print(f"our cost above the floor:                                     {o - f:.2f} us")
    co, cf = statistics.median(cpu_ours), statistics.median(cpu_floor)
    print(
        f"paced (one chunk per read, 1 ms apart, {n_paced} chunks): client CPU per chunk: ours median {co:.2f} us, "
        f"bare floor {cf:.2f} us, ours above the floor {co - cf:.2f} us"
    )
    for c, per_event, lag_p99, wall in at_scale:
        print(
            f"concurrency {c:>5} ({args.events} events each, {args.itl_ms:g} ms apart): client CPU per token event "
            f"{per_event:.2f} us -> target <= 15 us {'met' if per_event <= 15 else 'NOT met'}; "
            f"event-loop lag p99 {lag_p99:.2f} ms; {wall:.2f} s"
        )
    own = max(o, co - cf)
    print(
        f"our own overhead per chunk (instant total; paced above the aiohttp floor, which vLLM's bench serve "
        f"pays too): {own:.2f} us -> target <= 20 us {'met' if own <= 20 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
