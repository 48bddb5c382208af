//! Opening a store by URL (see [`open`]): `sqlite://PATH`, `redis://HOST[:PORT][/DB]` (or
//! `redis+sentinel://HOST:PORT[,HOST:PORT...]/PRIMARY[/DB]`),
//! `postgres://USER@HOST[:PORT]/DB`, `mysql://USER@HOST[:PORT]/DB` (also `mariadb://`), and
//! `memory:` (this process only) and `noop:` (keeps nothing: every acquire is granted).

use std::time::Duration;

use crate::store::{Store, StoreError};

/// How long any one call to a server store may take before it fails ([`StoreError::Lost`]),
/// unless [`crate::Options::bound`] says otherwise.
pub const DEFAULT_BOUND: Duration = Duration::from_secs(5);

/// Opens namespace `namespace` of the store at `url`, every call to a server bounded by
/// `bound`. URLs: `sqlite://PATH`, `redis://HOST[:PORT][/DB]`, `postgres://USER@HOST[:PORT]/DB`,
/// `mysql://USER@HOST[:PORT]/DB` (also `mariadb://`), `memory:` (this process only) and `noop:`
/// (keeps nothing: every acquire is granted).
///
/// # Errors
/// [`StoreError::Url`] for an unknown scheme or a malformed URL, [`StoreError::NotCompiled`] for
/// a store this build lacks, or the store's own error (unreachable server, foreign schema...).
pub fn open(url: &str, namespace: &str, bound: Duration) -> Result<Box<dyn Store>, StoreError> {
    let timeout = bound;
    let _ = timeout; // unused when no server store is compiled in
    let scheme = url.split_once(':').map_or("", |(s, _)| s);
    match scheme {
        "memory" => Ok(Box::new(crate::store::MemoryStore::new(namespace)?)),
        "noop" => Ok(Box::new(crate::store::NoopStore::new(namespace)?)),
        "sqlite" => open_sqlite(url, namespace),
        "redis" | "rediss" | "redis+sentinel" => {
            #[cfg(feature = "redis")]
            return Ok(Box::new(crate::store::RedisStore::open(url, namespace, timeout)?));
            #[cfg(not(feature = "redis"))]
            return Err(not_compiled("redis", "redis"));
        }
        "postgres" | "postgresql" => {
            #[cfg(feature = "postgres")]
            return Ok(Box::new(crate::store::PostgresStore::open(
                url, namespace, timeout,
            )?));
            #[cfg(not(feature = "postgres"))]
            return Err(not_compiled("postgres", "postgres"));
        }
        "mysql" | "mariadb" => {
            #[cfg(feature = "mysql")]
            return Ok(Box::new(crate::store::MysqlStore::open(
                url, namespace, timeout,
            )?));
            #[cfg(not(feature = "mysql"))]
            return Err(not_compiled("mysql", "mysql"));
        }
        _ => Err(StoreError::Url {
            url: without_password(url),
            reason: "unknown scheme: use sqlite://PATH, redis://, redis+sentinel://, postgres://, mysql://, memory: or noop:"
                .into(),
        }),
    }
}

#[allow(dead_code)]
fn not_compiled(scheme: &str, feature: &'static str) -> StoreError {
    StoreError::NotCompiled {
        scheme: scheme.to_owned(),
        feature,
    }
}

fn open_sqlite(url: &str, namespace: &str) -> Result<Box<dyn Store>, StoreError> {
    let path = url.strip_prefix("sqlite://").unwrap_or_default();
    if path.is_empty() {
        return Err(StoreError::Url {
            url: url.to_owned(),
            reason: "no file: use sqlite://PATH (sqlite:///absolute/path or sqlite://relative)"
                .into(),
        });
    }
    #[cfg(feature = "sqlite")]
    return Ok(Box::new(crate::store::SqliteStore::open(
        std::path::Path::new(path),
        namespace,
    )?));
    #[cfg(not(feature = "sqlite"))]
    {
        let _ = namespace;
        Err(not_compiled("sqlite", "sqlite"))
    }
}

/// `url` with any password replaced by `***`, for messages.
#[must_use]
pub(crate) fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            without_password("redis://u:secret@h:1/0"),
            "redis://u:***@h:1/0"
        );
        assert_eq!(without_password("redis://h:1"), "redis://h:1");
        assert_eq!(
            without_password("postgres://a:b@h/db?x=1"),
            "postgres://a:***@h/db?x=1"
        );
    }

    #[test]
    fn bad_urls_are_named() {
        for url in ["ftp://x", "nothing", "sqlite://"] {
            let e = open(url, "ns", DEFAULT_BOUND).err().unwrap();
            assert!(matches!(e, StoreError::Url { .. }), "{url}: {e}");
        }
        assert!(matches!(
            open("memory:", "Bad-Name", DEFAULT_BOUND),
            Err(StoreError::Namespace { .. })
        ));
    }
}
