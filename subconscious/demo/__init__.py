"""`subconscious demo`: simulated machines, a simulated sync engine and a real git pair."""
