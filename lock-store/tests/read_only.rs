//! Reading creates nothing: on every store, a namespace that was never written answers
//! `NoNamespace` to `inspect`, `keys` and `last_fence` (never "free") and the store holds
//! nothing of it afterwards; the first acquire installs it; an uninstalled namespace is gone
//! again, and a `Locks` that still has it open installs it anew at its next write. On
//! PostgreSQL and MariaDB, a role with only the rights to use a namespace uses one an operator
//! installed, and cannot install one itself (a clear error). (SQLite: `cli.rs`.)
#![cfg(all(feature = "redis", feature = "postgres", feature = "mysql"))]
mod common;

use std::time::Duration;

use lock_store::{store, Error, Locks, StoreError};

fn no_namespace<T: std::fmt::Debug>(label: &str, r: Result<T, Error>) {
    match r {
        Err(Error::Store(StoreError::NoNamespace { store })) => {
            assert!(store.contains("namespace"), "{label}: {store}");
        }
        other => panic!("{label}: {other:?}"),
    }
}

/// What the server holds of namespace `ns` (tables, schema, keys), by its own client.
fn traces(label: &str, url: &str, ns: &str) -> usize {
    match label {
        "redis" => {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let keys: Vec<String> = redis::cmd("KEYS")
                .arg(format!("{{el:{ns}}}*"))
                .query(&mut c)
                .unwrap();
            keys.len()
        }
        "postgres" => {
            let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
            let n: i64 = c
                .query_one(
                    "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1",
                    &[&ns],
                )
                .unwrap()
                .get(0);
            n as usize
        }
        "mysql" => {
            use mysql::prelude::Queryable;
            let mut c = mysql::Conn::new(mysql::Opts::from_url(url).unwrap()).unwrap();
            let n: Option<i64> = c
                .exec_first(
                    "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE ?",
                    (format!("{ns}\\_%"),),
                )
                .unwrap();
            n.unwrap_or(0) as usize
        }
        other => panic!("no traces for {other}"),
    }
}

#[test]
fn reads_create_nothing_and_the_first_write_installs() {
    for (label, url) in common::server_urls() {
        let ns = common::unique_namespace("readonly");
        let _cleanup = common::Cleanup(|| common::uninstall(&url, &ns));
        let reader = Locks::open(&url, &ns).unwrap();
        no_namespace(label, reader.inspect("job"));
        no_namespace(label, reader.keys());
        no_namespace(label, reader.last_fence());
        assert_eq!(
            traces(label, &url, &ns),
            0,
            "{label}: a read created something"
        );
        // The first acquire, by another client, installs; the reader then sees the key.
        let writer = Locks::open(&url, &ns).unwrap();
        let lease = writer
            .try_acquire("job", "w", Duration::from_secs(30))
            .unwrap();
        assert!(traces(label, &url, &ns) > 0, "{label}");
        let info = reader.inspect("job").unwrap().expect("held");
        assert_eq!(info.holder().unwrap().fence, lease.fence(), "{label}");
        assert_eq!(reader.keys().unwrap(), vec!["job".to_owned()], "{label}");
        lease.release().unwrap();
        // Uninstalled: gone for readers; the next write of an open `Locks` installs it again.
        store::open(&url, &ns, store::DEFAULT_BOUND)
            .unwrap()
            .uninstall()
            .unwrap();
        assert_eq!(
            traces(label, &url, &ns),
            0,
            "{label}: uninstall left something"
        );
        no_namespace(label, reader.inspect("job"));
        let again = writer
            .try_acquire("job", "w", Duration::from_secs(30))
            .unwrap();
        assert!(reader.inspect("job").unwrap().is_some(), "{label}");
        again.release().unwrap();
    }
}

/// Reading a namespace that does not exist yet, again and again (a replica that inspects before
/// anyone wrote), opens no new connection per read, on either face: the connection that found
/// nothing looks again.
#[test]
fn repeated_reads_of_a_missing_namespace_reuse_one_connection() {
    for (label, url) in common::server_urls() {
        let ns = common::unique_namespace("missing");
        let proxy = common::proxy::Proxy::for_url(&url);
        let via = proxy.url(&url);
        let reader = Locks::open(&via, &ns).unwrap();
        let opened = proxy.accepted();
        for _ in 0..5 {
            no_namespace(label, reader.inspect("job"));
        }
        // Redis and MariaDB look on the store's one connection; PostgreSQL keeps the one that
        // looked.
        assert_eq!(
            proxy.accepted(),
            opened,
            "{label}: reads opened connections"
        );
        #[cfg(feature = "tokio")]
        common::runtime(1).block_on(async {
            let reader = lock_store::aio::Locks::open(&via, &ns).await.unwrap();
            let opened = proxy.accepted();
            for _ in 0..5 {
                no_namespace(label, reader.inspect("job").await);
            }
            assert_eq!(
                proxy.accepted(),
                opened,
                "{label} (async): reads opened connections"
            );
        });
        assert_eq!(
            traces(label, &url, &ns),
            0,
            "{label}: a read created something"
        );
    }
}

