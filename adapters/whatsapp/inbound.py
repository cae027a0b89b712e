"""A webhook's body as what the core takes: messages (``InboundMessage``) and delivery
statuses (``Failure`` for the failed ones). Pure: no I/O.

A body (``object: whatsapp_business_account``) holds entries, each with changes; a change
of ``field: messages`` has a ``value`` with ``metadata.phone_number_id`` (the number it was
sent to: only ours is read, an app may serve several), ``contacts`` (the senders' profile
names), ``messages`` and ``statuses``. Every message is a DM from ``from`` (a phone number,
E.164 without ``+``), known by its ``id`` (a ``wamid``), which a redelivery repeats.

- text, and the caption of an image, a document, a video: the text; ``/stop`` is a typed command
- a button or list press on a question (``interactive``): text is the choice's id, ``reply_to``
  the question's message id (``context.id``), as ``Asks`` says
- a template's quick-reply button: its text
- images, documents, audio, voice notes (``audio.voice``), videos, stickers: attachments by
  media id, fetched later (``fetch``)
- a location, contacts: described as text
- reactions, system messages and what WhatsApp cannot show (``unsupported``): nothing
"""

from __future__ import annotations

import mimetypes
from dataclasses import dataclass, replace
from typing import Any

from bot.messages import Attachment, AttachmentKind, ChatType, InboundMessage, Sender, clean_text

PLATFORM = "whatsapp"
_KINDS = {"image": AttachmentKind.IMAGE, "document": AttachmentKind.DOCUMENT, "audio": AttachmentKind.AUDIO,
          "video": AttachmentKind.VIDEO, "sticker": AttachmentKind.IMAGE}


@dataclass(frozen=True, slots=True)
class Failure:
    """A message of ours WhatsApp could not deliver (a ``failed`` status)."""

    message_id: str
    recipient: str
    code: int
    title: str
    details: str = ""


@dataclass(frozen=True, slots=True)
class Parsed:
    messages: tuple[InboundMessage, ...] = ()
    failures: tuple[Failure, ...] = ()


def parse(body: dict[str, Any], phone_number_id: str) -> Parsed:
    """The messages and failures of a webhook body sent to ``phone_number_id``, in order."""
    messages: list[InboundMessage] = []
    failures: list[Failure] = []
    if body.get("object") != "whatsapp_business_account":
        return Parsed()
    for entry in _list(body.get("entry")):
        for change in _list(_dict(entry).get("changes")):
            change = _dict(change)
            value = _dict(change.get("value"))
            if change.get("field") != "messages":
                continue
            if str(_dict(value.get("metadata")).get("phone_number_id") or "") != phone_number_id:
                continue
            names = {str(c.get("wa_id")): str(_dict(c.get("profile")).get("name") or "")
                     for c in map(_dict, _list(value.get("contacts")))}
            for message in map(_dict, _list(value.get("messages"))):
                msg = to_inbound(message, names, phone_number_id)
                if msg is not None:
                    messages.append(msg)
            for status in map(_dict, _list(value.get("statuses"))):
                if status.get("status") == "failed":
                    failures.extend(failures_of(status))
    return Parsed(tuple(messages), tuple(failures))


def failures_of(status: dict[str, Any]) -> list[Failure]:
    errors = [_dict(e) for e in _list(status.get("errors"))] or [{}]
    out = []
    for error in errors[:1]:
        code = error.get("code")
        out.append(Failure(str(status.get("id") or ""), str(status.get("recipient_id") or ""),
                           code if isinstance(code, int) else 0, str(error.get("title") or "failed"),
                           str(_dict(error.get("error_data")).get("details") or error.get("message") or "")))
    return out


def to_inbound(message: dict[str, Any], names: dict[str, str], account: str) -> InboundMessage | None:
    sender, message_id, kind = str(message.get("from") or ""), str(message.get("id") or ""), message.get("type")
    if not sender or not message_id:
        return None
    context = _dict(message.get("context"))
    reply_to = str(context["id"]) if context.get("id") else None
    text = ""
    attachments: tuple[Attachment, ...] = ()
    if kind == "text":
        text = str(_dict(message.get("text")).get("body") or "")
    elif kind == "interactive":
        interactive = _dict(message.get("interactive"))
        pressed = _dict(interactive.get("button_reply") or interactive.get("list_reply"))
        if not pressed.get("id") or reply_to is None:
            return None
        text = str(pressed["id"])
    elif kind == "button":
        text = str(_dict(message.get("button")).get("text") or "")
    elif kind in _KINDS:
        media = _dict(message.get(kind))
        if not media.get("id"):
            return None
        text = str(media.get("caption") or "")
        attachments = (attachment_of(kind, media, message_id),)
    elif kind == "location":
        text = location_text(_dict(message.get("location")))
    elif kind == "contacts":
        text = contacts_text([_dict(c) for c in _list(message.get("contacts"))])
    else:  # reaction, system, unsupported, order ...: nothing to answer
        return None
    timestamp = message.get("timestamp")
    stamp = float(timestamp) if isinstance(timestamp, str) and timestamp.isdigit() else None
    msg = InboundMessage(PLATFORM, account, sender, ChatType.DM, Sender(sender, names.get(sender, "")),
                         clean_text(text), message_id, addressed=True, reply_to=reply_to,
                         attachments=attachments)
    return msg if stamp is None else replace(msg, timestamp=stamp)


def attachment_of(kind: str, media: dict[str, Any], message_id: str) -> Attachment:
    mime = str(media.get("mime_type") or "").split(";")[0].strip() or None
    voice = kind == "audio" and bool(media.get("voice"))
    name = str(media.get("filename") or "")
    if not name:
        extension = (mimetypes.guess_extension(mime) if mime else None) or ""
        if mime == "audio/ogg":
            extension = ".ogg"
        name = f"{'voice' if voice else kind}-{message_id[-8:].strip('=')}{extension}"
    return Attachment(AttachmentKind.VOICE if voice else _KINDS[kind], name, mime, None,
                      platform_file_id=str(media["id"]))


def location_text(location: dict[str, Any]) -> str:
    where = ", ".join(str(location[k]) for k in ("name", "address") if location.get(k))
    at = f"{location.get('latitude')}, {location.get('longitude')}"
    return f"📍 Location: {where} ({at})" if where else f"📍 Location: {at}"


def contacts_text(contacts: list[dict[str, Any]]) -> str:
    lines = []
    for contact in contacts:
        name = str(_dict(contact.get("name")).get("formatted_name") or "someone")
        phones = [str(p.get("phone") or p.get("wa_id")) for p in map(_dict, _list(contact.get("phones")))
                  if p.get("phone") or p.get("wa_id")]
        emails = [str(e.get("email")) for e in map(_dict, _list(contact.get("emails"))) if e.get("email")]
        lines.append(f"👤 Contact: {name}" + "".join(f", {x}" for x in phones + emails))
    return "\n".join(lines)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
