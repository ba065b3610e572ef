"""``python -m tests.fuzz.p1_workers ATTACK [ARG]``: serve the adapter protocol with one hostile worker."""

import sys

from tests.fuzz.p1_workers import main

sys.exit(main(sys.argv))
