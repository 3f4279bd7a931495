"""`python -m pushclient` is the `pushclient` command."""

import sys

from .cli import main

sys.exit(main())
