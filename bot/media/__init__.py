"""Voice and files: what the intake hears in voice notes, and what the turn runner says back.

- ``transcription``: a voice note or audio file -> its transcript (caps, minutes per day, one
  sentence when it cannot be understood); ``naming``: whether a transcript names the bot or
  says a command; ``audio_length``: how long a file plays.
- ``speaking``: ``/voice on|off|auto`` per chat, and an answer spoken as a voice note.
- ``audio``: the audio endpoints (OpenAI's, or a server that speaks them), which the rest of
  this package sees through the small ``Transcriber`` and ``Speaker`` protocols.
"""
