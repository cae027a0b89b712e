"""Telegram's text rules, as pure functions: UTF-16 lengths, the HTML parse mode and the
entities Telegram adds to incoming text. Used by the fake Bot API server.

``parse_html`` follows TDLib's ``parse_html`` (the code behind the Bot API): the same tags,
the same error messages with UTF-8 byte offsets, ``</>`` closing any tag, unknown attributes
ignored, entities with UTF-16 offsets. One deliberate difference: with ``strict=True`` (the
default) an ``&`` that does not begin ``&lt; &gt; &amp; &quot;`` or a numeric reference, each
with its ``;``, is an error. The Bot API documentation requires that escaping; Telegram
itself keeps such an ``&`` as text, which hides renderer bugs (``&lt`` in a model's answer
would silently become ``<``). ``strict=False`` behaves like Telegram.

    text, entities = parse_html("<b>hi</b> &amp; bye")   # ("hi & bye", [bold 0..2])
    parse_html("a < b")  # EntityParseError: Unsupported start tag "" at byte offset 2
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

Entity = dict[str, Any]  # a MessageEntity as the Bot API sends it

ALLOWED_TAGS = frozenset({"a", "b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span",
                          "tg-spoiler", "tg-emoji", "code", "pre", "blockquote"})
_SIMPLE = {"b": "bold", "strong": "bold", "i": "italic", "em": "italic", "u": "underline",
           "ins": "underline", "s": "strikethrough", "strike": "strikethrough", "del": "strikethrough",
           "span": "spoiler", "tg-spoiler": "spoiler"}
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_SPACE = " \t\r\n\f\v"


class EntityParseError(ValueError):
    """The text cannot be parsed; ``str(error)`` is Telegram's message after "can't parse entities: "."""


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit of every Telegram limit and entity offset."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _byte_offset(text: str, index: int) -> int:
    return len(text[:index].encode("utf-8", "surrogatepass"))


_DIGITS, _HEX, _LETTERS = re.compile(r"[0-9]*"), re.compile(r"[0-9a-fA-F]*"), re.compile(r"[A-Za-z]*")


def _run(pattern: re.Pattern[str], text: str, start: int) -> str:
    match = pattern.match(text, start)
    return match.group() if match else ""


def _decode_entity(text: str, pos: int, strict: bool) -> tuple[str, int] | None:
    """The character an ``&...`` at ``pos`` stands for and the index after it, or None."""
    end = pos + 1
    if text[end:end + 1] == "#":
        end += 1
        hexa = text[end:end + 1] == "x"
        end += hexa
        digits = _run(_HEX if hexa else _DIGITS, text, end)
        end += len(digits)
        value = int(digits, 16 if hexa else 10) if digits else 0
        if value == 0 or value >= 0x10FFFF or end - pos >= 10:
            return None
        char = chr(value)
    else:
        name = _run(_LETTERS, text, end)
        end += len(name)
        if name not in _NAMED:
            return None
        char = _NAMED[name]
    if text[end:end + 1] == ";":
        return char, end + 1
    return None if strict else (char, end)


def normalize_url(url: str) -> str | None:
    """Telegram's view of an ``<a href>``: scheme and path added, None when it is no URL."""
    if not url or any(c in url for c in _SPACE):
        return None
    if "://" not in url and not url.startswith(("tg:", "mailto:")):
        url = "http://" + url
    parts = urlsplit(url)
    if parts.scheme in ("http", "https", "ftp") and not parts.netloc:
        return None
    if parts.netloc and not parts.path:
        parts = parts._replace(path="/")
    return urlunsplit(parts)


class _Open:
    __slots__ = ("argument", "begin", "expandable", "offset", "tag")

    def __init__(self, tag: str, argument: str, expandable: bool, offset: int, begin: int) -> None:
        self.tag, self.argument, self.expandable, self.offset, self.begin = tag, argument, expandable, offset, begin


