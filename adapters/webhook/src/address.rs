//! `http.blockPrivateAddresses`: refuse a destination whose host resolves into a private range.
//!
//! The check runs once, at start. A host that does not resolve passes (the spec lets a start go on
//! while a DNS name is not yet published); the publish then fails and retries like any other
//! connection failure. The check cannot see a DNS record that changes after the start: only an
//! egress policy at the network can enforce the rule per request.

use reqwest::Url;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

/// How long the start waits for one name to resolve before it treats the name as unresolvable.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The class of a non-public address, or `None` for an address the rule allows.
pub(crate) fn private_class(address: IpAddr) -> Option<&'static str> {
    match address {
        IpAddr::V4(v4) => v4_class(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            // ::ffff:10.0.0.1 reaches 10.0.0.1, so it is judged as that address.
            Some(v4) => v4_class(v4),
            None => v6_class(v6),
        },
    }
}

fn v4_class(v4: Ipv4Addr) -> Option<&'static str> {
    if v4.is_unspecified() || v4.octets()[0] == 0 {
        Some("unspecified")
    } else if v4.is_loopback() {
        Some("loopback")
    } else if v4.is_link_local() {
        Some("link-local")
    } else if v4.is_private() {
        Some("private")
    } else {
        None
    }
}

fn v6_class(v6: Ipv6Addr) -> Option<&'static str> {
    let first = v6.segments()[0];
    if v6.is_unspecified() {
        Some("unspecified")
    } else if v6.is_loopback() {
        Some("loopback")
    } else if first & 0xffc0 == 0xfe80 {
        Some("link-local")
    } else if first & 0xffc0 == 0xfec0 {
        Some("site-local")
    } else if first & 0xfe00 == 0xfc00 {
        Some("unique-local")
    } else {
        None
    }
}

/// The first private address `url`'s host resolves to, with its class.
pub(crate) async fn first_private_address(url: &Url) -> Option<(IpAddr, &'static str)> {
    let host = url.host_str()?;
    // An IPv6 literal comes back in brackets.
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    let addresses: Vec<IpAddr> = match literal.parse::<IpAddr>() {
        Ok(address) => vec![address],
        Err(_) => {
            let port = url.port_or_known_default().unwrap_or(443);
            let lookup = tokio::net::lookup_host((host, port));
            match tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
                Ok(Ok(found)) => found.map(|socket| socket.ip()).collect(),
                Ok(Err(error)) => {
                    tracing::debug!(host, %error, "destination host does not resolve; the address check passes");
                    Vec::new()
                }
                Err(_) => {
                    tracing::debug!(
                        host,
                        "destination host did not resolve in time; the address check passes"
                    );
                    Vec::new()
                }
            }
        }
    };
    addresses
        .into_iter()
        .find_map(|address| private_class(address).map(|class| (address, class)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(text: &str) -> Option<&'static str> {
        private_class(text.parse().unwrap_or_else(|e| panic!("{text}: {e}")))
    }

    #[test]
    fn classifies_the_blocked_ranges() {
        assert_eq!(class("127.0.0.1"), Some("loopback"));
        assert_eq!(class("127.255.0.9"), Some("loopback"));
        assert_eq!(class("10.1.2.3"), Some("private"));
        assert_eq!(class("172.16.0.1"), Some("private"));
        assert_eq!(class("172.31.255.255"), Some("private"));
        assert_eq!(class("192.168.1.1"), Some("private"));
        assert_eq!(class("169.254.169.254"), Some("link-local"));
        assert_eq!(class("0.0.0.0"), Some("unspecified"));
        assert_eq!(class("::"), Some("unspecified"));
        assert_eq!(class("::1"), Some("loopback"));
        assert_eq!(class("fe80::1"), Some("link-local"));
        assert_eq!(class("fec0::1"), Some("site-local"));
        assert_eq!(class("fc00::1"), Some("unique-local"));
        assert_eq!(class("fd12:3456::1"), Some("unique-local"));
        assert_eq!(class("::ffff:10.0.0.1"), Some("private"));
        assert_eq!(class("::ffff:127.0.0.1"), Some("loopback"));
    }

    #[test]
    fn public_addresses_pass() {
        for public in [
            "8.8.8.8",
            "172.32.0.1",
            "172.15.255.255",
            "192.169.0.1",
            "2001:db8::1",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(class(public), None, "{public}");
        }
    }
}
