"""Extensions: skills, MCP client, hooks and browser control (later issues)."""
