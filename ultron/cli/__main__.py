"""`python -m ultron.cli`: the same entry point as the installed `ultron` script."""

import sys

from ultron.cli import main

sys.exit(main(sys.argv[1:]))
