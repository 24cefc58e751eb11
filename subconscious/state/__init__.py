"""The shared home, ``$LETTA_HOME/.letta/claude/``: what several machines, their sync engine and
upstream's plugin all write.

The ground, used by every part: :mod:`.fs` (the one door to the file system, which the simulation
drives), :mod:`.files` and :mod:`.locks`, :mod:`.ids`, conflict copies' names (:mod:`.copynames`), every
source a read merges (:mod:`.sources`), publishing a shared file (:mod:`.publish`, :mod:`.viewlock`), the pure order of versions (:mod:`.order`,
:mod:`.clock`, :mod:`.bounds`), records and merges (:mod:`.records`, :mod:`.merge`,
:mod:`.recordmerge`), sealed values (:mod:`.seal`) and JSON text (:mod:`.jsontext`,
:mod:`.textforms`). Above it: :mod:`.conflicts`, then :mod:`.sessions`, then :mod:`.store`.

Imports only :mod:`subconscious.base`; nothing here knows about hooks, delivery or Letta.
"""
