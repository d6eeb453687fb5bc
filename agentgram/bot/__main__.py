"""``python -m agentgram.bot`` is the same as the ``agentgram`` command."""

import sys

from agentgram.bot.cli import main

sys.exit(main())
