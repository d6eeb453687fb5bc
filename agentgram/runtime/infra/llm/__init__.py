"""The LLM seam: provider-neutral message types and the client protocol."""
