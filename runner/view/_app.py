"""The viewer's ASGI app (Starlette): the page, its script and stylesheet, and a JSON API.

Imported only when a server or a test needs it (Starlette is the ``view`` extra).
"""

from __future__ import annotations

import secrets
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runner.view._assets import ASSETS, index_html
from runner.view._errors import NotFound, ViewError
from runner.view._model import CELL_COLUMNS, cell_rows, cell_view, run_summary
from runner.view._source import StoreSource
from runner.view._static import StaticStudy

__all__ = ["LOOPBACK_HOSTS", "build_app"]

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
_CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
_COOKIE = "ect_view_token"


class _TokenGate:
    """Require the start-up token (``?token=``, ``Authorization: Bearer`` or the cookie set
    when the page was opened with the token) on every request."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        given = (request.query_params.get("token")
                 or request.headers.get("authorization", "").removeprefix("Bearer ").strip()
                 or request.cookies.get(_COOKIE, ""))
        if not secrets.compare_digest(given.encode(), self.token.encode()):
            await Response("token required\n", status_code=401,
                           media_type="text/plain")(scope, receive, send)
            return
        if request.query_params.get("token"):
            async def send_cookie(message: Message) -> None:
                if message["type"] == "http.response.start":
                    cookie = f"{_COOKIE}={self.token}; HttpOnly; SameSite=Strict; Path=/"
                    message["headers"] = [*message["headers"],
                                          (b"set-cookie", cookie.encode("latin-1"))]
                await send(message)
            await self.app(scope, receive, send_cookie)
            return
        await self.app(scope, receive, send)


def _headers() -> dict[str, str]:
    return {"content-security-policy": _CSP, "x-content-type-options": "nosniff",
            "referrer-policy": "no-referrer", "cache-control": "no-store"}


def _json(obj: object, status: int = 200) -> JSONResponse:
    return JSONResponse(obj, status_code=status, headers=_headers())


def build_app(*, store: str | Path | None = None, static_dir: str | Path | None = None,
              token: str | None = None, allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS,
              ) -> Starlette:
    """The viewer over a run store (``store``) or over ``ect static`` output (``static_dir``).

    ``allowed_hosts`` is checked against the Host header (a page elsewhere cannot reach a
    loopback viewer through DNS rebinding); ``token``, when given, is required on every request.
    """
    if (store is None) == (static_dir is None):
        raise ValueError("build_app needs exactly one of store= and static_dir=")
    src = StoreSource(store) if store is not None else None
    study = StaticStudy(static_dir) if static_dir is not None else None
    if src is not None:
        src.cells()  # parse the committed records once, before the first page asks
    mode = "server-store" if src is not None else "server-static"

    def page(request: Request) -> Response:
        return Response(index_html(mode), media_type="text/html; charset=utf-8",
                        headers=_headers())

    def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:
            return Response("not found\n", status_code=404, media_type="text/plain")
        path, media = ASSETS[name]
        return FileResponse(path, media_type=media, headers=_headers())

    def api(request: Request) -> Response:
        what = request.path_params["what"]
        try:
            if src is not None:
                if what == "run":
                    return _json(run_summary(src, integrity=src.verify_cached()))
                if what == "cells":
                    return _json({"columns": list(CELL_COLUMNS), "rows": cell_rows(src)})
                if what.startswith("cell-") and what[5:].isdigit():
                    return _json(cell_view(src, int(what[5:])))
            elif study is not None:
                if what == "static":
                    return _json(study.summary())
                if what.startswith("snapshot-") and what[9:].isdigit():
                    return _json(study.snapshot(int(what[9:])))
            return _json({"error": f"unknown resource {what}"}, 404)
        except NotFound as e:
            return _json({"error": str(e)}, 404)
        except ViewError as e:
            return _json({"error": str(e)}, 500)

    def verify(request: Request) -> Response:
        if src is None:
            return _json({"error": "no store"}, 404)
        return _json(src.verify(full=True).to_json())

    routes = [
        Route("/", page),
        Route("/assets/{name}", asset),
        Route("/api/{what}", api),
        Route("/verify", verify, methods=["POST"]),
    ]
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))]
    if token is not None:
        middleware.append(Middleware(_TokenGate, token=token))
    return Starlette(routes=routes, middleware=middleware)
