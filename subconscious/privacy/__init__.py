"""What may leave this machine and what is sealed: ``<private>`` text and private files
(:mod:`.private`, :mod:`.results`), secret redaction (:mod:`.redact`), the key ring
(:mod:`.keys`) and re-sealing every cached copy in the home (:mod:`.homeseal`).

May import :mod:`subconscious.state` (seal, files) and :mod:`subconscious.base`; nothing above.
"""
