//! The console's pages: overview, dead outbox and inbox rows (list, detail, replay), and lookup.

use super::html::{all, esc, first, page, shorten, url_encode, write_html};
use super::metrics_text::{self, WINDOW};
use super::{Caller, Console, refuse};
use chrono::{DateTime, NaiveDateTime, Utc};
use queuebox_domain::redact::{MASK, is_secret_key, mask_secret_keys};
use queuebox_ports::console::{DeadFilter, PageCursor, RowDetail, RowSummary, Table};
use queuebox_ports::health::ComponentStatus;
use queuebox_ports::replay::{ReplayError, ReplayFilter};
use salvo::http::StatusCode;
use salvo::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE, HeaderValue};
use salvo::prelude::Response;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use uuid::Uuid;

/// Rows per page of a list.
const PAGE: u32 = 50;
/// The part of a payload the detail page shows; the rest is behind the download link.
const SHOWN_PAYLOAD_CHARS: u32 = 64 * 1024;
/// The most rows one "replay all matching" moves; a larger selection is refused with its count.
const MAX_REPLAY_ALL: i64 = 100_000;
/// Ids per replay call.
const REPLAY_CHUNK: usize = 1_000;
/// Rows a lookup by correlation id lists.
const LOOKUP_LIMIT: u32 = 100;

/// Outbox or inbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Outbox,
    Inbox,
}

impl Kind {
    fn table(self) -> Table {
        match self {
            Kind::Outbox => Table::Outbox,
            Kind::Inbox => Table::Inbox,
        }
    }
    fn slug(self) -> &'static str {
        match self {
            Kind::Outbox => "outbox",
            Kind::Inbox => "inbox",
        }
    }
    fn group_label(self) -> &'static str {
        match self {
            Kind::Outbox => "Topic",
            Kind::Inbox => "Source",
        }
    }
    fn key_label(self) -> &'static str {
        match self {
            Kind::Outbox => "Key",
            Kind::Inbox => "Idempotency key",
        }
    }
}

fn csrf_field(caller: &Caller) -> String {
    match caller {
        Caller::Session { csrf } => {
            format!(
                "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
                esc(csrf)
            )
        }
        Caller::Headers => String::new(),
    }
}

