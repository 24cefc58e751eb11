"""Caps on what the client-side tools may do in one call and in one agent turn."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    max_calls_per_turn: int = 20          # tool calls run for one message; later calls get an error
    call_timeout: float = 15.0            # seconds for one tool call (Bash included)
    max_file_bytes: int = 2 * 1024 * 1024  # Read / Edit refuse bigger files, Grep skips them
    max_result_chars: int = 8_000         # one tool result, after redaction (~2k tokens)
    max_turn_result_chars: int = 40_000   # all results of one turn: the bundled agent's window is 32k tokens
    max_read_lines: int = 2000            # lines returned by one Read unless the agent asks for fewer
    max_line_chars: int = 2000            # a longer line is cut in Read output
    max_grep_line_chars: int = 300        # a matching line is cut in Grep output
    max_matches: int = 100                # Grep: matching lines (content mode)
    max_paths: int = 200                  # Glob: paths; Grep: files listed
    max_walk_entries: int = 50_000        # directory entries one Grep or Glob looks at
    max_write_bytes: int = 512 * 1024     # Write / Edit: size of the new file (full mode)
    sandbox_memory_bytes: int = 1024 ** 3     # Bash: address space of each process in the sandbox (RLIMIT_AS)
    sandbox_processes: int = 128          # Bash: processes/threads in the sandbox (RLIMIT_NPROC; counted for root)
    sandbox_file_bytes: int = 64 * 1024 ** 2  # Bash: size of any one file written (RLIMIT_FSIZE)
    sandbox_tmp_bytes: int = 64 * 1024 ** 2   # Bash: the sandbox's /tmp (and HOME) tmpfs
    send_timeout: float = 300.0           # one request to Letta (the user message or the tool results)
    turn_timeout: float = 900.0           # the whole turn, tool calls and round trips included


DEFAULT_LIMITS = Limits()
