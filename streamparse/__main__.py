"""`python -m streamparse` is the `streamparse` command."""

import sys

from .cli import main

sys.exit(main())
