"""``python -m faqstats.cli``: the ``faqstats`` command."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
