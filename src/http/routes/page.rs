//! The participant web page: `/interview/{public_slug}` starts (or, in the same browser,
//! resumes) an interview; `/interview/s/{session_id}` reopens one. Plain HTML, CSS and JS
//! compiled into the binary; the page talks to the same REST routes and event stream as any
//! other client.

use actix_web::{get, web, HttpRequest, HttpResponse};
use interview_projections::read;
use serde_json::json;

use crate::command::studies;
use crate::http::error::ApiError;
use crate::state::AppState;

const PAGE: &str = include_str!("../../../web/index.html");
/// The page's script as written: web/page/'s files joined in order into one classic script (one
/// request, one scope; `strings.js` says which file holds what). Served as [`served_script`].
const SCRIPT: &str = concat!(
    include_str!("../../../web/page/strings.js"),
    include_str!("../../../web/page/basics.js"),
    include_str!("../../../web/page/stream.js"),
    include_str!("../../../web/page/widgets.js"),
    include_str!("../../../web/page/end.js"),
    include_str!("../../../web/page/start.js"),
);
const STYLE: &str = include_str!("../../../web/app.css");
const ICON: &str = include_str!("../../../web/icon.svg");

/// The script as served: without its comment lines, indentation and blank lines — a quarter
/// fewer bytes on the wire, gzipped, and nothing a browser runs differently. (Safe because no
/// string in the script spans lines: a line that starts with `//` is always a comment.)
fn served_script() -> &'static str {
    static SERVED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SERVED.get_or_init(|| {
        SCRIPT
            .lines()
            .map(str::trim_start)
            .filter(|line| !line.is_empty() && !line.starts_with("//"))
            .fold(String::with_capacity(SCRIPT.len()), |mut out, line| {
                out.push_str(line);
                out.push('\n');
                out
            })
    })
}

/// Changes whenever the assets do, so browsers never mix an old script with a new page.
fn version() -> &'static str {
    static VERSION: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    VERSION.get_or_init(|| {
        interview_session::hash::sha256_hex(format!("{SCRIPT}{STYLE}").as_bytes())[..12].to_string()
    })
}

/// The page's security headers. The page runs only its own script (the boot data is a JSON data
/// block, which is never executed), loads only its own assets and talks only to its own origin.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'";

/// Text for an HTML element's content or a quoted attribute value.
fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON safe inside `<script type="application/json">`: no `<` (so no `</script>` or `<!--`),
/// `>` or `&`, and no U+2028/U+2029 (line breaks to older JavaScript parsers); each becomes its
/// `\uXXXX` escape, which JSON.parse reads back to the same text.
fn script_safe_json(value: &serde_json::Value) -> String {
    let mut out = String::new();
    for c in value.to_string().chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// Fills the page's `{{name}}` placeholders in one pass over the template, so nothing a value
/// contains (a study title holding `{{boot}}`, say) is ever read as a placeholder.
fn render(template: &str, value_of: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(template.len() + 1024);
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let Some(len) = rest[start + 2..].find("}}") else {
            break;
        };
        let name = &rest[start + 2..start + 2 + len];
        out.push_str(&rest[..start]);
        match value_of(name) {
            Some(value) => out.push_str(&value),
            None => out.push_str(&rest[start..start + 4 + len]),
        }
        rest = &rest[start + 4 + len..];
    }
    out.push_str(rest);
    out
}

fn page(req: &HttpRequest, boot: serde_json::Value) -> HttpResponse {
    let title = boot["title"].as_str().unwrap_or("Interview");
    let locale = boot["locale"].as_str().unwrap_or("en");
    let html = render(PAGE, |name| match name {
        "lang" => Some(escape_html(locale)),
        "title" => Some(escape_html(title)),
        "version" => Some(version().to_string()),
        "boot" => Some(script_safe_json(&boot)),
        _ => None,
    });
    // A link that leads to no study or interview is a 404, with the page that says so.
    let mut res = if boot.get("error").is_some() {
        HttpResponse::NotFound()
    } else {
        HttpResponse::Ok()
    };
    res.content_type("text/html; charset=utf-8")
        .insert_header(("cache-control", "no-cache"))
        .insert_header(("content-security-policy", CONTENT_SECURITY_POLICY))
        .insert_header(("x-content-type-options", "nosniff"))
        .insert_header(("referrer-policy", "no-referrer"))
        .insert_header(("x-frame-options", "DENY"))
        .insert_header(("vary", "accept-encoding"));
    if accepts_gzip(req) {
        res.insert_header(("content-encoding", "gzip"));
        return res.body(gzip(html.as_bytes()));
    }
    res.body(html)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).expect("writing to memory");
    encoder.finish().expect("writing to memory")
}

