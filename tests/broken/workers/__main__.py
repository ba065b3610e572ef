"""``python -m tests.broken.workers BUG``: serve the adapter protocol with one broken worker."""

import sys

from tests.broken.workers import main

sys.exit(main(sys.argv))
