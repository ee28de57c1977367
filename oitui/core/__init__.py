"""The agent core: OpenInterpreter, the respond loop, LMC helpers, the llm adapter, context,
sessions and settings. Never imports a front end (tui, cli, acp)."""
