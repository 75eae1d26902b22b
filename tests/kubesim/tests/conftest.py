"""The simulator's own tests import it as the package `kubesim` (from tests/)."""
import sys
from pathlib import Path

TESTS_DIR = str(Path(__file__).resolve().parents[2])
if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)
