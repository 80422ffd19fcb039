"""`rag-monitor review`: the review app's routes, security middleware and handlers (aiohttp).

Forms are parsed in `monitor.review.forms`, tokens in `monitor.review.auth`, the HTML
in `monitor.review.pages`. See docs/review.md ("The review page", "Security").
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from importlib import resources
from typing import Any, cast
from urllib.parse import urlsplit

import structlog
from aiohttp import web

from monitor.backlog.calibration import Calibration
from monitor.backlog.reviews import ReviewProblem
from monitor.backlog.rows import STATUSES, BacklogRow, JudgeCount
from monitor.backlog.store import BacklogStore, StoreError
from monitor.flags import FLAG_REASONS
from monitor.review import pages
from monitor.review.auth import check_access, reviewer_of
from monitor.review.forms import (
    DEFAULT_LIMIT,
    Invalid,
    ReviewInput,
    decode_cursor,
    encode_cursor,
    parse_filters,
    parse_form,
    parse_limit,
    parse_review,
)

log = structlog.get_logger("monitor.review.app")

COOKIE = "rag_monitor_review"
CALIBRATION_TTL = 15.0
LOCAL_REVIEWER = "local"

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
    def __init__(self, store: BacklogStore, *, tokens: Mapping[str, str] | None = None) -> None:
        self.store = store
        self.tokens = dict(tokens or {})
        self._csrf_key = secrets.token_bytes(32)
        self._calibration: tuple[float, Calibration] | None = None
        self._judges: tuple[float, list[JudgeCount]] | None = None
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
        check_access(host, self.tokens)
        self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = cast(Any, site._server)  # the bound port, when 0 was asked for
        self.port = server.sockets[0].getsockname()[1] if server and server.sockets else port
        log.info(
            "review app listening",
            host=host,
            port=self.port,
            reviewers=len(self.tokens),
            access="tokens" if self.tokens else "loopback, no tokens",
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
        return reviewer_of(self.tokens, supplied) if supplied else None

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
            return web.Response(text=body, status=401, content_type="text/html", headers=headers)
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
        except StoreError as exc:
            log.warning("review request failed", error=str(exc))
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
            if browser and not bearer and not hmac.compare_digest(token, self.csrf_token(reviewer)):
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
        status, reason, route, order = parse_filters(q)
        cursor = q.get("cursor") or None
        after = decode_cursor(cursor, order) if cursor else None
        items = await self.store.queue(
            status=status,
            reason=reason,
            route=route,
            order=order,
            limit=DEFAULT_LIMIT + 1,
            after=after,
        )
        more = len(items) > DEFAULT_LIMIT
        items = items[:DEFAULT_LIMIT]
        next_cursor = encode_cursor(items[-1].sort_key(order), items[-1].id) if more else None
        counts = await self.store.status_counts()
        reasons = list(FLAG_REASONS)
        return _html(
            pages.queue_page(
                items,
                counts,
                status=status,
                reason=reason,
                route=route,
                order=order,
                next_cursor=next_cursor,
                reasons=reasons,
                judges=await self._judged(),
            )
        )

    async def _render_row(
        self, request: web.Request, row: BacklogRow, *, status: int = 200, **extra: Any
    ) -> web.Response:
        status_filter = request.query.get("status") or None
        if status_filter not in (None, *STATUSES):
            status_filter = None
        newer, older = await self.store.neighbours(row.id, status=status_filter)
        reviewer = request[REVIEWER]
        body = pages.row_page(
            row,
            csrf=self.csrf_token(reviewer),
            status_filter=status_filter,
            newer=newer,
            older=older,
            reviewer=reviewer,
            **extra,
        )
        return _html(body, status)

    async def row_page(self, request: web.Request) -> web.StreamResponse:
        row = await self.store.get(request.match_info["id"])
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
            row = await self.store.get(row_id)
            if row is None:
                return _html(pages.error_page(404, "No such row."), 404)
            return await self._render_row(
                request,
                row,
                status=422,
                banner=pages.esc(f"{exc.field}: {exc}"),
                banner_kind="error",
                **draft,
            )
        try:
            version = await self._apply(row_id, review, reviewer)
        except ReviewProblem as exc:
            row = await self.store.get(row_id)
            if row is None:
                return _html(pages.error_page(404, "No such row."), 404)
            if exc.kind == "stale":
                return await self._render_row(
                    request,
                    row,
                    status=409,
                    banner=pages.conflict_banner(row),
                    banner_kind="conflict",
                    chosen=chosen,
                    **draft,
                )
            code = 409 if exc.kind == "conflict" else 422
            return await self._render_row(
                request,
                row,
                status=code,
                banner=pages.esc(str(exc)),
                banner_kind="error",
                chosen=chosen,
                **draft,
            )
        status_filter = request.query.get("status")
        _, older = await self.store.neighbours(row_id, status=status_filter or None)
        suffix = f"?status={pages.url(status_filter)}" if status_filter in STATUSES else ""
        target = (
            f"/rows/{pages.url(older)}{suffix}"
            if older
            else f"/rows/{pages.url(row_id)}?saved={version}"
        )
        raise web.HTTPSeeOther(target)

    async def calibration_page(self, request: web.Request) -> web.StreamResponse:
        return _html(
            pages.calibration_page(
                await self._calibrated(), await self._judged(), self.store.hallucination_rule
            )
        )

    async def login_page(self, request: web.Request) -> web.StreamResponse:
        return _html(pages.login_page(self.csrf_token("login")))

    async def login_post(self, request: web.Request) -> web.StreamResponse:
        if not self._same_origin(request):
            return _json({"error": "cross-origin post refused"}, 403)
        form = await self._form(request, "login")
        token = form.get("token", "")
        name = reviewer_of(self.tokens, token)
        if name is None:
            return _html(pages.login_page(self.csrf_token("login"), "Unknown token."), 401)
        response = web.HTTPSeeOther("/")
        response.set_cookie(
            COOKIE,
            token,
            httponly=True,
            samesite="Strict",
            path="/",
            secure=request.secure,
        )
        log.info("reviewer signed in", reviewer=name)
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
            status, reason, route, order = parse_filters(q)
            limit = parse_limit(q)
            cursor = q.get("cursor") or None
            after = decode_cursor(cursor, order) if cursor else None
        except Invalid as exc:
            return _json({"error": str(exc), "field": exc.field}, 422)
        items = await self.store.queue(
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
                        "risk": None if i.risk < 0 else i.risk,
                        "flagged_by": i.flagged_by(),
                        "version": i.version,
                        "created_at": i.created_at.isoformat(),
                    }
                    for i in items
                ],
                "next": encode_cursor(items[-1].sort_key(order), items[-1].id) if more else None,
            }
        )

    async def api_row(self, request: web.Request) -> web.StreamResponse:
        row = await self.store.get(request.match_info["id"])
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
            row = await self.store.get(row_id)
            body: dict[str, Any] = {"error": str(exc), "field": exc.field}
            if row is not None:
                body["row"] = row_json(row)
                body["version"] = row.version
            return _json(body, 409)
        return _json({"id": row_id, "version": version})

    async def api_calibration(self, request: web.Request) -> web.StreamResponse:
        judges = [j.as_json() for j in await self._judged()]
        return _json({**(await self._calibrated()).as_json(), "judges": judges})

    # --- shared

    async def _apply(self, row_id: str, review: ReviewInput, reviewer: str) -> int:
        version = await self.store.review(
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
            self._calibration = (now, await self.store.calibration())
        return self._calibration[1]

    async def _judged(self) -> list[JudgeCount]:
        """The judges that scored the backlog's answers (read at most every CALIBRATION_TTL)."""
        now = time.monotonic()
        if self._judges is None or now - self._judges[0] > CALIBRATION_TTL:
            self._judges = (now, await self.store.judges())
        return self._judges[1]


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