def parse_html(markup: str, *, strict: bool = True) -> tuple[str, list[Entity]]:
    """Plain text and entities of a message sent with ``parse_mode=HTML``."""
    out: list[str] = []
    units = 0  # UTF-16 length of the output so far
    entities: list[Entity] = []
    stack: list[_Open] = []
    n = len(markup)

    def at(k: int) -> str:
        return markup[k] if k < n else ""

    def fail(message: str) -> EntityParseError:
        return EntityParseError(message)

    i = 0
    while i < n:
        c = markup[i]
        if c == "&":
            decoded = _decode_entity(markup, i, strict)
            if decoded is not None:
                out.append(decoded[0])
                units += utf16_len(decoded[0])
                i = decoded[1]
                continue
            if strict:
                raise fail(f"Character '&' at byte offset {_byte_offset(markup, i)} must be escaped as &amp;")
        if c != "<":
            out.append(c)
            units += utf16_len(c)
            i += 1
            continue
        begin = i
        i += 1
        if at(i) != "/":  # a start tag
            while at(i) and at(i) not in _SPACE and at(i) != ">":
                i += 1
            if not at(i):
                raise fail(f"Unclosed start tag at byte offset {_byte_offset(markup, begin)}")
            tag = markup[begin + 1:i].lower()
            if tag not in ALLOWED_TAGS:
                raise fail(f'Unsupported start tag "{tag}" at byte offset {_byte_offset(markup, begin)}')
            argument, expandable, i = _attributes(markup, i, tag, begin, strict)
            if tag == "span" and argument != "spoiler":
                raise fail(f'Tag "span" must have class "tg-spoiler" at byte offset {_byte_offset(markup, begin)}')
            stack.append(_Open(tag, argument, expandable, units, len(out)))
            i += 1
            continue
        if not stack:  # an end tag
            raise fail(f"Unexpected end tag at byte offset {_byte_offset(markup, begin)}")
        while at(i) and at(i) not in _SPACE and at(i) != ">":
            i += 1
        end_name = markup[begin + 2:i]
        while at(i) and at(i) in _SPACE:
            i += 1
        if at(i) != ">":
            raise fail(f"Unclosed end tag at byte offset {_byte_offset(markup, begin)}")
        i += 1
        top = stack.pop()
        if end_name and end_name != top.tag:
            raise fail(f'Unmatched end tag at byte offset {_byte_offset(markup, begin)}, '
                       f'expected "</{top.tag}>", found "</{end_name}>"')
        if units > top.offset:
            _close(top, units - top.offset, "".join(out[top.begin:]), entities)
    if stack:
        raise fail(f'Can\'t find end tag corresponding to start tag "{stack[-1].tag}"')
    text = "".join(out)
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        raise fail("Text contains invalid Unicode characters after decoding HTML entities, "
                   "check for unmatched surrogate code units")
    for entity in entities:
        if entity["type"] == "code":
            entity.pop("language", None)
    entities.sort(key=lambda e: (e["offset"], -e["length"]))
    return text, entities


def _attributes(markup: str, i: int, tag: str, begin: int, strict: bool) -> tuple[str, bool, int]:
    """Reads a start tag's attributes from ``i``; returns (argument, expandable, index of '>')."""
    n = len(markup)

    def at(k: int) -> str:
        return markup[k] if k < n else ""

    argument, expandable = "", False
    while at(i) != ">":
        while at(i) and at(i) in _SPACE:
            i += 1
        if at(i) == ">":
            break
        if not at(i):
            raise EntityParseError(f"Unclosed start tag at byte offset {_byte_offset(markup, begin)}")
        name_begin = i
        while at(i) and at(i) not in _SPACE and at(i) not in "=>":
            i += 1
        name = markup[name_begin:i]
        if not name:
            raise EntityParseError(f'Empty attribute name in the tag "{tag}" at byte offset '
                                   f"{_byte_offset(markup, begin)}")
        while at(i) and at(i) in _SPACE:
            i += 1
        expandable = expandable or (tag == "blockquote" and name == "expandable")
        if at(i) != "=":
            continue
        i += 1
        while at(i) and at(i) in _SPACE:
            i += 1
        if not at(i):
            raise EntityParseError(f'Unclosed start tag "{tag}" at byte offset {_byte_offset(markup, begin)}')
        if at(i) not in "'\"":  # a name token: letters, digits, periods, hyphens
            token_begin = i
            while at(i) and (at(i).isascii() and at(i).isalnum() or at(i) in ".-"):
                i += 1
            value = markup[token_begin:i].lower()
            if not at(i) or (at(i) not in _SPACE and at(i) != ">"):
                raise EntityParseError(f"Unexpected end of name token at byte offset "
                                       f"{_byte_offset(markup, token_begin)}")
        else:
            quote, chars = at(i), []
            i += 1
            while at(i) and at(i) != quote:
                decoded = _decode_entity(markup, i, strict) if at(i) == "&" else None
                if decoded is not None:
                    chars.append(decoded[0])
                    i = decoded[1]
                    continue
                if at(i) == "&" and strict:
                    raise EntityParseError(f"Character '&' at byte offset {_byte_offset(markup, i)} "
                                           "must be escaped as &amp;")
                chars.append(at(i))
                i += 1
            i += at(i) == quote
            value = "".join(chars)
        if not at(i):
            raise EntityParseError(f"Unclosed start tag at byte offset {_byte_offset(markup, begin)}")
        if tag == "a" and name == "href":
            argument = value
        elif tag == "code" and name == "class" and value.startswith("language-"):
            argument = value[len("language-"):]
        elif tag == "span" and name == "class" and value.startswith("tg-"):
            argument = value[len("tg-"):]
        elif tag == "tg-emoji" and name == "emoji-id":
            argument = value
    return argument, expandable, i


