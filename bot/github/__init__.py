"""Everything that talks to GitHub: event payloads, the label grammar, the plan decision,
the API client, the sticky comment and the commit status or check run.

Pure logic (`events`, `labels`, `plan`, the choices in `sticky`) is apart from the calls
(`client`, `facts`, `publish`), so the decisions are testable without a server.
"""
