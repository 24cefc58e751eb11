"""The ground every story stands on: durable atomic writes and private directories
(:mod:`.atomic`) and text made safe for a terminal (:mod:`.termtext`).

Imports nothing of ours.
"""