/// The study as the page shows it, or the page with a friendly "not found".
async fn study_boot(state: &AppState, slug: &str) -> Result<serde_json::Value, ApiError> {
    let published = studies::by_slug(&state.db, slug)
        .await?
        .and_then(|s| s.published);
    Ok(match published {
        Some(p) => json!({
            "slug": slug,
            "title": p.study_config.title,
            "description": p.study_config.description,
            "locale": p.study_config.locale,
            "estimated_minutes": p.study_config.estimated_minutes,
            "interviewer_name": p.study_config.interviewer_name,
            // What the server takes, counted as it counts (UTF-8 bytes).
            "max_message_bytes": state.settings.max_message_bytes,
        }),
        None => json!({ "slug": slug, "error": "study_not_found" }),
    })
}

/// The participant page for a study's public link.
#[utoipa::path(tag = "page",
    params(("public_slug" = String, Path)),
    responses((status = 200, description = "the interview page", content_type = "text/html"),
              (status = 404, description = "the page, saying the link leads to no study", content_type = "text/html")))]
#[get("/interview/{public_slug}")]
pub async fn study_page(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    Ok(page(&req, study_boot(&state, &path).await?))
}

/// The participant page reopening a session (its token is in the browser that started it).
#[utoipa::path(tag = "page",
    params(("session_id" = String, Path)),
    responses((status = 200, description = "the interview page", content_type = "text/html"),
              (status = 404, description = "the page, saying the interview cannot be found", content_type = "text/html")))]
#[get("/interview/s/{session_id}")]
pub async fn session_page(
    state: web::Data<AppState>,
    req: HttpRequest,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    // Only a well-formed id goes into the page; anything else is simply "not found".
    let Ok(id) = uuid::Uuid::try_parse(&path) else {
        return Ok(page(&req, json!({ "error": "session_not_found" })));
    };
    let id = id.to_string();
    let slug = read::session_state(&state.db, &id)
        .await?
        .map(|v| v.public_slug);
    let mut boot = match slug {
        Some(slug) => study_boot(&state, &slug).await?,
        None => json!({ "error": "session_not_found" }),
    };
    boot["session_id"] = json!(id);
    Ok(page(&req, boot))
}

/// The page's script and style.
#[utoipa::path(tag = "page",
    params(("file" = String, Path, description = "app.js or app.css")),
    responses((status = 200, description = "a static asset"), (status = 404)))]
#[get("/interview/assets/{file}")]
pub async fn asset(req: HttpRequest, path: web::Path<String>) -> Result<HttpResponse, ApiError> {
    let (index, kind) = match path.as_str() {
        "app.js" => (0, "text/javascript; charset=utf-8"),
        "app.css" => (1, "text/css; charset=utf-8"),
        "icon.svg" => (2, "image/svg+xml"),
        _ => return Err(ApiError::not_found("not_found", "no such file")),
    };
    Ok(static_file(&req, index, kind))
}

/// `/favicon.ico`, for clients that ask by that name: the page's icon (SVG).
#[utoipa::path(tag = "page",
    responses((status = 200, description = "the page's icon, image/svg+xml")))]
#[get("/favicon.ico")]
pub async fn favicon(req: HttpRequest) -> HttpResponse {
    static_file(&req, 2, "image/svg+xml")
}

/// One of the compiled-in files (0 script, 1 style, 2 icon), gzipped when the client takes it.
fn static_file(req: &HttpRequest, index: usize, kind: &str) -> HttpResponse {
    let mut res = HttpResponse::Ok();
    res.content_type(kind)
        .insert_header(("cache-control", "public, max-age=86400, immutable"))
        .insert_header(("x-content-type-options", "nosniff"))
        .insert_header(("vary", "accept-encoding"));
    if accepts_gzip(req) {
        res.insert_header(("content-encoding", "gzip"));
        return res.body(&gzipped()[index][..]);
    }
    res.body([served_script(), STYLE, ICON][index])
}

