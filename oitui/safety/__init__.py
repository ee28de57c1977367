"""Safety: semgrep scanning, approval policy and sandbox policy (a later issue).

Until it lands, asking for safe mode or a sandbox exits 2 with "not available yet"; code never
runs unsandboxed when a sandbox was asked for.
"""
