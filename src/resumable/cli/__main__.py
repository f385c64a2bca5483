"""`python -m resumable.cli`."""

from __future__ import annotations

import sys

from resumable.cli import main

sys.exit(main())
