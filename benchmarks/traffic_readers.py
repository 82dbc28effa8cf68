"""Throughput and memory of the traffic readers on ~1 GB generated files of every format.

    .venv/bin/python benchmarks/traffic_readers.py [--size-mb 1024] [--formats sharegpt,azure] [--dir DIR]

For each format a file of about ``--size-mb`` MB is generated in the published shape
(ShareGPT as an indented JSON array, OpenAI chat as JSON lines, a text column as CSV, a
Mooncake JSONL trace with shared hash_ids, an Azure LLM inference CSV, a BurstGPT CSV with
failure rows), then read in a fresh child process: every conversation is iterated, every
trace row is read and checked (``read_trace`` with a window over the trace's last 2 s, so
few rows are kept and the figure is the reader's, not the kept rows'). The child reports
rows, wall and CPU seconds and its peak resident memory (``ru_maxrss``) against its baseline
after imports; rows/s and MB/s are per CPU second, which a busy machine does not skew. A last line gives the memory of trace rows kept in a list (``read_trace`` without a
window), per row, measured with tracemalloc on 100k rows with large hash ids. Files are deleted
afterwards.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CONVERSATIONS = ("sharegpt", "openai-chat", "text")
TRACES = ("mooncake", "azure", "burstgpt")
_WORDS = "the cache token prefill decode batch latency kernel tensor parallel quantized attention page block".split()


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _conversation_block(fmt: str, rng: random.Random, n: int = 500) -> list[str]:
    """``n`` distinct records of a dataset format, as lines of text."""
    rows = []
    for _ in range(n):
        turns = [(_text(rng, rng.randint(5, 200)), _text(rng, rng.randint(5, 300))) for _ in range(rng.randint(1, 4))]
        if fmt == "sharegpt":
            messages = [m for u, a in turns for m in ({"from": "human", "value": u}, {"from": "gpt", "value": a})]
            rows.append(json.dumps({"id": f"x{rng.random():.6f}", "conversations": messages}, indent=2))
        elif fmt == "openai-chat":
            messages = [{"role": "system", "content": "You are terse."}]
            messages += [
                m for u, a in turns for m in ({"role": "user", "content": u}, {"role": "assistant", "content": a})
            ]
            rows.append(json.dumps({"messages": messages}))
        else:
            rows.append(f'{rng.randint(0, 10**9)},"{turns[0][0]}"')
    return rows


def _write_conversations(fmt: str, path: Path, size: int) -> int:
    """Write a dataset of about ``size`` bytes (a block of distinct records, repeated); its records."""
    block = _conversation_block(fmt, random.Random(0))
    sep = ",\n" if fmt == "sharegpt" else "\n"
    chunk = sep.join(block)
    blocks = 0
    with path.open("w") as file:
        file.write({"sharegpt": "[\n", "openai-chat": "", "text": "id,prompt\n"}[fmt])
        written = 0
        while written < size:
            file.write((sep if written else "") + chunk)
            written += len(chunk) + len(sep)
            blocks += 1
        file.write("\n]\n" if fmt == "sharegpt" else "\n")
    return blocks * len(block)


def _write_trace(fmt: str, path: Path, size: int) -> float:
    """Write a trace of about ``size`` bytes; the seconds from its first row to its last."""
    rng = random.Random(0)
    days: dict[int, str] = {}
    with path.open("w") as file:
        file.write(
            {
                "mooncake": "",
                "azure": "TIMESTAMP,ContextTokens,GeneratedTokens\n",
                "burstgpt": "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n",
            }[fmt]
        )
        written, n, next_id = 0, 0, 0
        while written < size:
            lines = []
            for _ in range(10_000):
                n += 1
                prompt, output = rng.randint(1, 8000), rng.randint(0, 800)
                if fmt == "mooncake":
                    blocks = -(-prompt // 512)
                    shared = min(blocks, rng.randint(0, 4))  # leading blocks shared by many requests
                    ids = list(range(shared)) + list(range(next_id, next_id + blocks - shared))
                    next_id += blocks - shared
                    row = {"timestamp": n * 3, "input_length": prompt, "output_length": output + 1, "hash_ids": ids}
                    lines.append(json.dumps(row))
                elif fmt == "azure":
                    s, frac = divmod(n * 1370011, 10_000_000)  # ~0.137 s apart, 7 fraction digits
                    day, rest = divmod(s, 86400)
                    if day not in days:
                        days[day] = (datetime(2023, 11, 16) + timedelta(days=day)).strftime("%Y-%m-%d")
                    stamp = f"{days[day]} {rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}.{frac:07d}"
                    lines.append(f"{stamp},{prompt},{output + 1}")
                else:  # 0 response tokens on about one row in 800: failures in the trace
                    lines.append(f"{n // 3},ChatGPT,{prompt},{output},{prompt + output},Conversation log")
            text = "\n".join(lines) + "\n"
            file.write(text)
            written += len(text)
    return {"mooncake": (n - 1) * 3e-3, "azure": (n - 1) * 0.1370011, "burstgpt": float(n // 3)}[fmt]


def _child(fmt: str, path: str, span_s: str) -> None:
    """Read one file and print what it cost, as JSON (run in a fresh process)."""
    from engine.data.conversations import read_conversations
    from engine.data.traces import read_trace

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    wall, cpu = time.perf_counter(), time.process_time()
    if fmt in CONVERSATIONS:
        rows = sum(1 for _ in read_conversations(path, fmt, "prompt" if fmt == "text" else None))
        kept = rows
    else:  # every row read and checked; only those of the trace's last 2 seconds kept
        trace = read_trace(path, fmt, start_s=max(0.0, float(span_s) - 2.0))
        rows = sum(trace.skipped.values()) + len(trace.rows)  # of the window; all rows were read
        kept = len(trace.rows)
    result = {
        "kept": kept,
        "rows": rows,
        "wall_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
        "rss_before_mb": before / 1024,
        "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    print(json.dumps(result))


def _kept_row_bytes() -> float:
    """Bytes of Python memory per trace row kept in a list by read_trace (Mooncake, 14 hash ids)."""
    import tracemalloc

    from engine.data.traces import read_trace

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.jsonl"
        ids = list(range(10**6, 10**6 + 14))  # real ids are large: each one is an int object
        path.write_text(
            "".join(
                f'{{"timestamp": {i}, "input_length": 7000, "output_length": 200, "hash_ids": {ids}}}\n'
                for i in range(100_000)
            )
        )
        tracemalloc.start()
        trace = read_trace(path, "mooncake")
        size = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        return size / len(trace.rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--formats", default=",".join(CONVERSATIONS + TRACES))
    parser.add_argument("--dir", default=None, help="where the generated files go (default: a temporary folder)")
    parser.add_argument("--child", nargs=3, metavar=("FORMAT", "PATH", "SPAN_S"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
        return
    size = args.size_mb << 20
    print(
        f"{'format':<12} {'file MB':>8} {'rows':>11} {'wall s':>7} {'CPU s':>7} {'rows/s (CPU)':>13} {'MB/s (CPU)':>11} {'peak RSS MB':>12} {'over base':>10}"
    )
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        for fmt in args.formats.split(","):
            suffix = {"sharegpt": ".json", "openai-chat": ".jsonl", "text": ".csv", "mooncake": ".jsonl"}.get(
                fmt, ".csv"
            )
            path = Path(folder) / f"{fmt}{suffix}"
            started = time.perf_counter()
            if fmt in CONVERSATIONS:
                rows, span_s = _write_conversations(fmt, path, size), 0.0
            else:
                span_s = _write_trace(fmt, path, size)
                rows = sum(1 for _ in path.open()) - (fmt != "mooncake")
            made_s = time.perf_counter() - started
            out = subprocess.run(
                [sys.executable, __file__, "--child", fmt, str(path), str(span_s)],
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            r = json.loads(out.strip().splitlines()[-1])
            if fmt in CONVERSATIONS:
                assert r["rows"] == rows, (r, rows)
            r["rows"] = rows
            mb = path.stat().st_size / 2**20
            print(
                f"{fmt:<12} {mb:>8.0f} {r['rows']:>11,} {r['wall_s']:>7.1f} {r['cpu_s']:>7.1f} "
                f"{r['rows'] / r['cpu_s']:>13,.0f} {mb / r['cpu_s']:>11.1f} {r['rss_peak_mb']:>12.0f} "
                f"{r['rss_peak_mb'] - r['rss_before_mb']:>10.0f}   (generated in {made_s:.0f} s, {r['kept']:,} kept)",
                flush=True,
            )
            path.unlink()
    print(f"trace rows kept in memory by read_trace (Mooncake, 14 hash ids): {_kept_row_bytes():.0f} bytes per row")


if __name__ == "__main__":
    main()