fn time(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

fn age(seconds: f64) -> String {
    let total = seconds.max(0.0).round() as u64;
    let (h, m, s) = (total / 3600, (total % 3600) / 60, total % 60);
    if h > 0 {
        format!("{h}h {m}m")
    } else if m > 0 {
        format!("{m}m {s}s")
    } else {
        format!("{s}s")
    }
}

fn store_failed(res: &mut Response, error: &dyn std::fmt::Display) {
    tracing::error!(%error, "console query failed");
    refuse(
        res,
        StatusCode::INTERNAL_SERVER_ERROR,
        "The database query failed; the log has the reason. Try again.",
    );
}

/// A GET below `/console`.
pub(crate) async fn get(
    console: &Console,
    rest: &str,
    query: &[(String, String)],
    caller: &Caller,
    res: &mut Response,
) {
    let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
    match parts.as_slice() {
        [] => match overview(console).await {
            Ok(body) => {
                let logout = match caller {
                    Caller::Session { .. } => format!(
                        "<form method=\"post\" action=\"/console/logout\" class=\"inline\">{}\
                         <button type=\"submit\">Sign out</button></form>",
                        csrf_field(caller)
                    ),
                    Caller::Headers => String::new(),
                };
                let content = format!(
                    "<p class=\"muted\">Refreshes every 5 seconds; last at <span id=\"refreshed\">page load</span>. {logout}</p>\
                     <div id=\"live\" data-src=\"/console/overview.part\">{body}</div>"
                );
                write_html(res, StatusCode::OK, page("Overview", &content, true));
            }
            Err(error) => store_failed(res, &error),
        },
        ["overview.part"] => match overview(console).await {
            Ok(body) => write_html(res, StatusCode::OK, body),
            Err(error) => store_failed(res, &error),
        },
        ["dead", "outbox"] => dead_list(console, Kind::Outbox, query, caller, res).await,
        ["dead", "inbox"] => dead_list(console, Kind::Inbox, query, caller, res).await,
        [table @ ("outbox" | "inbox"), id] => {
            let kind = if *table == "outbox" {
                Kind::Outbox
            } else {
                Kind::Inbox
            };
            detail(console, kind, id, res).await;
        }
        [table @ ("outbox" | "inbox"), id, "payload"] => {
            let kind = if *table == "outbox" {
                Kind::Outbox
            } else {
                Kind::Inbox
            };
            download(console, kind, id, res).await;
        }
        ["lookup"] => lookup(console, query, res).await,
        _ => refuse(res, StatusCode::NOT_FOUND, "No such console page."),
    }
}

// ---- overview -------------------------------------------------------------------------------

#[derive(Default)]
struct Counts {
    pending: i64,
    processing: i64,
    dead: i64,
    oldest: Option<f64>,
}

impl Counts {
    fn add(&mut self, state: &str, count: i64, oldest: Option<f64>) {
        match state {
            "pending" => self.pending += count,
            "processing" => self.processing += count,
            "dead" => self.dead += count,
            _ => {}
        }
        if let Some(age) = oldest {
            self.oldest = Some(self.oldest.map_or(age, |o: f64| o.max(age)));
        }
    }
    fn cells(&self) -> String {
        format!(
            "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>",
            self.pending,
            self.processing,
            self.dead,
            self.oldest.map(age).unwrap_or_else(|| "–".to_owned())
        )
    }
}

fn destination_of(console: &Console, topic: &str) -> String {
    console
        .routes
        .router
        .route(topic)
        .map(|m| m.destination.to_owned())
        .unwrap_or_else(|| "(no route)".to_owned())
}

async fn overview(console: &Console) -> Result<String, queuebox_ports::outbox::StoreError> {
    // The two counts and the readiness check at once: the view costs the slowest, not the sum.
    let (outbox, inbox, report) = tokio::join!(
        console.routes.store.outbox_counts(),
        console.routes.store.inbox_counts(),
        console.readiness.readiness()
    );
    let (outbox, inbox) = (outbox?, inbox?);
    let metrics = (console.metrics)();
    let (failures, since) = console.failures.observe(&metrics);

    let mut by_topic: BTreeMap<String, Counts> = BTreeMap::new();
    let mut by_destination: BTreeMap<String, Counts> = BTreeMap::new();
    for row in &outbox {
        by_topic.entry(row.topic.clone()).or_default().add(
            &row.state,
            row.count,
            row.oldest_age_seconds,
        );
        by_destination
            .entry(destination_of(console, &row.topic))
            .or_default()
            .add(&row.state, row.count, row.oldest_age_seconds);
    }
    let head = "<th class=\"num\">Pending</th><th class=\"num\">Processing</th><th class=\"num\">Dead</th><th class=\"num\">Oldest pending</th>";
    let mut out = String::new();
    let _ = write!(
        out,
        "<section><h2>Outbox by destination</h2><table id=\"outbox-destinations\"><thead><tr><th>Destination</th>{head}</tr></thead><tbody>"
    );
    for (destination, counts) in &by_destination {
        let _ = write!(
            out,
            "<tr><td><a href=\"/console/dead/outbox?destination={}\">{}</a></td>{}</tr>",
            esc(&url_encode(destination)),
            esc(destination),
            counts.cells()
        );
    }
    if by_destination.is_empty() {
        out.push_str(
            "<tr><td colspan=\"5\" class=\"muted\">No pending, processing or dead rows.</td></tr>",
        );
    }
    let _ = write!(
        out,
        "</tbody></table></section><section><h2>Outbox by topic</h2><table id=\"outbox-topics\"><thead><tr><th>Topic</th><th>Destination</th>{head}</tr></thead><tbody>"
    );
    for (topic, counts) in &by_topic {
        let _ = write!(
            out,
            "<tr data-topic=\"{t}\"><td><a href=\"/console/dead/outbox?topic={u}\">{t}</a></td><td>{d}</td>{c}</tr>",
            t = esc(topic),
            u = esc(&url_encode(topic)),
            d = esc(&destination_of(console, topic)),
            c = counts.cells()
        );
    }
    if by_topic.is_empty() {
        out.push_str(
            "<tr><td colspan=\"6\" class=\"muted\">No pending, processing or dead rows.</td></tr>",
        );
    }
    out.push_str("</tbody></table></section>");

    let _ = write!(
        out,
        "<section><h2>Publish failures, last {} min</h2><table id=\"failures\"><thead><tr><th>Destination</th><th>Kind</th><th class=\"num\">Recent</th><th class=\"num\">Since start</th></tr></thead><tbody>",
        WINDOW.as_secs() / 60
    );
    for row in &failures {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            esc(&row.destination),
            esc(&row.kind),
            row.recent,
            row.total
        );
    }
    if failures.is_empty() {
        out.push_str(
            "<tr><td colspan=\"4\" class=\"muted\">No publish failure since the start.</td></tr>",
        );
    }
    let _ = write!(
        out,
        "</tbody></table><p class=\"muted\">Recent counts cover the {} the console has been watching (at most {} min).</p></section>",
        if since.is_zero() {
            "time since the start".to_owned()
        } else {
            age(since.as_secs_f64())
        },
        WINDOW.as_secs() / 60
    );

    let mut sources: BTreeMap<(String, String), Counts> = BTreeMap::new();
    for row in &inbox {
        sources
            .entry((row.source.clone(), row.consumption.clone()))
            .or_default()
            .add(&row.state, row.count, row.oldest_age_seconds);
    }
    let _ = write!(
        out,
        "<section><h2>Inbox by source</h2><table id=\"inbox-sources\"><thead><tr><th>Source</th><th>Mode</th>{head}</tr></thead><tbody>"
    );
    for ((source, mode), counts) in &sources {
        let _ = write!(
            out,
            "<tr><td><a href=\"/console/dead/inbox?source={}\">{}</a></td><td>{}</td>{}</tr>",
            esc(&url_encode(source)),
            esc(source),
            esc(mode),
            counts.cells()
        );
    }
    if sources.is_empty() {
        out.push_str(
            "<tr><td colspan=\"6\" class=\"muted\">No pending, processing or dead rows.</td></tr>",
        );
    }
    out.push_str("</tbody></table></section>");

    let _ = write!(
        out,
        "<section><h2>Readiness: {}</h2><table id=\"readiness\"><thead><tr><th>Component</th><th>Status</th><th>Reason</th></tr></thead><tbody>",
        match report.status {
            queuebox_ports::health::OverallStatus::Healthy => "ready",
            queuebox_ports::health::OverallStatus::Unhealthy => "NOT READY",
        }
    );
    for (name, component) in &report.components {
        let (class, status) = match component.status {
            ComponentStatus::Up => ("up", "up"),
            ComponentStatus::Starting => ("starting", "starting"),
            ComponentStatus::Down => ("down", "down"),
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"{class}\">{status}</td><td>{}</td></tr>",
            esc(name),
            esc(&mask_secret_keys(component.error.as_deref().unwrap_or("")))
        );
    }
    out.push_str("</tbody></table></section>");

    out.push_str("<section><h2>Capture</h2>");
    let capture: Vec<_> = report
        .components
        .iter()
        .filter(|(name, _)| name.contains("capture"))
        .collect();
    let status = metrics_text::series(&metrics, "queuebox_capture_status");
    let lag = metrics_text::series(&metrics, "queuebox_capture_lag_bytes");
    if capture.is_empty() && status.is_empty() {
        out.push_str(
            "<p id=\"capture\">Capture is off: the dispatcher finds new rows by polling.</p>",
        );
    } else {
        out.push_str("<ul id=\"capture\">");
        for (name, component) in capture {
            let _ = write!(
                out,
                "<li>{}: {:?}{}</li>",
                esc(name),
                component.status,
                component
                    .error
                    .as_deref()
                    .map(|e| format!(" ({})", esc(&mask_secret_keys(e))))
                    .unwrap_or_default()
            );
        }
        for (labels, value) in status.iter().chain(lag.iter()) {
            let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = write!(out, "<li>{} {}</li>", esc(&labels.join(", ")), value);
        }
        out.push_str("</ul>");
    }
    out.push_str("</section>");
    Ok(out)
}