/// Whether the client takes gzip (`Accept-Encoding: gzip`, not refused with `q=0`).
fn accepts_gzip(req: &HttpRequest) -> bool {
    req.headers()
        .get_all("accept-encoding")
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';').map(str::trim);
            parts.next().is_some_and(|c| c.eq_ignore_ascii_case("gzip"))
                && !parts.any(|p| p.replace(' ', "") == "q=0")
        })
}

/// The script, style and icon, gzipped once on first use (they are compiled in).
fn gzipped() -> &'static [Vec<u8>; 3] {
    static GZIPPED: std::sync::OnceLock<[Vec<u8>; 3]> = std::sync::OnceLock::new();
    GZIPPED.get_or_init(|| [served_script(), STYLE, ICON].map(|text| gzip(text.as_bytes())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_is_sent_to_clients_that_take_it_and_reads_back_whole() {
        let with = |value: &str| {
            let req = actix_web::test::TestRequest::default()
                .insert_header(("accept-encoding", value))
                .to_http_request();
            accepts_gzip(&req)
        };
        assert!(with("gzip, deflate, br"));
        assert!(with("br;q=1.0, GZIP;q=0.5"));
        assert!(!with("gzip;q=0"));
        assert!(!with("br, deflate"));
        assert!(!accepts_gzip(
            &actix_web::test::TestRequest::default().to_http_request()
        ));
        use std::io::Read;
        for (i, text) in [served_script(), STYLE, ICON].iter().enumerate() {
            let mut back = String::new();
            flate2::read::GzDecoder::new(&gzipped()[i][..])
                .read_to_string(&mut back)
                .unwrap();
            assert_eq!(&back, text);
        }
        assert!(
            gzipped()[0].len() * 2 < SCRIPT.len(),
            "the script compresses"
        );
    }

    #[test]
    fn the_served_script_drops_comments_and_indentation_only() {
        let served = served_script();
        assert!(served.starts_with("\"use strict\";\n"), "{}", &served[..80]);
        assert!(served
            .lines()
            .all(|l| !l.starts_with("//") && !l.starts_with(' ')));
        assert!(
            served.len() * 4 < SCRIPT.len() * 3,
            "a quarter smaller at least"
        );
        // What makes the stripping safe: no string spans lines (an odd count of backticks on a
        // line would open a template literal whose lines the stripping could change).
        for (n, line) in SCRIPT.lines().enumerate() {
            let ticks = line.matches('`').count();
            assert!(
                ticks % 2 == 0,
                "line {}: a template literal spans lines",
                n + 1
            );
            assert!(!line.ends_with('\\'), "line {}: a string continues", n + 1);
        }
        // What a browser runs is checked by the Chromium tests (tests/node), which load this.
    }

    #[test]
    fn placeholders_are_filled_once_and_values_never_break_out() {
        let boot = json!({ "title": "{{boot}} </script><!--<script>", "locale": "\"><x" });
        let html = render(
            "<h1>{{title}}</h1><p lang=\"{{lang}}\"></p><script>{{boot}}</script>{{other}}",
            |name| match name {
                "title" => Some(escape_html(boot["title"].as_str().unwrap())),
                "lang" => Some(escape_html(boot["locale"].as_str().unwrap())),
                "boot" => Some(script_safe_json(&boot)),
                _ => None,
            },
        );
        assert!(
            html.starts_with("<h1>{{boot}} &lt;/script&gt;&lt;!--&lt;script&gt;</h1>"),
            "{html}"
        );
        assert!(html.contains("lang=\"&quot;&gt;&lt;x\""), "{html}");
        let script = &html[html.find("<script>").unwrap() + 8..html.rfind("</script>").unwrap()];
        assert!(!script.contains('<') && !script.contains('>'), "{script}");
        let back: serde_json::Value = serde_json::from_str(script).unwrap();
        assert_eq!(back, boot, "the boot data reads back the same");
        assert!(
            html.ends_with("{{other}}"),
            "an unknown placeholder stays as it is"
        );
        assert_eq!(
            script_safe_json(&json!("a\u{2028}b&")),
            "\"a\\u2028b\\u0026\""
        );
    }
}
