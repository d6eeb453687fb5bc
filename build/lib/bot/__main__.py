"""``python -m bot`` is the same as the ``agentgram`` command."""

import sys

from bot.cli import main

sys.exit(main())
