"""Entry point: ``python -m engine <verb>``."""

import sys

from engine.cli import main

sys.exit(main())
