"""`rag-monitor review`: the golden-set backlog in a browser, and the JSON API behind it.

Built on aiohttp's server: it is installed already (openai[aiohttp] pulls it),
it runs on the same asyncio loop as the asyncpg pool, and it needs no ASGI
server next to it.

Pages (server-rendered HTML, one small script, no build step; saving works
without JavaScript):

- ``GET /`` the queue; ``GET /rows/{id}`` a row with its answers and the review
  form, posted to ``POST /rows/{id}``; ``GET /calibration`` the judge's accuracy.

API (the page's script saves through it too):

- ``GET /api/rows?status=&reason=&route=&order=&limit=&cursor=`` →
  ``{"rows": [...], "next": cursor | null}`` (keyset pagination);
- ``GET /api/rows/{id}``; ``POST /api/rows/{id}/review`` → 200
  ``{"version": n}``, 409 when the version is stale (with the row as it is now),
  422 ``{"error", "field"}`` on bad input; ``GET /api/calibration``.

Security: on a loopback address without tokens anyone local may review (as
``local``). With ``RAG_MONITOR_REVIEW_TOKENS`` (``name:token`` pairs) every
request needs ``Authorization: Bearer <token>`` or the cookie set by
``/login``, else 401; the name is recorded as the reviewer. A non-loopback
address without tokens is refused at start. Form posts carry a CSRF token (an
HMAC of the reviewer under a per-process key) and must come from the same
origin; API posts must be JSON (a cross-site page cannot send that without a
CORS preflight, which is never granted) and, from a browser (an ``Origin``
header or the sign-in cookie) without a bearer token, carry the CSRF token as
``X-CSRF-Token``. Every stored text is HTML-escaped, the CSP
forbids inline script, and only the redacted text the backlog holds is shown.
Nothing secret is logged (no tokens, no interaction text; aiohttp's access log
is off).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import json
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from typing import Any, cast
from urllib.parse import urlsplit

from aiohttp import web

from monitor.review import pages
from monitor.review.calibration import VERDICTS, Calibration
from monitor.sinks import SinkError
from monitor.sinks.backlog import (
    QUEUE_ORDERS,
    STATUSES,
    BacklogRow,
    BacklogSink,
    QueueOrder,
    ReviewProblem,
    VerdictInput,
)

log = logging.getLogger(__name__)

COOKIE = "rag_monitor_review"
MAX_LIMIT = 200
DEFAULT_LIMIT = 50
MAX_TEXT = 20_000
CALIBRATION_TTL = 15.0
LOCAL_REVIEWER = "local"
_NAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")
_REASON = re.compile(r"[a-z_]{1,40}")

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';"
        " connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    # same-origin: a browser then sends the real Origin on our own form posts (not "null")
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}

REVIEWER = web.RequestKey("reviewer", str)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class TokenError(ValueError):
    """RAG_MONITOR_REVIEW_TOKENS is malformed (the message never holds a token)."""


def parse_tokens(text: str | None) -> dict[str, str]:
    """``name:token`` pairs (comma or whitespace separated) → {token: name}."""
    tokens: dict[str, str] = {}
    for n, pair in enumerate(re.split(r"[,\s]+", (text or "").strip()), start=1):
        if not pair:
            continue
        name, sep, token = pair.partition(":")
        if not sep or not _NAME.fullmatch(name):
            raise TokenError(f"RAG_MONITOR_REVIEW_TOKENS pair {n}: expected name:token")
        if len(token) < 16:
            raise TokenError(
                f"RAG_MONITOR_REVIEW_TOKENS pair {n} ({name}): the token needs 16+ characters"
            )
        if token in tokens:
            raise TokenError(f"RAG_MONITOR_REVIEW_TOKENS pair {n} ({name}): a repeated token")
        tokens[token] = name
    return tokens


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# --- cursors


def encode_cursor(key: Any, row_id: str) -> str:
    value = key.isoformat() if isinstance(key, datetime) else key
    raw = json.dumps([value, row_id], separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str, order: QueueOrder) -> tuple[Any, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key, row_id = json.loads(raw)
        if not isinstance(row_id, str):
            raise ValueError("id")
        if order == "newest":
            return datetime.fromisoformat(key), row_id
        if not isinstance(key, int):
            raise ValueError("key")
        return key, row_id
    except (ValueError, TypeError, binascii.Error, json.JSONDecodeError) as exc:
        raise Invalid("cursor", "not a cursor this API returned") from exc


# --- input


class Invalid(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ReviewInput:
    version: int
    reference: str | None
    verdicts: tuple[VerdictInput, ...]
    note: str | None
    discard: bool


def _text(data: Mapping[str, Any], name: str) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid(name, f"{name} must be a string")
    if len(value) > MAX_TEXT:
        raise Invalid(name, f"{name} is longer than {MAX_TEXT} characters")
    return value


def parse_review(data: object) -> ReviewInput:
    """The JSON body of ``POST /api/rows/{id}/review``; Invalid names the bad field."""
    if not isinstance(data, dict):
        raise Invalid("body", "the body must be a JSON object")
    unknown = set(data) - {"version", "reference", "verdicts", "note", "discard"}
    if unknown:
        raise Invalid(sorted(unknown)[0], f"unknown field {sorted(unknown)[0]!r}")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise Invalid("version", "version must be the row's version (a positive integer)")
    discard = data.get("discard", False)
    if not isinstance(discard, bool):
        raise Invalid("discard", "discard must be true or false")
    raw = data.get("verdicts", [])
    if not isinstance(raw, list):
        raise Invalid("verdicts", "verdicts must be a list")
    verdicts: list[VerdictInput] = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise Invalid(f"verdicts[{i}]", "a verdict is an object")
        answer = item.get("interaction_id")
        if not isinstance(answer, str) or not answer:
            raise Invalid(f"verdicts[{i}].interaction_id", "interaction_id must be a string")
        reason = item.get("reason")
        if not isinstance(reason, str) or not _REASON.fullmatch(reason):
            raise Invalid(f"verdicts[{i}].reason", "reason must be a flag reason")
        verdict = item.get("verdict")
        if verdict not in VERDICTS:
            raise Invalid(f"verdicts[{i}].verdict", f"verdict must be one of {', '.join(VERDICTS)}")
        verdicts.append(VerdictInput(reason=reason, verdict=verdict, interaction_id=answer))
    return ReviewInput(
        version=version,
        reference=_text(data, "reference"),
        verdicts=tuple(verdicts),
        note=_text(data, "note"),
        discard=discard,
    )


def parse_form(form: Mapping[str, str]) -> tuple[ReviewInput, dict[tuple[str, str], str]]:
    """The row page's form as a review (and the verdicts chosen, to redisplay on errors)."""
    try:
        version = int(form.get("version", ""))
    except ValueError as exc:
        raise Invalid("version", "version must be an integer") from exc
    answers = {
        key.removeprefix("answer-"): value
        for key, value in form.items()
        if key.startswith("answer-")
    }
    chosen: dict[tuple[str, str], str] = {}
    verdicts: list[dict[str, str]] = []
    for key, value in form.items():
        match = re.fullmatch(r"verdict-(\d+)-([a-z_]+)", key)
        if match is None or not value:
            continue
        answer = answers.get(match.group(1))
        if answer is None:
            raise Invalid(key, "a verdict for an answer the form did not show")
        chosen[(answer, match.group(2))] = value
        verdicts.append({"interaction_id": answer, "reason": match.group(2), "verdict": value})
    data: dict[str, Any] = {
        "version": version,
        "reference": form.get("reference"),
        "note": form.get("note"),
        "verdicts": verdicts,
        "discard": form.get("action") == "discard",
    }
    return parse_review(data), chosen


