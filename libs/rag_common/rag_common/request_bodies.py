"""How every service reads a request body, and how it words what is wrong with one.

- A JSON body comes under a JSON media type: ``application/json`` or any ``application/*+json``
  (RFC 6839), with any parameters (``; charset=utf-8``). Any other content type, or none, is refused
  (``UnsupportedMediaType``, 415): a browser form may post ``text/plain`` to another site without
  asking it first, so a JSON-looking ``text/plain`` body must not be read as JSON.
- A JSON object may not name a key twice, at any depth (``MalformedBody``, 400): parsers keep the
  last value, so ``{"acl": {...}, "acl": null}`` would pass one check and mean another. Checked
  while parsing, in one linear pass (``json.loads`` with an ``object_pairs_hook``).
- A validation problem is reported as its location and message (:func:`validation_problems`), and
  neither may show an internal repr (``<function f at 0x7f…>``, ``<class '…'>``): pydantic names
  the members of a union by their core schema, which can print the validator functions.

FastAPI-free: ``rag_common.service`` applies the first two to every route with a JSON body, and a
route that reads its body itself (the gateway's ``POST /v1/documents``) calls :func:`parse_json_body`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from email.message import Message
from typing import Any

from rag_common.errors import MalformedBody, UnsupportedMediaType

#: The longest piece of a client's input (a key, a content type) an error message repeats.
_SHOWN_CHARS = 80


def is_json_media_type(content_type: str | None) -> bool:
    """Whether ``content_type`` (a ``Content-Type`` header value) says the body is JSON:
    ``application/json`` or ``application/*+json``, parameters allowed, case-insensitive."""
    if not content_type:
        return False
    message = Message()
    message["content-type"] = content_type
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


def require_json_media_type(content_type: str | None) -> None:
    """Raise :class:`UnsupportedMediaType` unless ``content_type`` is a JSON media type."""
    if is_json_media_type(content_type):
        return
    given = f"not {_shown(content_type)!r}" if content_type else "and the request has no Content-Type"
    raise UnsupportedMediaType(f"the body must be JSON sent as Content-Type: application/json, {given}")


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _object_without_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):  # the rare case: find which key came twice
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return result


def parse_json_body(body: bytes | str) -> Any:
    """``body`` parsed as JSON (as ``json.loads`` does), refusing a key given twice in any object
    (:class:`MalformedBody`, naming the key), and a body that is not text in a JSON encoding, nested
    past the parser's depth or holding a number too long to convert (:class:`MalformedBody`).
    Invalid JSON raises ``json.JSONDecodeError`` (its position is the caller's to report)."""
    try:
        return json.loads(body, object_pairs_hook=_object_without_duplicate_keys)
    except _DuplicateKey as exc:
        raise MalformedBody(
            f"duplicate key {_shown(exc.key)!r} in the JSON body: each key may appear once per object",
            detail=[{"loc": ["body"], "msg": f"duplicate key {_shown(exc.key)!r}", "type": "duplicate_key"}],
        ) from None
    except json.JSONDecodeError:
        raise
    except UnicodeDecodeError:
        raise MalformedBody("the JSON body is not UTF-8 (nor UTF-16 or UTF-32) text") from None
    except RecursionError:
        raise MalformedBody("the JSON body is nested too deeply") from None
    except ValueError:  # a number past the interpreter's digit limit for int()
        raise MalformedBody("the JSON body holds a number with too many digits") from None


# --------------------------------------------------------------------------- validation problems

#: The angle-bracketed parts of a qualified name (``f.<locals>.g``, ``<lambda>``), unbracketed first
#: so that a repr has no brackets inside but those of the reprs it holds.
_QUALNAME_PART = re.compile(r"<(locals|lambda|genexpr|listcomp|dictcomp|setcomp|module)>")
#: An innermost ``<…>``.
_INNERMOST = re.compile(r"<([^<>]*)>")
#: What an innermost ``<…>`` holds when it is a repr: ``function f at 0x…``, ``bound method C.f of x``,
#: ``built-in function len``, ``class 'pkg.C'``, ``pkg.C object at 0x…``; the group is the name kept.
_REPR = re.compile(
    r"(?:bound |built-in )?(?:function|method) (\S+).*|class '([^']+)'|(\S+) object(?: at 0x[0-9A-Fa-f]+.*)?",
    re.DOTALL,
)
#: Whatever ``at 0x…`` address is left after the reprs above (an unusual repr's).
_ADDRESS = re.compile(r"\s*\bat 0x[0-9A-Fa-f]+")
#: A pydantic-core schema tag that names validator functions, e.g.
#: ``function-after[functools.partial(min_length_validator, min_length=1)(), function-after[_not_blank(), str]]``:
#: a union member's name in ``loc``. Shown as the type it validates (the last name: ``str``).
_FUNCTION_TAG = re.compile(r"^function-(?:after|before|wrap|plain)\[.*?([\w.]+(?:\[[\w.]+(?:, [\w.]+)*\])?)\]+$")


def _bare_name(match: re.Match[str]) -> str:
    repr_ = _REPR.fullmatch(match.group(1))
    if repr_ is None:
        return match.group(0)
    name = next(group for group in repr_.groups() if group)
    return name.rpartition(".")[2]


def without_reprs(text: str) -> str:
    """``text`` with every Python object repr replaced by the object's bare name and no memory
    address left: safe to show a client."""
    text = _QUALNAME_PART.sub(r"\1", text)
    for _ in range(8):  # innermost first: a bound method's repr holds its object's
        reduced = _INNERMOST.sub(_bare_name, text)
        if reduced == text:
            break
        text = reduced
    return _ADDRESS.sub("", text)


def _loc_part(part: Any) -> str | int:
    if isinstance(part, int):
        return part
    text = str(part)
    if (tag := _FUNCTION_TAG.match(text)) is not None:
        text = tag.group(1)
    return without_reprs(text)


def validation_problems(errors: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Pydantic's (or FastAPI's) errors as a client needs them: ``{loc, msg, type}`` each, without
    the offending input or its context, and without any internal repr."""
    return [
        {
            "loc": [_loc_part(part) for part in error.get("loc", ())],
            "msg": without_reprs(str(error.get("msg", ""))),
            "type": str(error.get("type", "")),
        }
        for error in errors
    ]


def problems_summary(problems: Iterable[Mapping[str, Any]]) -> str:
    """``loc: msg; loc: msg`` of :func:`validation_problems`' output, for an error message."""
    return "; ".join(f"{'.'.join(str(part) for part in p['loc'])}: {p['msg']}" for p in problems)


def _shown(value: str) -> str:
    return value if len(value) <= _SHOWN_CHARS else value[:_SHOWN_CHARS] + "…"
