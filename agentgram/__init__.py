"""agentgram: the distribution namespace (bot/ and runtime/ live at the top of the source tree)."""