def row_json(row: BacklogRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "version": row.version,
        "status": row.status,
        "question": row.user_input,
        "reference": row.reference,
        "note": row.review_note,
        "route": row.route,
        "reasons": row.reasons,
        "seen_count": row.seen_count,
        "redactions": row.redactions,
        "created_at": row.created_at.isoformat(),
        "updated_at": row.updated_at.isoformat(),
        "contexts": row.answers[0].contexts if row.answers else [],
        "answers": [a.as_json() for a in row.answers],
    }


# --- the app


class ReviewApp:
    def __init__(self, sink: BacklogSink, *, tokens: Mapping[str, str] | None = None) -> None:
        self.sink = sink
        self.tokens = dict(tokens or {})
        self._csrf_key = secrets.token_bytes(32)
        self._calibration: tuple[float, Calibration] | None = None
        self.app = web.Application(middlewares=[self._security], client_max_size=256 * 1024)
        r = self.app.router
        r.add_get("/", self.queue_page)
        r.add_get("/rows/{id}", self.row_page)
        r.add_post("/rows/{id}", self.row_post)
        r.add_get("/calibration", self.calibration_page)
        r.add_get("/login", self.login_page)
        r.add_post("/login", self.login_post)
        r.add_get("/api/rows", self.api_rows)
        r.add_get("/api/rows/{id}", self.api_row)
        r.add_post("/api/rows/{id}/review", self.api_review)
        r.add_get("/api/calibration", self.api_calibration)
        r.add_get("/static/{name}", self.static)
        r.add_get("/healthz", self.healthz)
        self._runner: web.AppRunner | None = None
        self.port = 0

    # --- serving

    async def start(self, host: str, port: int) -> None:
        if not self.tokens and not is_loopback(host):
            raise TokenError(
                f"refusing to listen on {host} without RAG_MONITOR_REVIEW_TOKENS"
                " (only a loopback address may go without tokens)"
            )
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = cast(Any, site._server)  # the bound port, when 0 was asked for
        self.port = server.sockets[0].getsockname()[1] if server and server.sockets else port
        log.info(
            "review app listening on %s:%d (%s)", host, self.port,
            f"{len(self.tokens)} reviewer token(s)" if self.tokens else "loopback, no tokens",
        )

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    # --- security

    def csrf_token(self, reviewer: str) -> str:
        return hmac.new(self._csrf_key, reviewer.encode("utf-8"), hashlib.sha256).hexdigest()

    def _reviewer(self, request: web.Request) -> str | None:
        if not self.tokens:
            return LOCAL_REVIEWER
        header = request.headers.get("Authorization", "")
        supplied = header[7:].strip() if header[:7].lower() == "bearer " else None
        if supplied is None:
            supplied = request.cookies.get(COOKIE)
        if not supplied:
            return None
        found = None
        for token, name in self.tokens.items():  # compare with every token, in constant time
            if hmac.compare_digest(token.encode("utf-8"), supplied.encode("utf-8")):
                found = name
        return found

    @staticmethod
    def _same_origin(request: web.Request) -> bool:
        origin = request.headers.get("Origin") or request.headers.get("Referer")
        if not origin:
            return True  # not a browser's cross-site post (browsers send Origin on POST)
        return urlsplit(origin).netloc == request.host

    @web.middleware
    async def _security(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await self._guarded(request, handler)
        except web.HTTPException as exc:  # redirects, 403 on a bad CSRF field, 404
            for name, value in SECURITY_HEADERS.items():
                exc.headers.setdefault(name, value)
            raise
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response

    async def _guarded(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        path = request.path
        if path.startswith("/static/") or path == "/healthz" or path == "/login":
            return await handler(request)
        reviewer = self._reviewer(request)
        if reviewer is None:
            headers = {"WWW-Authenticate": 'Bearer realm="rag-monitor review"'}
            if path.startswith("/api/"):
                return _json({"error": "a valid bearer token is required"}, 401, headers)
            body = pages.error_page(401, "Sign in first: /login, or send a bearer token.")
            return web.Response(
                text=body, status=401, content_type="text/html", headers=headers
            )
        request[REVIEWER] = reviewer
        if request.method == "POST":
            problem = self._post_problem(request, reviewer)
            if problem is not None:
                return _json({"error": problem}, 403)
        try:
            return await handler(request)
        except Invalid as exc:
            if path.startswith("/api/"):
                return _json({"error": str(exc), "field": exc.field}, 422)
            return _html(pages.error_page(422, f"{exc.field}: {exc}"), 422)
        except SinkError as exc:
            log.warning("review request failed: %s", exc)
            if path.startswith("/api/"):
                return _json({"error": "the backlog is unavailable"}, 503)
            return _html(pages.error_page(503, "The backlog is unavailable."), 503)

    def _post_problem(self, request: web.Request, reviewer: str) -> str | None:
        if not self._same_origin(request):
            return "cross-origin post refused"
        if request.path.startswith("/api/"):
            if request.content_type != "application/json":
                return "the body must be application/json"
            bearer = request.headers.get("Authorization", "")[:7].lower() == "bearer "
            # a browser (it sends Origin on every POST, and our cookie if signed in) must
            # show the page's CSRF token; a script sends neither, or a bearer token
            browser = "Origin" in request.headers or COOKIE in request.cookies
            token = request.headers.get("X-CSRF-Token", "")
            if (
                browser
                and not bearer
                and not hmac.compare_digest(token, self.csrf_token(reviewer))
            ):
                return "missing or wrong X-CSRF-Token"
        return None  # form posts check their csrf field once the body is read

    async def _form(self, request: web.Request, reviewer: str) -> Mapping[str, str]:
        form = await request.post()
        csrf = form.get("csrf")
        if not isinstance(csrf, str) or not hmac.compare_digest(csrf, self.csrf_token(reviewer)):
            raise web.HTTPForbidden(text="missing or wrong CSRF token")
        return {k: v for k, v in form.items() if isinstance(v, str)}

    # --- pages

    async def queue_page(self, request: web.Request) -> web.StreamResponse:
        q = request.query
        status, reason, route, order = self._filters(q)
        cursor = q.get("cursor") or None
        after = decode_cursor(cursor, order) if cursor else None
        items = await self.sink.queue(
            status=status, reason=reason, route=route, order=order, limit=DEFAULT_LIMIT + 1,
            after=after,
        )
        more = len(items) > DEFAULT_LIMIT
        items = items[:DEFAULT_LIMIT]
        next_cursor = encode_cursor(items[-1].sort_key(order), items[-1].id) if more else None
        counts = await self.sink.status_counts()
        reasons = ["hallucination", "low_relevancy", "low_utility", "noncommittal", "control"]
        return _html(
            pages.queue_page(
                items, counts, status=status, reason=reason, route=route, order=order,
                next_cursor=next_cursor, reasons=reasons,
            )
        )

    @staticmethod
    def _filters(q: Mapping[str, str]) -> tuple[str | None, str | None, str | None, QueueOrder]:
        status = q.get("status") or None
        if status is not None and status not in STATUSES:
            raise Invalid("status", f"status must be one of {', '.join(STATUSES)}")
        reason = q.get("reason") or None
        if reason is not None and not _REASON.fullmatch(reason):
            raise Invalid("reason", "reason must be a flag reason")
        order = q.get("order") or "newest"
        if order not in QUEUE_ORDERS:
            raise Invalid("order", f"order must be one of {', '.join(QUEUE_ORDERS)}")
        route = q.get("route") or None
        return status, reason, route, order

    async def _render_row(
        self, request: web.Request, row: BacklogRow, *, status: int = 200, **extra: Any
    ) -> web.Response:
        status_filter = request.query.get("status") or None
        if status_filter not in (None, *STATUSES):
            status_filter = None
        newer, older = await self.sink.neighbours(row.id, status=status_filter)
        reviewer = request[REVIEWER]
        body = pages.row_page(
            row, csrf=self.csrf_token(reviewer), status_filter=status_filter, newer=newer,
            older=older, reviewer=reviewer, **extra,
        )
        return _html(body, status)

    async def row_page(self, request: web.Request) -> web.StreamResponse:
        row = await self.sink.get(request.match_info["id"])
        if row is None:
            return _html(pages.error_page(404, "No such row."), 404)
        saved = request.query.get("saved")
        banner = f"Saved (version {pages.esc(saved)})." if saved else None
        return await self._render_row(request, row, banner=banner)

    async def row_post(self, request: web.Request) -> web.StreamResponse:
        reviewer = request[REVIEWER]
        form = await self._form(request, reviewer)
        row_id = request.match_info["id"]
        draft = {"draft_reference": form.get("reference"), "draft_note": form.get("note")}
        try:
            review, chosen = parse_form(form)
        except Invalid as exc:
            row = await self.sink.get(row_id)
            if row is None:
                return _html(pages.error_page(404, "No such row."), 404)
            return await self._render_row(
                request, row, status=422, banner=pages.esc(f"{exc.field}: {exc}"),
                banner_kind="error", **draft,
            )
        try:
            version = await self._apply(row_id, review, reviewer)
        except ReviewProblem as exc:
            row = await self.sink.get(row_id)
            if row is None:
                return _html(pages.error_page(404, "No such row."), 404)
            if exc.kind == "stale":
                return await self._render_row(
                    request, row, status=409, banner=pages.conflict_banner(row),
                    banner_kind="conflict", chosen=chosen, **draft,
                )
            code = 409 if exc.kind == "conflict" else 422
            return await self._render_row(
                request, row, status=code, banner=pages.esc(str(exc)), banner_kind="error",
                chosen=chosen, **draft,
            )
        status_filter = request.query.get("status")
        _, older = await self.sink.neighbours(row_id, status=status_filter or None)
        suffix = f"?status={pages.url(status_filter)}" if status_filter in STATUSES else ""
        target = (
            f"/rows/{pages.url(older)}{suffix}" if older else f"/rows/{pages.url(row_id)}"
            f"?saved={version}"
        )
        raise web.HTTPSeeOther(target)

    async def calibration_page(self, request: web.Request) -> web.StreamResponse:
        return _html(pages.calibration_page(await self._calibrated()))

    async def login_page(self, request: web.Request) -> web.StreamResponse:
        return _html(pages.login_page(self.csrf_token("login")))

    async def login_post(self, request: web.Request) -> web.StreamResponse:
        if not self._same_origin(request):
            return _json({"error": "cross-origin post refused"}, 403)
        form = await self._form(request, "login")
        token = form.get("token", "")
        name = None
        for known, who in self.tokens.items():
            if hmac.compare_digest(known.encode("utf-8"), token.encode("utf-8")):
                name = who
        if name is None:
            return _html(pages.login_page(self.csrf_token("login"), "Unknown token."), 401)
        response = web.HTTPSeeOther("/")
        response.set_cookie(
            COOKIE, token, httponly=True, samesite="Strict", path="/",
            secure=request.secure,
        )
        log.info("reviewer %s signed in", name)
        raise response

    async def static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        types = {"review.js": "text/javascript", "review.css": "text/css"}
        if name not in types:
            raise web.HTTPNotFound()
        text = resources.files("monitor.review").joinpath("static", name).read_text("utf-8")
        return web.Response(text=text, content_type=types[name])

    async def healthz(self, request: web.Request) -> web.StreamResponse:
        return web.Response(text="ok\n")

    # --- API

    async def api_rows(self, request: web.Request) -> web.StreamResponse:
        q = request.query
        try:
            status, reason, route, order = self._filters(q)
            try:
                limit = int(q.get("limit", DEFAULT_LIMIT))
            except ValueError as exc:
                raise Invalid("limit", "limit must be an integer") from exc
            if not 1 <= limit <= MAX_LIMIT:
                raise Invalid("limit", f"limit must be between 1 and {MAX_LIMIT}")
            cursor = q.get("cursor") or None
            after = decode_cursor(cursor, order) if cursor else None
        except Invalid as exc:
            return _json({"error": str(exc), "field": exc.field}, 422)
        items = await self.sink.queue(
            status=status, reason=reason, route=route, order=order, limit=limit + 1, after=after
        )
        more = len(items) > limit
        items = items[:limit]
        return _json(
            {
                "rows": [
                    {
                        "id": i.id,
                        "status": i.status,
                        "question": i.question,
                        "reasons": i.reasons,
                        "route": i.route,
                        "seen_count": i.seen_count,
                        "answers": i.answers,
                        "verdicts": i.verdicts,
                        "version": i.version,
                        "created_at": i.created_at.isoformat(),
                    }
                    for i in items
                ],
                "next": encode_cursor(items[-1].sort_key(order), items[-1].id) if more else None,
            }
        )

    async def api_row(self, request: web.Request) -> web.StreamResponse:
        row = await self.sink.get(request.match_info["id"])
        if row is None:
            return _json({"error": "no such row"}, 404)
        return _json(row_json(row))

    async def api_review(self, request: web.Request) -> web.StreamResponse:
        try:
            data = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _json({"error": "the body is not JSON", "field": "body"}, 422)
        try:
            review = parse_review(data)
        except Invalid as exc:
            return _json({"error": str(exc), "field": exc.field}, 422)
        row_id = request.match_info["id"]
        try:
            version = await self._apply(row_id, review, request[REVIEWER])
        except ReviewProblem as exc:
            if exc.kind == "not_found":
                return _json({"error": "no such row"}, 404)
            if exc.kind == "invalid":
                return _json({"error": str(exc), "field": exc.field}, 422)
            row = await self.sink.get(row_id)
            body: dict[str, Any] = {"error": str(exc), "field": exc.field}
            if row is not None:
                body["row"] = row_json(row)
                body["version"] = row.version
            return _json(body, 409)
        return _json({"id": row_id, "version": version})

    async def api_calibration(self, request: web.Request) -> web.StreamResponse:
        return _json((await self._calibrated()).as_json())

    # --- shared

    async def _apply(self, row_id: str, review: ReviewInput, reviewer: str) -> int:
        version = await self.sink.review(
            row_id,
            version=review.version,
            reviewer=reviewer,
            reference=review.reference,
            verdicts=review.verdicts,
            note=review.note,
            discard=review.discard,
        )
        self._calibration = None
        return version

    async def _calibrated(self) -> Calibration:
        now = time.monotonic()
        if self._calibration is None or now - self._calibration[0] > CALIBRATION_TTL:
            self._calibration = (now, await self.sink.calibration())
        return self._calibration[1]


def _json(
    data: object, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.Response(
        text=json.dumps(data, ensure_ascii=False, default=str),
        status=status,
        content_type="application/json",
        headers=headers,
    )


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html")
