"""The OpenAPI explorers at /docs (Swagger UI) and /redoc, with their assets served from the package.

FastAPI's defaults load Swagger UI and ReDoc from a CDN, so on a machine without internet (or behind a
proxy that blocks it) both pages stay blank. The bundles are vendored under ultron/api/static/ (from the
npm packages swagger-ui-dist 5.35.0 and redoc 2.5.4, their licences beside them) and ship in the wheel.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse, Response

from ultron.errors import NotFound

ASSET_PREFIX = "/docs/assets"
ASSETS = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui.css": "text/css",
    "redoc.standalone.js": "text/javascript",
    "favicon-32x32.png": "image/png",
    "swagger-ui-LICENSE.txt": "text/plain",
    "redoc-LICENSE.txt": "text/plain",
}

explorer = APIRouter(include_in_schema=False)


@explorer.get("/docs")
def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url="/openapi.json",
        title="Ultron API",
        swagger_js_url=f"{ASSET_PREFIX}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSET_PREFIX}/swagger-ui.css",
        swagger_favicon_url=f"{ASSET_PREFIX}/favicon-32x32.png",
        oauth2_redirect_url="/docs/oauth2-redirect",
    )


@explorer.get("/docs/oauth2-redirect")
def swagger_ui_redirect() -> HTMLResponse:
    return get_swagger_ui_oauth2_redirect_html()


@explorer.get("/redoc")
def redoc() -> HTMLResponse:
    return get_redoc_html(
        openapi_url="/openapi.json",
        title="Ultron API",
        redoc_js_url=f"{ASSET_PREFIX}/redoc.standalone.js",
        redoc_favicon_url=f"{ASSET_PREFIX}/favicon-32x32.png",
        with_google_fonts=False,  # fonts from the internet would break the page offline too
    )


@explorer.get(ASSET_PREFIX + "/{name}")
def asset(name: str) -> Response:
    # Only the listed names: a path from the URL never reaches the file system.
    media = ASSETS.get(name)
    if media is None:
        raise NotFound(f"no explorer asset {name!r}")
    body = resources.files("ultron.api").joinpath("static", name).read_bytes()
    # The bundles change only with the package version, which the page URL does not carry: a day is safe.
    return Response(body, media_type=media, headers={"Cache-Control": "public, max-age=86400"})
