"""The ACP agent for editors (a later issue)."""
