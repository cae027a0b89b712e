"""Voice and files: what the intake hears in voice notes, and what the turn runner says back.

- ``transcription``: a voice note or audio file -> its transcript (caps, minutes per day, one
  sentence when it cannot be understood); ``naming``: whether a transcript names the bot or
  says a command; ``audio_length``: how long a file plays.
- ``speaking``: ``/voice on|off|auto`` per chat, and an answer spoken as a voice note.

The audio endpoints themselves are a provider's (``bot.providers.audio``); this package
sees them through the small ``Transcriber`` and ``Speaker`` protocols.
"""
