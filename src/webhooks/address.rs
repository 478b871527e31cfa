//! Where a webhook may be delivered. A subscription's URL is whatever a study owner typed, so a
//! delivery is a request the server makes on their behalf: without these checks it could reach
//! the database, a cloud metadata service or an admin page inside the network (server-side
//! request forgery).
//!
//! Unless `WEBHOOK_ALLOW_PRIVATE_ADDRESSES` is set: https only; an address given as such must be
//! public; a name is resolved once, by the delivery client's own resolver ([`CheckingResolver`]),
//! which refuses it when any of its addresses is not public and otherwise hands the client
//! exactly the addresses it checked — the connection goes to one of them, so a name that
//! resolves differently a moment later (DNS rebinding) changes nothing. No proxy is used and no
//! redirect is followed (`delivery.rs`).

use std::net::{IpAddr, SocketAddr};
use std::sync::LazyLock;

use ipnet::{Ipv4Net, Ipv6Net};
use reqwest13::dns::{Addrs, Name, Resolve, Resolving};
use reqwest13::Url;

/// Why a receiver's URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlRefused {
    #[error("the URL is not a valid absolute http(s) URL")]
    Malformed,
    #[error(
        "webhooks are delivered over https only (WEBHOOK_ALLOW_PRIVATE_ADDRESSES allows http)"
    )]
    NotHttps,
    #[error("the URL may not carry a user name or password (the signature proves the sender)")]
    Credentials,
    #[error("{host} is a loopback, private, link-local or reserved address (WEBHOOK_ALLOW_PRIVATE_ADDRESSES allows it)")]
    PrivateAddress { host: String },
}

/// The longest URL a subscription may have.
pub const MAX_URL_CHARS: usize = 2048;

/// Every IPv4 range that is not the public internet: this host, private networks, link-local,
/// shared (carrier-grade NAT), documentation, benchmarking, 6to4 relays, multicast, reserved.
static NOT_PUBLIC_V4: LazyLock<Vec<Ipv4Net>> = LazyLock::new(|| {
    [
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
    ]
    .iter()
    .map(|net| net.parse().expect("a valid network"))
    .collect()
});

/// IPv6: only global unicast (2000::/3) is public, less what inside it tunnels to IPv4 or is
/// not routed — Teredo, 6to4, documentation, benchmarking, ORCHID. Everything outside 2000::/3
/// (loopback, unspecified, IPv4-compatible, NAT64, unique-local, link-local, site-local,
/// multicast) is refused; IPv4-mapped addresses are checked as the IPv4 address they map.
static GLOBAL_V6: LazyLock<Ipv6Net> = LazyLock::new(|| "2000::/3".parse().expect("valid"));
static NOT_PUBLIC_V6: LazyLock<Vec<Ipv6Net>> = LazyLock::new(|| {
    [
        "2001::/32",
        "2001:2::/48",
        "2001:10::/28",
        "2001:20::/28",
        "2001:db8::/32",
        "2002::/16",
    ]
    .iter()
    .map(|net| net.parse().expect("a valid network"))
    .collect()
});

/// Whether `ip` is an address of the public internet.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => !NOT_PUBLIC_V4.iter().any(|net| net.contains(&v4)),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public(IpAddr::V4(v4)),
            None => GLOBAL_V6.contains(&v6) && !NOT_PUBLIC_V6.iter().any(|net| net.contains(&v6)),
        },
    }
}

/// Checks a receiver's URL as written: its form, its scheme and, when it names an address, that
/// address. A name is checked when it is resolved ([`CheckingResolver`], [`check_name`]).
pub fn check(url: &str, allow_private: bool) -> Result<Url, UrlRefused> {
    if url.chars().count() > MAX_URL_CHARS {
        return Err(UrlRefused::Malformed);
    }
    let parsed = Url::parse(url).map_err(|_| UrlRefused::Malformed)?;
    match parsed.scheme() {
        "https" => {}
        "http" if allow_private => {}
        "http" => return Err(UrlRefused::NotHttps),
        _ => return Err(UrlRefused::Malformed),
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(UrlRefused::Credentials);
    }
    let host = match parsed.host() {
        Some(host) => host,
        None => return Err(UrlRefused::Malformed),
    };
    let literal = match host {
        url::Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
        url::Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
        url::Host::Domain(_) => None,
    };
    if let Some(ip) = literal.filter(|ip| !allow_private && !is_public(*ip)) {
        return Err(UrlRefused::PrivateAddress {
            host: ip.to_string(),
        });
    }
    Ok(parsed)
}

/// How long a name may take to resolve when a subscription is made.
const RESOLVE_WITHIN: std::time::Duration = std::time::Duration::from_secs(5);

/// Resolves `host` and refuses it when any of its addresses is not public. A name that does not
/// resolve now (or not within [`RESOLVE_WITHIN`]) passes: it may later, and each delivery checks
/// again.
#[tracing::instrument]
pub async fn check_name(host: &str, allow_private: bool) -> Result<(), UrlRefused> {
    if allow_private {
        return Ok(());
    }
    let resolved = tokio::time::timeout(RESOLVE_WITHIN, tokio::net::lookup_host((host, 0))).await;
    let Ok(Ok(addrs)) = resolved else {
        return Ok(());
    };
    for addr in addrs {
        if !is_public(addr.ip()) {
            return Err(UrlRefused::PrivateAddress {
                host: host.to_string(),
            });
        }
    }
    Ok(())
}

/// The delivery client's resolver: the system's, with names whose addresses are not all public
/// refused (unless allowed). The client connects to the addresses it returns, and to no other.
pub struct CheckingResolver {
    pub allow_private: bool,
}

impl Resolve for CheckingResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if !allow_private && addrs.iter().any(|a| !is_public(a.ip())) {
                return Err(Box::new(UrlRefused::PrivateAddress { host }) as _);
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_addresses_are_public() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::a9fe:a9fe",
            "::a9fe:a9fe",
            "::127.0.0.1",
            "2002:a9fe:a9fe::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:db8::1",
            "fec0::1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in [
            "93.184.216.34",
            "8.8.8.8",
            "172.32.0.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn urls_are_refused_by_form_scheme_and_address() {
        let refused = [
            ("http://example.org/hook", UrlRefused::NotHttps),
            ("ftp://example.org/hook", UrlRefused::Malformed),
            ("not a url", UrlRefused::Malformed),
            ("https://user:pw@example.org/", UrlRefused::Credentials),
            (
                "https://127.0.0.1:8443/hook",
                UrlRefused::PrivateAddress {
                    host: "127.0.0.1".into(),
                },
            ),
            (
                "https://[::1]/hook",
                UrlRefused::PrivateAddress { host: "::1".into() },
            ),
            (
                "https://169.254.169.254/latest/meta-data",
                UrlRefused::PrivateAddress {
                    host: "169.254.169.254".into(),
                },
            ),
        ];
        for (url, why) in refused {
            assert_eq!(check(url, false).unwrap_err(), why, "{url}");
        }
        assert!(check("https://hooks.example.org/in", false).is_ok());
        assert!(check("http://127.0.0.1:9000/in", true).is_ok());
    }

    #[tokio::test]
    async fn a_name_of_this_machine_is_refused_when_resolved() {
        assert!(check_name("localhost", false).await.is_err());
        assert!(check_name("localhost", true).await.is_ok());
    }
}
