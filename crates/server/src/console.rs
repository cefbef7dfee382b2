//! The review console: a small browser application served at `/console/`,
//! its three files embedded in the binary (no CDN, nothing fetched: it works
//! offline). It holds no data of its own: every figure it shows comes from
//! the documented JSON API, called with the API key the person enters
//! (kept in the tab's `sessionStorage`, sent as `Authorization: Bearer`;
//! no cookies, so no CSRF surface).
//!
//! Every response carries a strict Content-Security-Policy: scripts and
//! styles only from this origin, no inline script or style, no plugins, no
//! framing, requests only to this origin. The script builds the page with
//! DOM calls and `textContent`, never HTML strings, so an item's content
//! and id — hostile input — render as text.

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, LOCATION};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::error::{ApiError, GatewayKind};

/// The Content-Security-Policy of every console response.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                       connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// `(name, content type, body)` of each embedded file.
const FILES: &[(&str, &str, &str)] = &[
    ("index.html", "text/html; charset=utf-8", include_str!("../console/index.html")),
    ("console.js", "text/javascript; charset=utf-8", include_str!("../console/console.js")),
    ("console.css", "text/css; charset=utf-8", include_str!("../console/console.css")),
];

fn secured(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert(HeaderName::from_static("content-security-policy"), HeaderValue::from_static(CSP));
    h.insert(HeaderName::from_static("x-content-type-options"), HeaderValue::from_static("nosniff"));
    h.insert(HeaderName::from_static("x-frame-options"), HeaderValue::from_static("DENY"));
    h.insert(HeaderName::from_static("referrer-policy"), HeaderValue::from_static("no-referrer"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

fn file(name: &str) -> Response {
    match FILES.iter().find(|(n, _, _)| *n == name) {
        Some((_, kind, body)) => secured(([(CONTENT_TYPE, *kind)], *body).into_response()),
        None => secured(ApiError::gateway(GatewayKind::RouteNotFound).into_response()),
    }
}

/// `GET /console`: the console lives under `/console/` (relative asset paths).
pub(crate) async fn redirect() -> Response {
    secured((StatusCode::PERMANENT_REDIRECT, [(LOCATION, "/console/")]).into_response())
}

/// `GET /console/`: the page.
pub(crate) async fn index() -> Response {
    file("index.html")
}

/// `GET /console/{file}`: its script and style sheet.
pub(crate) async fn asset(axum::extract::Path(name): axum::extract::Path<String>) -> Response {
    file(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No file may need what the policy forbids: inline scripts or styles,
    /// event-handler attributes, outside origins, or HTML built from strings.
    #[test]
    fn the_embedded_files_keep_to_the_policy() {
        let html = FILES[0].2;
        assert!(html.contains("<script src=\"console.js\"></script>"), "{html}");
        assert!(!html.contains("<style") && !html.contains("style="), "inline style");
        // No event-handler attribute (` onclick=`, ` onload=`, ...).
        for (at, _) in html.match_indices(" on") {
            let name: String = html[at + 3..].chars().take_while(char::is_ascii_alphabetic).collect();
            assert!(!html[at + 3 + name.len()..].starts_with('='), "a handler attribute: on{name}");
        }
        for (name, _, body) in FILES {
            // The one URL allowed is SVG's namespace name, which is never fetched.
            let body = body.replace("http://www.w3.org/2000/svg", "");
            assert!(
                !body.contains("http://") && !body.contains("https://") && !body.contains("//cdn"),
                "{name}: an outside URL"
            );
        }
        let js = FILES[1].2;
        for banned in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
            "setAttribute('style'",
            "localStorage",
        ] {
            assert!(!js.contains(banned), "console.js uses {banned}");
        }
    }
}
