//! Parsing of `database.url` and the checks of HTTP destination URLs.
//!
//! Written by hand rather than with a URL crate: JDBC URLs (several hosts, `;` properties) are not
//! URLs in the WHATWG sense, and the HTTP checks need only scheme, user info, host and port.

use queuebox_domain::secret::Secret;
use queuebox_ports::database::{DatabaseHost, DatabaseKind};

/// What `database.url` says, before `database.username` and `database.password` apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedDatabaseUrl {
    pub kind: DatabaseKind,
    pub hosts: Vec<DatabaseHost>,
    pub database: String,
    pub username: Option<String>,
    pub password: Option<Secret>,
    pub params: Vec<(String, String)>,
}

const FORMS: &str =
    "must start with jdbc:postgresql://, postgres://, postgresql:// or jdbc:sqlserver://";

/// Parses the accepted forms of `database.url`:
/// `jdbc:postgresql://host[:port][,host2[:port]]/db[?params]`, `postgres[ql]://[user[:password]@]host[:port][,...]/db[?params]`
/// and `jdbc:sqlserver://host[\instance][:port][;property=value]...`.
///
/// # Errors
/// A message that says which part is wrong.
pub fn parse_database_url(url: &str) -> Result<ParsedDatabaseUrl, String> {
    let lower = url.to_ascii_lowercase();
    if let Some(rest) = strip(url, &lower, "jdbc:postgresql://") {
        parse_postgres(rest, false)
    } else if let Some(rest) =
        strip(url, &lower, "postgresql://").or_else(|| strip(url, &lower, "postgres://"))
    {
        parse_postgres(rest, true)
    } else if let Some(rest) = strip(url, &lower, "jdbc:sqlserver://") {
        parse_sqlserver(rest)
    } else {
        Err(format!("{FORMS}, got `{}`", crate::secrets::mask_url(url)))
    }
}

fn strip<'a>(url: &'a str, lower: &str, prefix: &str) -> Option<&'a str> {
    lower.starts_with(prefix).then(|| &url[prefix.len()..])
}

fn parse_postgres(rest: &str, user_info_allowed: bool) -> Result<ParsedDatabaseUrl, String> {
    let (authority, path_and_query) = match rest.find('/') {
        Some(slash) => (&rest[..slash], &rest[slash + 1..]),
        None => return Err("names no database: add `/name` after the host".to_owned()),
    };
    let (mut username, mut password, hosts_text) = match authority.rfind('@') {
        Some(at) if user_info_allowed => {
            let (user, pass) = match authority[..at].split_once(':') {
                Some((user, pass)) => (user, Some(pass)),
                None => (&authority[..at], None),
            };
            (
                Some(percent_decode(user)?).filter(|u| !u.is_empty()),
                pass.map(|p| percent_decode(p).map(Secret::new))
                    .transpose()?,
                &authority[at + 1..],
            )
        }
        Some(_) => {
            return Err(
                "a jdbc:postgresql URL takes no user:password@; use database.username and database.password"
                    .to_owned(),
            );
        }
        None => (None, None, authority),
    };
    let hosts = parse_hosts(hosts_text)?;
    let (database, query) = match path_and_query.split_once('?') {
        Some((db, query)) => (db, Some(query)),
        None => (path_and_query, None),
    };
    let database = percent_decode(database)?;
    if database.is_empty() {
        return Err("names no database: add `/name` after the host".to_owned());
    }
    let mut params = Vec::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_decode(key)?;
        let value = percent_decode(value)?;
        // Credentials in the query move to the typed fields, so they are masked and overridable.
        match key.as_str() {
            "user" => username = Some(value),
            "password" => password = Some(Secret::new(value)),
            _ => params.push((key, value)),
        }
    }
    Ok(ParsedDatabaseUrl {
        kind: DatabaseKind::Postgresql,
        hosts,
        database,
        username,
        password,
        params,
    })
}

fn parse_sqlserver(rest: &str) -> Result<ParsedDatabaseUrl, String> {
    let mut parts = rest.split(';');
    let server = parts.next().unwrap_or("");
    if server.contains('@') {
        return Err(
            "a jdbc:sqlserver URL takes no user:password@; use database.username and database.password"
                .to_owned(),
        );
    }
    let mut params = Vec::new();
    let mut database = String::new();
    let mut username = None;
    let mut password = None;
    for pair in parts.filter(|p| !p.trim().is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = key.trim();
        match key.to_ascii_lowercase().as_str() {
            "databasename" | "database" => database = value.to_owned(),
            "user" | "username" => username = Some(value.to_owned()),
            "password" => password = Some(Secret::new(value)),
            _ => params.push((key.to_owned(), value.to_owned())),
        }
    }
    // `host\instance:port`: the instance name travels as a property.
    let (host_text, instance) = match server.split_once('\\') {
        Some((host, rest)) => {
            let (instance, port) = match rest.split_once(':') {
                Some((instance, port)) => (instance, Some(port)),
                None => (rest, None),
            };
            let host_port = match port {
                Some(port) => format!("{host}:{port}"),
                None => host.to_owned(),
            };
            (host_port, Some(instance.to_owned()))
        }
        None => (server.to_owned(), None),
    };
    if let Some(instance) = instance {
        params.push(("instanceName".to_owned(), instance));
    }
    let hosts = parse_hosts(&host_text)?;
    if database.is_empty() {
        return Err("names no database: add `;databaseName=name`".to_owned());
    }
    Ok(ParsedDatabaseUrl {
        kind: DatabaseKind::Sqlserver,
        hosts,
        database,
        username,
        password,
        params,
    })
}