def _close(top: _Open, length: int, inner: str, entities: list[Entity]) -> None:
    """Adds the entity a closed tag stands for (pre and code merge as TDLib merges them)."""
    span = {"offset": top.offset, "length": length}
    last: Entity = entities[-1] if entities else {}
    same = bool(last) and last["offset"] == top.offset and last["length"] == length
    if top.tag in _SIMPLE:
        entities.append({"type": _SIMPLE[top.tag], **span})
    elif top.tag == "blockquote":
        entities.append({"type": "expandable_blockquote" if top.expandable else "blockquote", **span})
    elif top.tag == "tg-emoji":
        if top.argument:
            entities.append({"type": "custom_emoji", **span, "custom_emoji_id": top.argument})
    elif top.tag == "a":
        url = normalize_url(top.argument or inner)
        if url:
            entities.append({"type": "text_link", **span, "url": url})
    elif top.tag == "pre":
        if same and last["type"] == "code" and last.get("language"):  # <code class=...><pre>
            last["type"] = "pre"
        else:
            entities.append({"type": "pre", **span})
    elif same and last["type"] == "pre" and top.argument:  # <pre><code class=...>
        last["language"] = top.argument
    else:  # a code language only survives merged into a pre; parse_html drops it at the end
        entities.append({"type": "code", **span, **({"language": top.argument} if top.argument else {})})


def trim(text: str, entities: list[Entity]) -> tuple[str, list[Entity]]:
    """Telegram drops leading and trailing whitespace of a message; entities follow."""
    stripped = text.strip()
    if stripped == text:
        return text, entities
    start = utf16_len(text[:len(text) - len(text.lstrip())])
    size = utf16_len(stripped)
    kept = []
    for entity in entities:
        begin = max(entity["offset"] - start, 0)
        end = min(entity["offset"] + entity["length"] - start, size)
        if end > begin:
            kept.append({**entity, "offset": begin, "length": end - begin})
    return stripped, kept


_COMMAND = re.compile(r"(?<![\w/])/[A-Za-z0-9_]{1,32}(?:@[A-Za-z0-9_]{3,32})?(?![\w/@])")
_MENTION = re.compile(r"(?<![\w@])@[A-Za-z0-9_]{5,32}(?![\w@])")


def detect_entities(text: str) -> list[Entity]:
    """The bot_command and mention entities Telegram adds to a user's text (UTF-16 offsets)."""
    found = [(m, "bot_command") for m in _COMMAND.finditer(text)] + [(m, "mention") for m in _MENTION.finditer(text)]
    entities = [{"type": kind, "offset": utf16_len(text[:m.start()]), "length": utf16_len(m.group())}
                for m, kind in found]
    return sorted(entities, key=lambda e: e["offset"])


__all__ = ["ALLOWED_TAGS", "Entity", "EntityParseError", "detect_entities", "normalize_url", "parse_html",
           "trim", "utf16_len"]
