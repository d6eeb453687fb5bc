"""Tools the agent can call: a typed base class, a registry, built-ins."""