fn parse_hosts(text: &str) -> Result<Vec<DatabaseHost>, String> {
    let mut hosts = Vec::new();
    for part in text.split(',') {
        let (host, port) = if let Some(bracketed) = part.strip_prefix('[') {
            // An IPv6 address: `[::1]:5432`.
            let close = bracketed
                .find(']')
                .ok_or_else(|| format!("host `{part}` opens `[` without `]`"))?;
            let port = &bracketed[close + 1..];
            let port = match port.strip_prefix(':') {
                Some(port) => Some(port),
                None if port.is_empty() => None,
                None => return Err(format!("unexpected text after host `{part}`")),
            };
            (&bracketed[..close], port)
        } else {
            match part.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (part, None),
            }
        };
        if host.is_empty() {
            return Err("names no host".to_owned());
        }
        let port = match port {
            Some(text) => Some(parse_port(text).ok_or_else(|| {
                format!("port `{text}` of host `{host}` is not a number from 1 to 65535")
            })?),
            None => None,
        };
        hosts.push(DatabaseHost {
            host: host.to_owned(),
            port,
        });
    }
    Ok(hosts)
}

fn parse_port(text: &str) -> Option<u16> {
    text.parse::<u16>().ok().filter(|port| *port > 0)
}

fn percent_decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| "holds a `%` that is not followed by two hex digits".to_owned())?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "percent-encoding decodes to invalid UTF-8".to_owned())
}

/// Checks an HTTP destination `baseUrl` or an OAuth2 `tokenUrl`: absolute `http`/`https`, a host, no
/// user name or password (credentials belong in `auth`, where they are masked).
///
/// # Errors
/// What is wrong with the URL.
pub fn check_http_url(url: &str) -> Result<(), String> {
    let lower = url.to_ascii_lowercase();
    let rest = if lower.starts_with("https://") {
        &url[8..]
    } else if lower.starts_with("http://") {
        &url[7..]
    } else {
        return Err(format!(
            "must be an absolute http:// or https:// URL, got `{}`",
            crate::secrets::mask_url(url)
        ));
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    if authority.contains('@') {
        return Err(
            "must not hold a user name or a password; put credentials in the auth block".to_owned(),
        );
    }
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        match bracketed.split_once(']') {
            Some((host, after)) => (host, after.strip_prefix(':')),
            None => return Err("opens `[` without `]` in the host".to_owned()),
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(format!("names no host: `{url}`"));
    }
    if let Some(port) = port
        && parse_port(port).is_none()
    {
        return Err(format!("port `{port}` is not a number from 1 to 65535"));
    }
    Ok(())
}

/// Checks an HTTP destination `path`: no `.` or `..` segment, encoded or not, because either would
/// let the request escape the path an operator reviewed.
///
/// # Errors
/// The offending segment.
pub fn check_http_path(path: &str) -> Result<(), String> {
    let path_only = path.split(['?', '#']).next().unwrap_or("");
    for segment in path_only.split('/') {
        let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
        if decoded == "." || decoded == ".." {
            return Err(format!("must not hold a `{segment}` segment"));
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn http_urls() {
        assert!(check_http_url("https://api.example.com").is_ok());
        assert!(check_http_url("http://127.0.0.1:9999/x").is_ok());
        assert!(check_http_url("http://[::1]:80").is_ok());
        assert!(check_http_url("ftp://x").is_err());
        assert!(check_http_url("/relative").is_err());
        assert!(check_http_url("https://user:pw@host").is_err());
        assert!(check_http_url("https://:80").is_err());
        assert!(check_http_url("https://host:99999").is_err());
    }

    #[test]
    fn http_paths() {
        assert!(check_http_path("/events/v1").is_ok());
        assert!(check_http_path("/a/../b").is_err());
        assert!(check_http_path("/a/./b").is_err());
        assert!(check_http_path("/a/%2E%2e/b").is_err());
        assert!(check_http_path("/a.b/c..d").is_ok());
    }

    #[test]
    fn ipv6_database_host() {
        let parsed = parse_database_url("jdbc:postgresql://[::1]:5433/q").unwrap();
        assert_eq!(parsed.hosts[0].host, "::1");
        assert_eq!(parsed.hosts[0].port, Some(5433));
    }

    #[test]
    fn sqlserver_properties() {
        let parsed = parse_database_url(
            "jdbc:sqlserver://db.internal:1433;databaseName=queuebox;encrypt=true;password=pw",
        )
        .unwrap();
        assert_eq!(parsed.kind, DatabaseKind::Sqlserver);
        assert_eq!(parsed.database, "queuebox");
        assert_eq!(parsed.hosts[0].port, Some(1433));
        assert_eq!(parsed.password.unwrap().expose(), "pw");
        assert_eq!(
            parsed.params,
            vec![("encrypt".to_owned(), "true".to_owned())]
        );
    }
}