// ---- dead lists ------------------------------------------------------------------------------

/// The filter of a dead list as the form sent it, and what it selects.
struct Selection {
    /// (name, value) of every filter field set, to carry into links and forms.
    fields: Vec<(&'static str, String)>,
    filter: DeadFilter,
}

fn parse_time(name: &str, text: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&Utc));
    }
    for format in [
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%d %H:%M:%S",
    ] {
        if let Ok(at) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(at.and_utc());
        }
    }
    Err(format!(
        "{name}: `{text}` is not a time; write 2026-12-03T10:15 (UTC) or an RFC 3339 time"
    ))
}

async fn selection(
    console: &Console,
    kind: Kind,
    pairs: &[(String, String)],
) -> Result<Result<Selection, String>, queuebox_ports::outbox::StoreError> {
    let mut fields = Vec::new();
    let mut filter = DeadFilter::default();
    let group_field = match kind {
        Kind::Outbox => "topic",
        Kind::Inbox => "source",
    };
    let group = first(pairs, group_field);
    if let Some(value) = &group {
        fields.push((group_field, value.clone()));
        filter.groups = Some(vec![value.clone()]);
    }
    if kind == Kind::Outbox
        && let Some(destination) = first(pairs, "destination")
    {
        fields.push(("destination", destination.clone()));
        // Rows do not store their destination: it is the first route whose pattern covers the
        // topic. The dead rows' topics come from a loose scan of the dead-topic index.
        let topics: Vec<String> = console
            .routes
            .store
            .outbox_dead_topics()
            .await?
            .into_iter()
            .filter(|topic| destination_of(console, topic) == destination)
            .filter(|topic| group.as_ref().is_none_or(|g| g == topic))
            .collect();
        filter.groups = Some(topics);
    }
    if let Some(key) = first(pairs, "key") {
        fields.push(("key", key.clone()));
        filter.key = Some(key);
    }
    for (name, slot) in [
        ("from", &mut filter.created_from),
        ("to", &mut filter.created_to),
    ] {
        if let Some(text) = first(pairs, name) {
            match parse_time(name, &text) {
                Ok(at) => *slot = Some(at),
                Err(problem) => return Ok(Err(problem)),
            }
            fields.push((name, text));
        }
    }
    if let Some(text) = first(pairs, "error") {
        fields.push(("error", text.clone()));
        filter.error_text = Some(text);
    }
    if filter
        .groups
        .iter()
        .flatten()
        .chain(filter.key.iter())
        .any(|text| text.contains('\0'))
    {
        return Ok(Err("a filter must not hold the character U+0000".to_owned()));
    }
    Ok(Ok(Selection { fields, filter }))
}

