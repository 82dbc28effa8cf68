"""Entry point of a tensor-parallel follower rank: ``python -m engine.run.follower SPEC_FILE``.

Rank 0 (the job process) starts the followers through :mod:`engine.run.tensor_parallel`;
each follower runs the same spec through the runner, which shards the model with rank 0.
"""

from __future__ import annotations

import sys
from pathlib import Path

from engine.run import runner
from engine.spec import parse_job_spec


def main(spec_file: str) -> int:
    spec = parse_job_spec(Path(spec_file).read_text())
    runner.execute(spec, runner.ProgressState(), log=lambda _msg: None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
