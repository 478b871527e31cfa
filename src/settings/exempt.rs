//! `CONNECTION_CAP_EXEMPT`: which client addresses the per-address connection cap
//! (`crate::http::door`) leaves alone.

use std::net::IpAddr;

/// Which peers the per-address cap leaves alone.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "String")]
pub enum Exempt {
    /// Every loopback address (the default: a reverse proxy on this host).
    Loopback,
    /// These addresses only (an empty list: none).
    Addresses(Vec<IpAddr>),
}

impl Exempt {
    /// `loopback`, or a comma-separated list of IP addresses (empty: no exemption).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("loopback") {
            return Ok(Self::Loopback);
        }
        text.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().map_err(|_| format!("not an IP address: {s}")))
            .collect::<Result<_, _>>()
            .map(Self::Addresses)
    }

    pub(crate) fn covers(&self, addr: &IpAddr) -> bool {
        match self {
            Self::Loopback => addr.is_loopback(),
            Self::Addresses(list) => list.contains(addr),
        }
    }
}

impl TryFrom<String> for Exempt {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        Self::parse(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_or_a_list_of_addresses() {
        assert_eq!(Exempt::parse("loopback"), Ok(Exempt::Loopback));
        assert_eq!(Exempt::parse(""), Ok(Exempt::Addresses(vec![])));
        assert_eq!(
            Exempt::parse("10.0.0.1, ::1"),
            Ok(Exempt::Addresses(vec![
                "10.0.0.1".parse().unwrap(),
                "::1".parse().unwrap()
            ]))
        );
        assert!(Exempt::parse("nope").is_err());
        assert!(Exempt::Loopback.covers(&"127.0.0.2".parse().unwrap()));
    }
}
