"""The redaction QueueBox applies to ``last_error`` values and log lines.

Masks secret-looking values and cuts the text to :data:`MAX_ERROR_LENGTH` bytes of UTF-8 on a
character boundary. It errs towards masking: a masked harmless value costs readability, a leaked
one a rotation. The rules are the same in every QueueBox client (the conformance scenario
``sanitize_masks_secrets_and_cuts`` checks them).
"""

from __future__ import annotations

_MASK = "***"

MAX_ERROR_LENGTH = 2048
"""The most bytes (UTF-8) of error text written to ``last_error``."""

_SECRET_KEY_FRAGMENTS = (
    "password",
    "passwd",
    "pwd",
    "secret",
    "token",
    "apikey",
    "authorization",
    "cookie",
    "signature",
    "credential",
    "session",
    "privatekey",
)

# The white space of the other clients (Go's unicode.IsSpace): ASCII space and controls, NEL,
# NO-BREAK SPACE, and the Unicode space separators. Python's str.isspace also takes U+001C..U+001F.
_WHITESPACE = frozenset(
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)
_ASCII_WHITESPACE = frozenset(" \t\n\f\r")


def sanitize(text: str) -> str:
    """Masks passwords in URLs, Bearer/Basic credentials and values of secret keys, then cuts."""
    return _cut(_mask_keyed_values(_mask_schemes(_mask_url_passwords(text))), MAX_ERROR_LENGTH)


def sanitize_error(error: BaseException | object) -> str:
    """:func:`sanitize` applied to an exception's text (its ``str``, else its ``repr``)."""
    text = str(error)
    if text == "" and isinstance(error, BaseException):
        text = repr(error)
    return sanitize(text)


def _cut(text: str, limit: int) -> str:
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    end = limit
    while end > 0 and (data[end] & 0xC0) == 0x80:
        end -= 1
    return data[:end].decode("utf-8", "surrogatepass")


def _mask_url_passwords(text: str) -> str:
    out: list[str] = []
    rest = text
    while True:
        pos = rest.find("://")
        if pos < 0:
            break
        out.append(rest[: pos + 3])
        tail = rest[pos + 3 :]
        end = 0
        while end < len(tail):
            c = tail[end]
            if c in "/\"'" or c in _WHITESPACE:
                break
            end += 1
        authority = tail[:end]
        at = authority.rfind("@")
        colon = authority.find(":")
        if at >= 0 and 0 <= colon < at:
            out.append(authority[: colon + 1] + _MASK + authority[at:])
        else:
            out.append(authority)
        rest = tail[end:]
    out.append(rest)
    return "".join(out)


def _split_inclusive(text: str) -> list[str]:
    words: list[str] = []
    current: list[str] = []
    for c in text:
        current.append(c)
        if c in _WHITESPACE:
            words.append("".join(current))
            current = []
    if current:
        words.append("".join(current))
    return words


def _strip_space(word: str) -> str:
    start, end = 0, len(word)
    while start < end and word[start] in _WHITESPACE:
        start += 1
    while end > start and word[end - 1] in _WHITESPACE:
        end -= 1
    return word[start:end]


def _mask_schemes(text: str) -> str:
    words = _split_inclusive(text)
    out: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        out.append(word)
        bare = _strip_space(word).lower()
        if bare in ("bearer", "basic") and word[-1:] in _WHITESPACE and i + 1 < len(words):
            i += 1
            out.append(_MASK + "".join(c for c in words[i] if c in _WHITESPACE))
        i += 1
    return "".join(out)


def _is_secret_key(key: str) -> bool:
    normal = "".join(c for c in key if c.isascii() and c.isalnum()).lower()
    return normal != "" and any(f in normal for f in _SECRET_KEY_FRAGMENTS)


def _is_key_char(c: str) -> bool:
    return (c.isascii() and c.isalnum()) or c in "_-"


def _mask_keyed_values(text: str) -> str:
    out: list[str] = []
    copied = 0
    i = 0
    n = len(text)
    while i < n:
        sep = text[i]
        if sep not in "=:":
            i += 1
            continue
        key_end = i
        if key_end > 0 and text[key_end - 1] in "\"'":
            key_end -= 1
        key_start = key_end
        while key_start > 0 and _is_key_char(text[key_start - 1]):
            key_start -= 1
        if key_start == key_end or not _is_secret_key(text[key_start:key_end]):
            i += 1
            continue
        v = i + 1
        while v < n and text[v] == " ":
            v += 1
        quote = ""
        if v < n and text[v] in "\"'":
            quote = text[v]
            v += 1
        end = v
        while end < n:
            b = text[end]
            if quote:
                stop = b == quote
            elif sep == ":":
                stop = b in "\n\r,}"
            else:
                stop = b in _ASCII_WHITESPACE or b in "&,;"
            if stop:
                break
            end += 1
        if end > v:
            out.append(text[copied:v] + _MASK)
            copied = end
        i = max(end, i + 1)
    out.append(text[copied:])
    return "".join(out)