/// A PostgreSQL role with the rights to use a namespace (the service's) but not to create one
/// (`lockstore install` ran as an operator): it locks and reads; it cannot install another.
#[test]
fn postgres_a_role_that_may_not_create_uses_an_installed_namespace() {
    let base = common::postgres_url();
    let ns = common::unique_namespace("rights");
    let role = format!("{ns}_svc");
    let mut admin = postgres::Client::connect(&base, postgres::NoTls).unwrap();
    let _cleanup = common::Cleanup(|| {
        let mut admin = postgres::Client::connect(&base, postgres::NoTls).unwrap();
        let _ = admin.batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {ns} CASCADE; DROP OWNED BY {role}; DROP ROLE IF EXISTS {role}"
        ));
    });
    store::open(&base, &ns, store::DEFAULT_BOUND)
        .unwrap()
        .install()
        .unwrap();
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN; \
             GRANT USAGE ON SCHEMA {ns} TO {role}; \
             GRANT SELECT, INSERT, UPDATE, DELETE ON {ns}.records TO {role}; \
             GRANT SELECT ON {ns}.meta TO {role}; \
             GRANT USAGE, SELECT ON SEQUENCE {ns}.fences TO {role};"
        ))
        .unwrap();
    let url = base.replacen("postgres@", &format!("{role}@"), 1);
    let locks = Locks::open(&url, &ns).unwrap();
    let lease = locks
        .try_acquire("job", "svc", Duration::from_secs(30))
        .unwrap();
    assert_eq!(locks.keys().unwrap(), vec!["job".to_owned()]);
    lease.release().unwrap();
    // Another namespace: it cannot create it, and says why.
    let other = Locks::open(&url, &format!("{ns}_x")).unwrap();
    match other.try_acquire("job", "svc", Duration::from_secs(30)) {
        Err(Error::Store(StoreError::Schema { reason, .. })) => {
            assert!(reason.contains("42501"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

/// A MariaDB user with the rights docs/stores.md lists for using a namespace (not creating one)
/// locks, waits its turn and reads in a namespace an operator installed; it cannot install
/// another, and says why.
#[test]
fn mariadb_a_user_that_may_not_create_uses_an_installed_namespace() {
    use mysql::prelude::Queryable;
    let base = common::mysql_url();
    let ns = common::unique_namespace("rights");
    let user = format!("{ns}_svc");
    let admin = || mysql::Conn::new(mysql::Opts::from_url(&base).unwrap()).unwrap();
    let _cleanup = common::Cleanup(|| {
        let _ = admin().query_drop(format!("DROP USER IF EXISTS '{user}'@'%'"));
        common::uninstall(&base, &ns);
    });
    store::open(&base, &ns, store::DEFAULT_BOUND)
        .unwrap()
        .install()
        .unwrap();
    let mut a = admin();
    a.query_drop(format!("CREATE USER '{user}'@'%'")).unwrap();
    for grant in [
        format!("GRANT SELECT, INSERT, UPDATE, DELETE ON test.`{ns}_records` TO '{user}'@'%'"),
        format!("GRANT SELECT ON test.`{ns}_meta` TO '{user}'@'%'"),
        format!("GRANT SELECT, INSERT ON test.`{ns}_fences` TO '{user}'@'%'"),
        format!("GRANT EXECUTE ON PROCEDURE test.`{ns}_cas` TO '{user}'@'%'"),
    ] {
        a.query_drop(grant).unwrap();
    }
    let url = base.replacen("root@", &format!("{user}@"), 1);
    let locks = Locks::open(&url, &ns).unwrap();
    let lease = locks
        .try_acquire("job", "svc", Duration::from_secs(30))
        .unwrap();
    let waiter = {
        let locks = locks.clone();
        std::thread::spawn(move || {
            locks.acquire(
                "job",
                "next",
                Duration::from_secs(30),
                Duration::from_secs(10),
            )
        })
    };
    common::eventually("the waiter queued", || {
        locks
            .inspect("job")
            .unwrap()
            .filter(|i| !i.waiters.is_empty())
    });
    assert_eq!(locks.keys().unwrap(), vec!["job".to_owned()]);
    assert_eq!(locks.last_fence().unwrap(), lease.fence());
    lease.release().unwrap();
    let next = waiter.join().unwrap().unwrap();
    assert!(next.fence() > lease.fence());
    next.release().unwrap();
    // Another namespace: MariaDB refuses even to look for its tables (privileges are checked
    // before existence), at open or at the first write; either way the error says why.
    let other = Locks::open(&url, &format!("{ns}_x")).and_then(|other| {
        other
            .try_acquire("job", "svc", Duration::from_secs(30))
            .map(drop)
    });
    match other {
        Err(Error::Store(StoreError::Schema { reason, .. })) => {
            assert!(reason.contains("denied"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}
