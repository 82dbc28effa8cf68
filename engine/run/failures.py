"""When failed requests fail the run: none completed, or more than ``max_error_rate``.

Only request-level errors reach here as failed requests (engine/run/driver.py); the run is
failed with the first distinct reasons and keeps its metrics and every request's reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.backends.base import BackendError
from engine.measure.records import RequestRecord
from engine.spec import JobSpec, SpecError

if TYPE_CHECKING:
    from engine.run.runner import BenchmarkResult


class RunRejected(RuntimeError):
    """The measured phase ran but its requests failed beyond what the workload accepts.

    Stored as a failed run that keeps its metrics and requests (each with its reason).
    """

    def __init__(self, reason: str, result: BenchmarkResult) -> None:
        super().__init__(reason)
        self.result = result


def first_errors(records: list[RequestRecord], most: int = 3) -> str:
    """The first ``most`` distinct request errors, joined with '; ' ("..." when there are more)."""
    reasons = list(dict.fromkeys(r.error for r in records if r.error))
    return "; ".join(str(x) for x in reasons[:most]) + (" ..." if len(reasons) > most else "")


def check_failures(spec: JobSpec, result: BenchmarkResult, log: Callable[[str], None]) -> None:
    """Raise RunRejected when no measured request of ``result`` (a BenchmarkResult) completed,
    or more failed than the workload's ``max_error_rate`` allows."""
    m = result.metrics
    measured = [r for r in result.requests if not r.warmup and not r.cancelled]
    if not m["failed"]:
        return
    reasons = first_errors(measured)
    log(f"{m['failed']} of {len(measured)} request(s) failed: {reasons}")
    if m["completed"] == 0:
        raise RunRejected(f"every request failed ({m['failed']} of {len(measured)}): {reasons}", result)
    limit = spec.workload.max_error_rate
    if limit is not None and m["error_rate"] > limit:
        raise RunRejected(
            f"{m['failed']} of {len(measured)} requests failed ({m['error_rate']:.0%}), "
            f"above the maximum error rate of {limit:.0%}: {reasons}",
            result,
        )


def failure_reason(exc: BaseException) -> str:
    """One line: the exception's last line, prefixed by its type where that helps."""
    text = str(exc).strip().splitlines()
    line = text[-1] if text else ""
    if isinstance(exc, (BackendError, SpecError)):
        return line or type(exc).__name__
    if "out of memory" in line.lower():
        return f"out of memory: {line}"
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__
