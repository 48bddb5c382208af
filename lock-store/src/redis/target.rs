//! Where a Redis store's connections go: one server (`redis://`, `rediss://`), or the primary
//! that a set of Sentinels names (`redis+sentinel://`), asked again at each new connection, so
//! that the store follows a failover.

use std::time::Duration as StdDuration;

use redis::Client;

use crate::store::StoreError;

/// One server, or the Sentinels of a primary.
#[derive(Clone)]
pub(crate) enum Target {
    /// `redis://` or `rediss://`: this client, always.
    Server(Client),
    /// `redis+sentinel://`: the primary the Sentinels name now.
    Sentinel(Sentinels),
}

/// `redis+sentinel://[user:password@]host:port[,host:port...]/primary-name[/db]`: the
/// Sentinels (asked in order), the name they know the primary by, and what the primary's URL
/// keeps of this one (credentials, database).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Sentinels {
    addrs: Vec<String>,
    primary: String,
    credentials: String,
    db: u32,
}

impl Target {
    /// The target of `url` and the URL without its password, for messages.
    pub(crate) fn of(url: &str) -> Result<(Target, String), StoreError> {
        match url.strip_prefix("redis+sentinel://") {
            Some(rest) => {
                let shown = crate::url::without_password(url);
                let sentinels = Sentinels::parse(rest).map_err(|reason| StoreError::Url {
                    url: shown.clone(),
                    reason,
                })?;
                Ok((Target::Sentinel(sentinels), shown))
            }
            None => {
                let (client, shown) = super::space::client(url)?;
                Ok((Target::Server(client), shown))
            }
        }
    }

    /// The client to connect with now: for Sentinels, one to the primary the first of them that
    /// answers within `bound` names, once that server says it is a primary (a Sentinel that has
    /// not seen the failover yet names the old one, which is down or a replica now: the next
    /// Sentinel is asked).
    pub(crate) fn client(&self, bound: StdDuration) -> Result<Client, String> {
        match self {
            Target::Server(client) => Ok(client.clone()),
            Target::Sentinel(sentinels) => sentinels.primary(bound),
        }
    }
}

impl Sentinels {
    fn parse(rest: &str) -> Result<Sentinels, String> {
        let (authority, path) = rest.split_once('/').ok_or(
            "name the primary: redis+sentinel://HOST:PORT[,HOST:PORT...]/PRIMARY-NAME[/DB]",
        )?;
        if path.contains('?') {
            return Err("redis+sentinel:// takes no parameters".into());
        }
        let (credentials, hosts) = match authority.rsplit_once('@') {
            Some((credentials, hosts)) => (format!("{credentials}@"), hosts),
            None => (String::new(), authority),
        };
        let addrs: Vec<String> = hosts.split(',').map(str::to_owned).collect();
        for addr in &addrs {
            let port = addr
                .rsplit_once(':')
                .map(|(host, port)| (host, port.parse::<u16>()));
            match port {
                _ if addr.is_empty() => return Err("an empty Sentinel address".into()),
                Some((host, Ok(_))) if !host.is_empty() && !host.ends_with(':') => {}
                _ => return Err(format!("the Sentinel address {addr:?} is not HOST:PORT")),
            }
        }
        let (primary, db) = match path.split_once('/') {
            Some((primary, db)) => (
                primary,
                db.parse::<u32>()
                    .map_err(|_| format!("the database {db:?} is not a number"))?,
            ),
            None => (path, 0),
        };
        if primary.is_empty() {
            return Err("name the primary after the Sentinels' addresses".into());
        }
        Ok(Sentinels {
            addrs,
            primary: primary.to_owned(),
            credentials,
            db,
        })
    }

    /// The whole look (every Sentinel asked, the primary's `ROLE`) shares `bound`, so that a
    /// connect through Sentinels is bounded as one to a server is.
    fn primary(&self, bound: StdDuration) -> Result<Client, String> {
        let deadline = std::time::Instant::now() + bound;
        let mut reasons = Vec::new();
        for addr in &self.addrs {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                reasons.push(format!("no answer within {bound:?}"));
                break;
            }
            match self.primary_by(addr, deadline) {
                Ok(client) => return Ok(client),
                Err(reason) => reasons.push(format!("sentinel {addr}: {reason}")),
            }
        }
        Err(reasons.join("; "))
    }

    /// The primary Sentinel `addr` names, checked.
    fn primary_by(&self, addr: &str, deadline: std::time::Instant) -> Result<Client, String> {
        // Each step gets what is left of the deadline: the connect, then the question.
        let left = || {
            deadline
                .saturating_duration_since(std::time::Instant::now())
                .max(StdDuration::from_millis(1))
        };
        let ask = |client: &Client, cmd: &redis::Cmd| -> Result<Vec<redis::Value>, String> {
            let mut conn = client
                .get_connection_with_timeout(left())
                .map_err(|e| e.to_string())?;
            let bound = left();
            conn.set_read_timeout(Some(bound))
                .and_then(|()| conn.set_write_timeout(Some(bound)))
                .map_err(|e| e.to_string())?;
            cmd.query(&mut conn).map_err(|e| e.to_string())
        };
        // As the store's own client: no setup commands of the driver's at connect, each of
        // which would wait on a silent Sentinel.
        let (sentinel, _) =
            super::space::client(&format!("redis://{addr}")).map_err(|e| e.to_string())?;
        let named = ask(
            &sentinel,
            redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(&self.primary),
        )?;
        let [host, port] = named.as_slice() else {
            return Err(format!("knows no primary named {:?}", self.primary));
        };
        let text = |v: &redis::Value| {
            super::space::bytes(v).map(|b| String::from_utf8_lossy(b).into_owned())
        };
        let (Some(host), Some(port)) = (text(host), text(port)) else {
            return Err(format!("answered {named:?}"));
        };
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        let url = format!("redis://{}{host}:{port}/{}", self.credentials, self.db);
        let (client, _) = super::space::client(&url).map_err(|e| e.to_string())?;
        let role = ask(&client, &redis::cmd("ROLE"))
            .map_err(|e| format!("its primary {host}:{port}: {e}"))?;
        match role.first().and_then(text).as_deref() {
            Some("master") => Ok(client),
            other => Err(format!(
                "its primary {host}:{port} is a {} (the failover is not over)",
                other.unwrap_or("server of another kind")
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_urls_are_read_as_the_ecosystem_writes_them() {
        let s = Sentinels::parse("u:p@h1:26379,[::1]:26380/jobs/2").unwrap();
        assert_eq!(
            s,
            Sentinels {
                addrs: vec!["h1:26379".into(), "[::1]:26380".into()],
                primary: "jobs".into(),
                credentials: "u:p@".into(),
                db: 2
            }
        );
        assert_eq!(Sentinels::parse("h:1/p").unwrap().db, 0);
        for bad in [
            "h:1",
            "h:1/",
            "h:1,/p",
            "h:1/p/x",
            "h:1/p?x=1",
            "h/p",
            "h:x/p",
            ":1/p",
        ] {
            assert!(Sentinels::parse(bad).is_err(), "{bad}");
        }
    }
}
