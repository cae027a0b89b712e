"""The intake: every channel's ``Inbox`` (``flow``: ``Intake``) and what it holds of a message
while it is decided (``item``)."""

from bot.intake.flow import Intake
from bot.intake.item import IntakeSettings

__all__ = ["Intake", "IntakeSettings"]
