"""``python -m privplan.cli``: the ``privplan`` command."""

import sys

from privplan.cli.commands import main

sys.exit(main())
