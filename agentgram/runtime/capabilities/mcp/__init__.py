"""Model Context Protocol tool servers (``mcp.servers``): their sessions and the tools they offer.

:mod:`.servers` owns each server's client session on the official ``mcp`` SDK (started on first
use, kept open, started again after a crash, closed on shutdown); :mod:`.tools` turns the tools a
server lists into agentgram tools named ``mcp__<server>__<tool>``.
"""
