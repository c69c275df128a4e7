"""`python -m docgrad ...` (also what `torchrun -m docgrad probe ...` runs)."""

import sys

from docgrad.runtime.cli import main

sys.exit(main())
