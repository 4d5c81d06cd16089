"""What a PostgreSQL error means for a store: a lost connection, or an error the connection survives.

psycopg raises ``OperationalError`` for a lost connection and also for a lock or statement
timeout, a deadlock, a serialization failure or a full disk: those leave the connection
usable, so the call is rolled back and the connection kept, with a message that names the
cause (:func:`describe`), not "connection lost".
"""

from __future__ import annotations

import re

_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&']*)", re.I)
_USERINFO = re.compile(r"^([a-z][\w+.-]*://).*@", re.I)


def redact(target) -> str:
    """``target`` (a URL or a libpq ``key=value`` string) as text without its user and password."""
    return _USERINFO.sub(r"\1", _PASSWORD.sub(r"\1***", str(target)))


_USERINFO_IN = re.compile(r"\b([a-z][\w+.-]*:/{1,2})[^\s/@'\"]*@", re.I)


def redact_text(text: str) -> str:
    """A message with the user and password of every URL in it (``postgresql://user:pw@``, also as a
    path spells it, ``postgresql:/user:pw@``) and every libpq ``password=`` cut (:func:`redact`)."""
    return _USERINFO_IN.sub(r"\1", _PASSWORD.sub(r"\1***", text))


_SAFE_USERINFO = re.compile(r"(?:[\w.~!$&'()*+,;=:-]|%[0-9a-f]{2})*", re.I)
UNPARSED = ("the URL does not parse: percent-encode special characters of the user and password "
            "(urllib.parse.quote)")


def _edge(text: str, i: int) -> bool:
    """Whether ``i`` is not inside a word of ``text`` (a run may begin or end there)."""
    return i in (0, len(text)) or not (text[i - 1].isalnum() and text[i].isalnum())


def libpq_text(exc: BaseException, target) -> str:
    """libpq's message of ``exc`` with no fragment of ``target``'s user and password.

    libpq quotes the part of a URL it could not read, so a password with a space, a bare ``%``,
    ``@``, ``/``, ``?`` or ``#`` (not percent-encoded) shows up in it: every run of the text that
    also occurs in the URL's userinfo (everything between ``://`` and its last ``@``, raw or
    percent-decoded), of six or more characters, or of three or more not inside a word, is cut
    to ``***``, then :func:`redact_text`.  When a run was cut from a userinfo with such a
    character, the message says the URL does not parse (:data:`UNPARSED`)."""
    from urllib.parse import unquote

    text = str(exc).strip()
    match = _USERINFO.match(str(target))
    if match is None:
        return redact_text(text)
    info = match.group(0)[len(match.group(1)):]
    secrets = (info, unquote(info[:-1]))
    out, i, cut = [], 0, False
    while i < len(text):
        n = 0
        while i + n < len(text) and any(text[i:i + n + 1] in s for s in secrets):
            n += 1
        if n >= 6 or n >= 3 and _edge(text, i) and _edge(text, i + n):
            out.append("***")
            i, cut = i + n, True
        else:
            out.append(text[i])
            i += 1
    clean = redact_text("".join(out))
    if cut and _SAFE_USERINFO.fullmatch(info[:-1]) is None:
        return f"{UNPARSED} ({clean})"
    return clean


CREATE_LOCK = 0x68794D  # "hyM"
"""Key of the transaction-level advisory lock under which clients create the extension, the
tables and the client indexes (with ``hashtext(current_schema())`` where per schema)."""

_NOTHING = "; nothing of this call was committed (the connection is kept)"
_MESSAGES = {
    "55P03": "timed out waiting for a lock another client holds on the store (lock_timeout, or NOWAIT): it is "
             "writing; retry when its write ends",
    "57014": "the statement was canceled (statement_timeout, or a cancel request): retry, or raise the timeout",
    "40P01": "a deadlock with another client was detected and this call was chosen to fail: retry it",
    "40001": "a serialization failure (a concurrent transaction conflicted): retry the call",
    "53100": "the database server's disk is full: free space on the server, then retry",
    "53200": "the database server is out of memory: retry, or lower the call's size",
    "42501": "this role may not do that on the store's tables (insufficient privilege): open the store with "
             "read_only=True to only read it, or grant the role INSERT, UPDATE and DELETE on them",
}


def recreated_type(exc: BaseException) -> bool:
    """Whether ``exc`` says the server no longer knows a type by the OID this connection cached
    when it opened (pgvector's ``vector``, re-created by ``pg_restore --clean`` since): XX000
    "cache lookup failed for type N".  Only a new connection (which looks the OIDs up again) helps."""
    return getattr(exc, "sqlstate", None) == "XX000" and "cache lookup failed for type" in str(exc)


RECREATED = ("the server no longer knows a type by the id this connection cached when it opened (the vector "
             "extension was dropped and re-created, e.g. by pg_restore --clean); nothing of this call was "
             "committed; the connection was dropped and the next call opens a new one: retry")


def is_lost(exc: BaseException, con) -> bool:
    """Whether ``exc`` means the connection ``con`` is gone or useless (so the next call reconnects):
    lost, or holding type ids a restore made stale (:func:`recreated_type`)."""
    import psycopg

    if recreated_type(exc):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    if con is None or con.closed or con.broken:
        return True
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


def _privilege(text: str) -> str:
    """What an insufficient_privilege (42501) refused, by the server's message, and its fix."""
    low = text.lower()
    if "must be owner of" in low:
        return ("this role does not own the store's table or index, and only its owner may build, drop or alter "
                "them (build_ann_index, creating the client indexes): run that as the owner of the tables")
    if "permission denied for schema" in low or "permission denied for database" in low:
        return ("this role may not create in (or use) the schema or database: to create a store there, grant "
                "it CREATE on the schema (USAGE to use one), or open a store its owner created")
    return _MESSAGES["42501"]


def describe(exc: BaseException) -> str:
    """The message of an error the connection survives, by its sqlstate."""
    text = str(exc).strip()
    state = getattr(exc, "sqlstate", None) or ""
    what = _MESSAGES.get(state)
    if state == "42501":
        what = _privilege(text)
    if what is None and state.startswith("40"):
        what = _MESSAGES["40001"]
    if what is None and state.startswith("53"):
        what = "the database server is out of resources (disk, memory or connections): retry later"
    if what is None:
        return f"PostgreSQL storage: {text}"
    return f"PostgreSQL storage: {what} ({text}){_NOTHING}"
