"""The ground every story stands on: durable atomic writes and private directories
(:mod:`.atomic`), text made safe for a terminal (:mod:`.termtext`) and the hot path's JSON
(:mod:`.fastjson`).

Imports nothing of ours.
"""
