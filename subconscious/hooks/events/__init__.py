"""Claude Code hook events. Each module has ``handle(event: HookEvent) -> str | None`` returning what
to print on stdout (None prints nothing). They are thin: decisions live in the pure modules
(transcript, context) and state in the store."""
