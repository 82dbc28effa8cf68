"""A dataset or trace of gigabytes is streamed, never read whole: reading and checking every
record of a generated file of tens of MB allocates (tracemalloc's peak) a few MiB, a small
fraction of the file, whatever its size."""

from __future__ import annotations

import json
import random
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.data.conversations import read_conversations
from engine.data.traces import read_trace

SIZE = 20 << 20  # bytes of each generated file
PEAK_SHARE = 0.15  # of the file's size, at most (measured: 0.5 to 1.8 MiB, whatever the size)


def _fill(path: Path, block: Callable[[int], str], head: str = "", tail: str = "") -> None:
    """Write ``head``, then blocks of rows (``block(i)``, about 1 MiB each) until SIZE bytes, then ``tail``."""
    with path.open("w", encoding="utf-8") as file:
        file.write(head)
        written, i = 0, 0
        while written < SIZE:
            text = block(i)
            file.write(text)
            written, i = written + len(text.encode()), i + 1
        file.write(tail)


def _peak(read: Callable[[], int]) -> tuple[int, int]:
    tracemalloc.start()
    try:
        return read(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _assert_small(peak: int, path: Path) -> None:
    size = path.stat().st_size
    assert size >= SIZE
    assert peak < PEAK_SHARE * size, f"peak {peak / 2**20:.1f} MiB for a {size / 2**20:.0f} MiB file"


def test_a_large_sharegpt_array_on_one_line_is_read_in_bounded_memory(tmp_path):
    """The hardest shape: the whole array on one line, no line ending to stop at."""
    rng = random.Random(0)
    words = " ".join(rng.choice(["cache", "token", "prefill", "décodage", "批处理"]) for _ in range(150))
    turns = [{"from": "human", "value": f"Question: {words}"}, {"from": "gpt", "value": words}]
    record = json.dumps({"id": "c0", "conversations": turns}, ensure_ascii=False)
    per_block = 1000
    path = tmp_path / "sharegpt.json"
    _fill(path, lambda i: ("," if i else "") + ",".join([record] * per_block), head="[", tail="]")
    count, peak = _peak(lambda: sum(1 for _ in read_conversations(str(path), "sharegpt")))
    assert count % per_block == 0 and count * len(record.encode()) > SIZE
    _assert_small(peak, path)


def test_a_large_mooncake_trace_is_checked_row_by_row_in_bounded_memory(tmp_path):
    rows = 1000
    row = {"input_length": 100_000, "output_length": 9, "hash_ids": list(range(100_000, 100_196))}  # 196 blocks
    path = tmp_path / "trace.jsonl"
    _fill(path, lambda i: "".join(json.dumps({"timestamp": i, **row}) + "\n" for _ in range(rows)))
    blocks = sum(1 for _ in path.open()) // rows
    # a window at the trace's end: every row is read and checked, ten are kept
    count, peak = _peak(lambda: len(read_trace(path, "mooncake", start_s=(blocks - 1) / 1000, max_rows=10).rows))
    assert count == 10
    _assert_small(peak, path)


@pytest.mark.slow  # ~420k short rows; under tracemalloc they take ~8 s of CPU
def test_a_large_burstgpt_trace_is_checked_row_by_row_in_bounded_memory(tmp_path):
    rows = 20000
    head = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    # the last row of a block is due a second after the rest of it, so the window keeps one row
    body = "".join(
        f"{{{n // (rows - 1)}}},ChatGPT,{n % 900 + 1},{n % 7 + 1},{n % 900 + n % 7 + 2},API log\n" for n in range(rows)
    )
    path = tmp_path / "BurstGPT.csv"
    _fill(path, lambda i: body.format(2 * i, 2 * i + 1), head=head)
    blocks = (sum(1 for _ in path.open()) - 1) // rows
    last_s = 2 * blocks - 1
    trace = None

    def read() -> int:
        nonlocal trace
        trace = read_trace(path, "burstgpt", start_s=last_s, duration_s=1)
        return len(trace.rows)

    count, peak = _peak(read)
    assert count == 1 and trace.rows[0].at_s == 0.0 and trace.skipped == {}
    _assert_small(peak, path)
