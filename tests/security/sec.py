"""Shared set-up for the security suite: the end-to-end helpers (tests/e2e/sqtest.py) on the path.

Each test_*.py here starts with `import sec` and then uses sqtest's helpers (start_target,
start_serve, run_squall, stop, ...) as the end-to-end tests do.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))

import sqtest  # noqa: E402,F401  (re-exported for the suite)