fn query_of(fields: &[(&'static str, String)]) -> String {
    fields
        .iter()
        .map(|(name, value)| format!("{name}={}", url_encode(value)))
        .collect::<Vec<_>>()
        .join("&")
}

fn hidden_fields(fields: &[(&'static str, String)]) -> String {
    fields
        .iter()
        .map(|(name, value)| {
            format!(
                "<input type=\"hidden\" name=\"{name}\" value=\"{}\">",
                esc(value)
            )
        })
        .collect()
}

fn filter_form(console: &Console, kind: Kind, pairs: &[(String, String)]) -> String {
    let value = |name: &str| esc(&first(pairs, name).unwrap_or_default());
    let mut form = format!(
        "<form method=\"get\" action=\"/console/dead/{}\" class=\"filter\" id=\"filter\">",
        kind.slug()
    );
    if kind == Kind::Outbox {
        let chosen = first(pairs, "destination").unwrap_or_default();
        form.push_str(
            "<label>Destination <select name=\"destination\"><option value=\"\">any</option>",
        );
        for name in &console.routes.destinations {
            let _ = write!(
                form,
                "<option value=\"{v}\"{s}>{v}</option>",
                v = esc(name),
                s = if *name == chosen { " selected" } else { "" }
            );
        }
        form.push_str("</select></label>");
        let _ = write!(
            form,
            "<label>Topic <input name=\"topic\" value=\"{}\"></label>",
            value("topic")
        );
    } else {
        let _ = write!(
            form,
            "<label>Source <input name=\"source\" value=\"{}\"></label>",
            value("source")
        );
    }
    let _ = write!(
        form,
        "<label>{} <input name=\"key\" value=\"{}\"></label>\
         <label>Created from (UTC) <input name=\"from\" value=\"{}\" placeholder=\"2026-12-03T10:00\"></label>\
         <label>to <input name=\"to\" value=\"{}\" placeholder=\"2026-12-03T11:00\"></label>\
         <label>Error contains <input name=\"error\" value=\"{}\"></label>\
         <button type=\"submit\">Filter</button> <a href=\"/console/dead/{}\">Clear</a></form>",
        kind.key_label(),
        value("key"),
        value("from"),
        value("to"),
        value("error"),
        kind.slug()
    );
    form
}

fn parse_cursor(text: &str) -> Option<PageCursor> {
    let (at, id) = text.split_once('~')?;
    Some(PageCursor {
        at: DateTime::parse_from_rfc3339(at).ok()?.with_timezone(&Utc),
        id: Uuid::parse_str(id).ok()?,
    })
}

async fn dead_list(
    console: &Console,
    kind: Kind,
    pairs: &[(String, String)],
    caller: &Caller,
    res: &mut Response,
) {
    let title = match kind {
        Kind::Outbox => "Dead outbox rows",
        Kind::Inbox => "Dead inbox rows",
    };
    let chosen = match selection(console, kind, pairs).await {
        Ok(Ok(chosen)) => chosen,
        Ok(Err(problem)) => return refuse(res, StatusCode::BAD_REQUEST, &problem),
        Err(error) => return store_failed(res, &error),
    };
    let after = match first(pairs, "after") {
        None => None,
        Some(text) => match parse_cursor(&text) {
            Some(cursor) => Some(cursor),
            None => {
                return refuse(
                    res,
                    StatusCode::BAD_REQUEST,
                    "after: not a page cursor of this console",
                );
            }
        },
    };
    let mut rows = match console
        .routes
        .store
        .dead_page(kind.table(), &chosen.filter, after, PAGE + 1)
        .await
    {
        Ok(rows) => rows,
        Err(error) => return store_failed(res, &error),
    };
    let more = rows.len() > PAGE as usize;
    rows.truncate(PAGE as usize);

    let mut out = filter_form(console, kind, pairs);
    let _ = write!(
        out,
        "<form method=\"post\" action=\"/console/dead/{slug}/replay\" id=\"replay\">{csrf}{hidden}\
         <p class=\"actions\"><button type=\"submit\" name=\"scope\" value=\"selected\" id=\"replay-selected\">Replay selected</button> \
         <button type=\"submit\" name=\"scope\" value=\"matching\" id=\"replay-matching\">Replay all matching the filter</button> \
         <span class=\"muted\">Both ask for a confirmation first.</span></p>\
         <table id=\"dead\"><thead><tr><th><input type=\"checkbox\" id=\"select-all\" title=\"Select the whole page\"></th>\
         <th>{group}</th><th>{key}</th><th class=\"num\">Attempts</th><th>Last error</th><th>Created</th><th>{changed}</th></tr></thead><tbody>",
        slug = kind.slug(),
        csrf = csrf_field(caller),
        hidden = hidden_fields(&chosen.fields),
        group = kind.group_label(),
        key = kind.key_label(),
        changed = if kind == Kind::Outbox {
            "Dead since"
        } else {
            "Received"
        },
    );
    for row in &rows {
        let _ = write!(
            out,
            "<tr class=\"row\" data-id=\"{id}\"><td><input type=\"checkbox\" name=\"id\" value=\"{id}\"></td>\
             <td><a href=\"/console/{slug}/{id}\">{group}</a></td><td>{key}</td><td class=\"num\">{attempt}</td>\
             <td class=\"error-text\">{error}</td><td>{created}</td><td>{changed}</td></tr>",
            id = row.id,
            slug = kind.slug(),
            group = esc(&shorten(&row.group, 80)),
            key = esc(&shorten(row.key.as_deref().unwrap_or(""), 60)),
            attempt = row.attempt,
            error = esc(&shorten(
                &mask_secret_keys(row.last_error.as_deref().unwrap_or("")),
                200
            )),
            created = time(row.created_at),
            changed = time(row.changed_at),
        );
    }
    if rows.is_empty() {
        out.push_str(
            "<tr><td colspan=\"7\" class=\"muted\" id=\"empty\">No dead rows match.</td></tr>",
        );
    }
    out.push_str("</tbody></table></form>");
    let _ = write!(
        out,
        "<p class=\"muted\" id=\"shown\">{} rows on this page.</p>",
        rows.len()
    );
    if more && let Some(last) = rows.last() {
        let mut fields = chosen.fields.clone();
        fields.push((
            "after",
            format!("{}~{}", last.changed_at.to_rfc3339(), last.id),
        ));
        let _ = write!(
            out,
            "<p><a id=\"next\" href=\"/console/dead/{}?{}\">Next page</a></p>",
            kind.slug(),
            esc(&query_of(&fields))
        );
    }
    write_html(res, StatusCode::OK, page(title, &out, true));
}

// ---- replay ----------------------------------------------------------------------------------

/// `POST /console/dead/{outbox,inbox}/replay`: without `confirm`, a page that states how many rows
/// would move; with it, the move.
pub(crate) async fn replay(
    console: &Console,
    kind: Kind,
    form: &[(String, String)],
    csrf: &str,
    res: &mut Response,
) {
    let chosen = match selection(console, kind, form).await {
        Ok(Ok(chosen)) => chosen,
        Ok(Err(problem)) => return refuse(res, StatusCode::BAD_REQUEST, &problem),
        Err(error) => return store_failed(res, &error),
    };
    let matching = first(form, "scope").as_deref() == Some("matching");
    let mut ids = Vec::new();
    if !matching {
        for text in all(form, "id") {
            match Uuid::parse_str(text) {
                Ok(id) => ids.push(id),
                Err(_) => {
                    return refuse(
                        res,
                        StatusCode::BAD_REQUEST,
                        &format!("id: `{}` is not a row id", shorten(text, 40)),
                    );
                }
            }
        }
        ids.sort_unstable();
        ids.dedup();
        if ids.is_empty() {
            return refuse(
                res,
                StatusCode::BAD_REQUEST,
                "Select at least one row to replay.",
            );
        }
    }
    let count = if matching {
        match console
            .routes
            .store
            .dead_count(kind.table(), &chosen.filter)
            .await
        {
            Ok(count) => count,
            Err(error) => return store_failed(res, &error),
        }
    } else {
        i64::try_from(ids.len()).unwrap_or(i64::MAX)
    };
    if matching && count > MAX_REPLAY_ALL {
        return refuse(
            res,
            StatusCode::BAD_REQUEST,
            &format!(
                "{count} rows match; the console replays at most {MAX_REPLAY_ALL} at once. Narrow the filter, or use POST /admin/replay."
            ),
        );
    }
    let what = match kind {
        Kind::Outbox => "dead outbox rows",
        Kind::Inbox => "dead inbox rows",
    };
    if first(form, "confirm").is_none() {
        let ids_fields: String = ids
            .iter()
            .map(|id| format!("<input type=\"hidden\" name=\"id\" value=\"{id}\">"))
            .collect();
        let scope = if matching { "matching" } else { "selected" };
        let description = if matching {
            format!(
                "every one of the <strong id=\"confirm-count\">{count}</strong> {what} that match the filter"
            )
        } else {
            format!("the <strong id=\"confirm-count\">{count}</strong> selected {what}")
        };
        let content = format!(
            "<p>Replay {description}? They go back to <code>pending</code> with attempt 0 and are \
             delivered again.</p>\
             <form method=\"post\" action=\"/console/dead/{slug}/replay\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\">{hidden}{ids_fields}\
             <input type=\"hidden\" name=\"scope\" value=\"{scope}\"><input type=\"hidden\" name=\"confirm\" value=\"yes\">\
             <button type=\"submit\" id=\"confirm\">Replay {count} rows</button> \
             <a href=\"/console/dead/{slug}?{back}\">Cancel</a></form>",
            slug = kind.slug(),
            csrf = esc(csrf),
            hidden = hidden_fields(&chosen.fields),
            back = esc(&query_of(&chosen.fields)),
        );
        return write_html(
            res,
            StatusCode::OK,
            page("Confirm the replay", &content, true),
        );
    }
    if matching {
        // The ids of every matching dead row, in pages; the move then goes by id, so a row that
        // was sent (or replayed by someone else) in between stays as it is.
        let mut after = None;
        loop {
            let page = match console
                .routes
                .store
                .dead_page(kind.table(), &chosen.filter, after, 1_000)
                .await
            {
                Ok(page) => page,
                Err(error) => return store_failed(res, &error),
            };
            after = page.last().map(|row| PageCursor {
                at: row.changed_at,
                id: row.id,
            });
            let done = page.len() < 1_000;
            ids.extend(page.into_iter().map(|row| row.id));
            if done || ids.len() as i64 > MAX_REPLAY_ALL {
                break;
            }
        }
    }
    let mut moved = 0u64;
    for chunk in ids.chunks(REPLAY_CHUNK) {
        let result = match kind {
            Kind::Outbox => console
                .replay
                .replay(&ReplayFilter {
                    ids: Some(chunk.to_vec()),
                    ..ReplayFilter::default()
                })
                .await
                .map_err(|error| match error {
                    ReplayError::Store {
                        moved: part,
                        source,
                    } => (part, source.to_string()),
                    ReplayError::NoFilter => (0, error.to_string()),
                }),
            Kind::Inbox => console
                .routes
                .store
                .requeue_inbox(chunk)
                .await
                .map_err(|error| (0, error.to_string())),
        };
        match result {
            Ok(part) => moved += part,
            Err((part, reason)) => {
                tracing::error!(%reason, moved = moved + part, "console replay failed part way");
                return refuse(
                    res,
                    StatusCode::INTERNAL_SERVER_ERROR,
                    &format!(
                        "The replay failed after moving {} rows; the log has the reason.",
                        moved + part
                    ),
                );
            }
        }
    }
    tracing::info!(moved, table = kind.slug(), "console replay");
    let content = format!(
        "<p id=\"moved\">Moved <strong>{moved}</strong> {what} back to pending.</p>\
         <p><a href=\"/console/dead/{slug}?{back}\">Back to the list</a> · <a href=\"/console\">Overview</a></p>",
        slug = kind.slug(),
        back = esc(&query_of(&chosen.fields)),
    );
    write_html(res, StatusCode::OK, page("Replayed", &content, true));
}

// ---- detail and download ---------------------------------------------------------------------

fn headers_table(text: &str) -> String {
    let mut out = String::from(
        "<table id=\"headers\"><thead><tr><th>Header</th><th>Value</th></tr></thead><tbody>",
    );
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(map)) if !map.is_empty() => {
            for (name, value) in map {
                let shown = if is_secret_key(&name) {
                    MASK.to_owned()
                } else {
                    match value {
                        serde_json::Value::String(s) => s,
                        other => other.to_string(),
                    }
                };
                let _ = write!(
                    out,
                    "<tr><td>{}</td><td>{}</td></tr>",
                    esc(&name),
                    esc(&shorten(&shown, 2_000))
                );
            }
        }
        _ => out.push_str("<tr><td colspan=\"2\" class=\"muted\">none</td></tr>"),
    }
    out.push_str("</tbody></table>");
    out
}

async fn detail(console: &Console, kind: Kind, id: &str, res: &mut Response) {
    let Ok(id) = Uuid::parse_str(id) else {
        return refuse(res, StatusCode::BAD_REQUEST, "Not a row id.");
    };
    let row = match console
        .routes
        .store
        .row(kind.table(), id, SHOWN_PAYLOAD_CHARS)
        .await
    {
        Ok(Some(row)) => row,
        Ok(None) => {
            return refuse(
                res,
                StatusCode::NOT_FOUND,
                "No such row (it may have been removed by retention).",
            );
        }
        Err(error) => return store_failed(res, &error),
    };
    write_html(
        res,
        StatusCode::OK,
        page(
            &format!("{} row", kind.slug()),
            &detail_body(console, kind, &row),
            true,
        ),
    );
}

fn detail_body(console: &Console, kind: Kind, row: &RowDetail) -> String {
    let s = &row.summary;
    let truncated = i64::try_from(row.payload.len()).unwrap_or(i64::MAX) < row.payload_bytes;
    let payload = if truncated {
        row.payload.clone()
    } else {
        serde_json::from_str::<serde_json::Value>(&row.payload)
            .ok()
            .and_then(|value| serde_json::to_string_pretty(&value).ok())
            .unwrap_or_else(|| row.payload.clone())
    };
    let mut out = String::from("<table id=\"fields\"><tbody>");
    let mut field = |name: &str, value: &str| {
        let _ = write!(
            out,
            "<tr><th>{}</th><td>{}</td></tr>",
            esc(name),
            esc(value)
        );
    };
    field("Id", &s.id.to_string());
    field(kind.group_label(), &s.group);
    if kind == Kind::Outbox {
        field("Destination", &destination_of(console, &s.group));
    }
    field(kind.key_label(), s.key.as_deref().unwrap_or(""));
    field("State", &s.state);
    field("Attempts", &s.attempt.to_string());
    field(
        if kind == Kind::Outbox {
            "Aggregate type"
        } else {
            "Event type"
        },
        row.kind.as_deref().unwrap_or(""),
    );
    if let Some(mode) = &row.consumption {
        field("Consumption", mode);
    }
    if let Some(correlation) = &row.correlation_id {
        field("Correlation id", correlation);
    }
    field("Created", &time(s.created_at));
    if kind == Kind::Outbox {
        field("Last change", &time(s.changed_at));
    }
    field(
        "Last error",
        &mask_secret_keys(s.last_error.as_deref().unwrap_or("")),
    );
    out.push_str("</tbody></table><h2>Headers</h2>");
    out.push_str(&headers_table(&row.headers));
    let _ = write!(
        out,
        "<h2>Payload</h2><p class=\"muted\">{} bytes. <a id=\"download\" href=\"/console/{}/{}/payload\">Download</a></p>",
        row.payload_bytes,
        kind.slug(),
        s.id
    );
    if truncated {
        let _ = write!(
            out,
            "<p class=\"warning\" id=\"truncated\">Showing the first {} characters only; download the payload for the rest.</p>",
            row.payload.chars().count()
        );
    }
    let _ = write!(out, "<pre id=\"payload\">{}</pre>", esc(&payload));
    if s.state == "dead" {
        let _ = write!(
            out,
            "<p><a href=\"/console/dead/{}?key={}\">This row in the dead list</a></p>",
            kind.slug(),
            esc(&url_encode(s.key.as_deref().unwrap_or("")))
        );
    }
    out
}

async fn download(console: &Console, kind: Kind, id: &str, res: &mut Response) {
    let Ok(id) = Uuid::parse_str(id) else {
        return refuse(res, StatusCode::BAD_REQUEST, "Not a row id.");
    };
    match console.routes.store.row(kind.table(), id, u32::MAX).await {
        Ok(Some(row)) => {
            super::html::security_headers(res);
            let headers = res.headers_mut();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            if let Ok(value) = HeaderValue::from_str(&format!(
                "attachment; filename=\"{}-{}.json\"",
                kind.slug(),
                id
            )) {
                headers.insert(CONTENT_DISPOSITION, value);
            }
            let _ = res.write_body(row.payload);
        }
        Ok(None) => refuse(res, StatusCode::NOT_FOUND, "No such row."),
        Err(error) => store_failed(res, &error),
    }
}

// ---- lookup ----------------------------------------------------------------------------------

fn summary_table(kind: Kind, rows: &[RowSummary]) -> String {
    let mut out = format!(
        "<table class=\"found\"><thead><tr><th>Id</th><th>{}</th><th>{}</th><th>State</th><th>Created</th></tr></thead><tbody>",
        kind.group_label(),
        kind.key_label()
    );
    for row in rows {
        let _ = write!(
            out,
            "<tr><td><a href=\"/console/{slug}/{id}\">{id}</a></td><td>{g}</td><td>{k}</td><td>{s}</td><td>{c}</td></tr>",
            slug = kind.slug(),
            id = row.id,
            g = esc(&row.group),
            k = esc(row.key.as_deref().unwrap_or("")),
            s = esc(&row.state),
            c = time(row.created_at)
        );
    }
    out.push_str("</tbody></table>");
    out
}

async fn lookup(console: &Console, query: &[(String, String)], res: &mut Response) {
    let text = first(query, "q").unwrap_or_default();
    let mode = first(query, "by").unwrap_or_else(|| "id".to_owned());
    let option = |value: &str, label: &str| {
        format!(
            "<option value=\"{value}\"{}>{label}</option>",
            if mode == value { " selected" } else { "" }
        )
    };
    let mut out = format!(
        "<form method=\"get\" action=\"/console/lookup\" class=\"filter\" id=\"lookup\">\
         <label>Find <select name=\"by\">{}{}{}</select></label> \
         <input name=\"q\" value=\"{}\" size=\"48\" required> <button type=\"submit\">Look up</button></form>",
        option("id", "outbox or inbox id"),
        option("key", "inbox idempotency key"),
        option("correlation", "correlation id"),
        esc(&text)
    );
    if !text.is_empty() {
        if text.contains('\0') {
            return refuse(
                res,
                StatusCode::BAD_REQUEST,
                "q: must not hold the character U+0000",
            );
        }
        let store = &console.routes.store;
        let found = match mode.as_str() {
            "id" => match Uuid::parse_str(&text) {
                Err(_) => Err(format!(
                    "`{}` is not an id (a UUID such as 3f2b1c1e-8d4a-4c1b-9a53-2d0f6f1e7a10)",
                    shorten(&text, 60)
                )),
                Ok(id) => {
                    let outbox = store.row(Table::Outbox, id, SHOWN_PAYLOAD_CHARS).await;
                    let inbox = store.row(Table::Inbox, id, SHOWN_PAYLOAD_CHARS).await;
                    match (outbox, inbox) {
                        (Ok(Some(row)), _) => Ok(detail_body(console, Kind::Outbox, &row)),
                        (Ok(None), Ok(Some(row))) => Ok(detail_body(console, Kind::Inbox, &row)),
                        (Ok(None), Ok(None)) => {
                            Ok("<p id=\"nothing\">No outbox or inbox row has this id.</p>"
                                .to_owned())
                        }
                        (Err(error), _) | (_, Err(error)) => return store_failed(res, &error),
                    }
                }
            },
            "key" => match store.inbox_by_key(&text).await {
                Ok(rows) if rows.is_empty() => {
                    Ok("<p id=\"nothing\">No inbox row has this idempotency key.</p>".to_owned())
                }
                Ok(rows) => Ok(summary_table(Kind::Inbox, &rows)),
                Err(error) => return store_failed(res, &error),
            },
            "correlation" => match store.inbox_by_correlation(&text, LOOKUP_LIMIT).await {
                Ok(rows) if rows.is_empty() => {
                    Ok("<p id=\"nothing\">No inbox row has this correlation id.</p>".to_owned())
                }
                Ok(rows) => Ok(summary_table(Kind::Inbox, &rows)),
                Err(error) => return store_failed(res, &error),
            },
            other => Err(format!(
                "by: `{}` is not one of id, key, correlation",
                shorten(other, 40)
            )),
        };
        match found {
            Ok(body) => out.push_str(&body),
            Err(problem) => return refuse(res, StatusCode::BAD_REQUEST, &problem),
        }
    }
    write_html(res, StatusCode::OK, page("Lookup", &out, true));
}
