//! Bad input: wrong URLs, unreachable servers, missing permissions, foreign tables and keys in
//! a namespace. Each is a clear error naming what is wrong (at open, or at the install of the
//! first write), and nothing in the store changes.
mod common;

use std::time::Duration;

use lock_store::{store, StoreError};

/// The error of opening `url` and installing namespace `ns` there (what a first write does:
/// opening alone creates nothing).
fn open_err(url: &str, ns: &str) -> StoreError {
    let installed = store::open(url, ns, Duration::from_secs(2)).and_then(|mut s| {
        s.install()?;
        Ok(s)
    });
    match installed {
        Ok(store) => panic!("{url}: opened and installed {}", store.describe()),
        Err(e) => e,
    }
}

#[test]
fn wrong_urls_and_namespaces_are_named() {
    for url in ["ftp://host", "no-scheme", "sqlite://"] {
        let e = open_err(url, "ns");
        assert!(matches!(e, StoreError::Url { .. }), "{url}: {e}");
    }
    #[cfg(feature = "postgres")]
    {
        // A multi-host URL's target: any or read-write, as libpq reads it.
        let url = "postgres://u@127.0.0.1:1,127.0.0.1:2/db?target_session_attrs=primary";
        let e = open_err(url, "ns");
        assert!(matches!(e, StoreError::Url { .. }), "{url}: {e}");
    }
    let e = open_err("memory:", "Bad Name");
    assert!(e.to_string().contains("Bad Name"), "{e}");
    let e = open_err("memory:", "");
    assert!(matches!(e, StoreError::Namespace { .. }), "{e}");
}

#[cfg(feature = "sqlite")]
#[test]
fn sqlite_refuses_a_foreign_table_and_leaves_it() {
    let dir = std::env::temp_dir().join(common::unique_namespace("bad"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("app.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE expiring_lock_records (id INTEGER); INSERT INTO expiring_lock_records VALUES (7);")
        .unwrap();
    let e = open_err(&format!("sqlite://{}", path.display()), "ns");
    assert!(matches!(e, StoreError::Schema { .. }), "{e}");
    assert!(e.to_string().contains("expiring_lock_records"), "{e}");
    let kept: i64 = conn
        .query_row("SELECT id FROM expiring_lock_records", [], |r| r.get(0))
        .unwrap();
    assert_eq!(kept, 7);
    // A directory is not a database file.
    let e = open_err(&format!("sqlite://{}", dir.display()), "ns");
    assert!(
        matches!(e, StoreError::Connect { .. } | StoreError::Schema { .. }),
        "{e}"
    );
}

#[cfg(feature = "redis")]
#[test]
fn redis_unreachable_and_foreign_keys() {
    let e = open_err("redis://127.0.0.1:1", "ns");
    assert!(matches!(e, StoreError::Connect { .. }), "{e}");
    assert!(e.to_string().contains("127.0.0.1:1"), "{e}");
    let e = open_err("redis://user:secret@127.0.0.1:1", "ns");
    assert!(!e.to_string().contains("secret"), "password in {e}");
    // A foreign value where the namespace keeps its format marker: refused, left as it was.
    let ns = common::unique_namespace("bad");
    let key = format!("{{el:{ns}}}:format");
    let mut admin = redis::Client::open(common::redis_url())
        .unwrap()
        .get_connection()
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg("someone else's")
        .query(&mut admin)
        .unwrap();
    let e = open_err(&common::redis_url(), &ns);
    assert!(matches!(e, StoreError::Schema { .. }), "{e}");
    let kept: String = redis::cmd("GET").arg(&key).query(&mut admin).unwrap();
    assert_eq!(kept, "someone else's");
    let _: () = redis::cmd("DEL").arg(&key).query(&mut admin).unwrap();
    let _: () = redis::cmd("LPUSH")
        .arg(&key)
        .arg("x")
        .query(&mut admin)
        .unwrap();
    let e = open_err(&common::redis_url(), &ns);
    assert!(matches!(e, StoreError::Schema { .. }), "{e}");
    let _: () = redis::cmd("DEL").arg(&key).query(&mut admin).unwrap();
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_unreachable_permissions_and_foreign_tables() {
    let e = open_err("postgres://postgres@127.0.0.1:1/test", "ns");
    assert!(matches!(e, StoreError::Connect { .. }), "{e}");
    let e = open_err(
        "postgres://postgres@127.0.0.1:5432/no_such_database_here",
        "ns",
    );
    assert!(matches!(e, StoreError::Connect { .. }), "{e}");
    assert!(e.to_string().contains("no_such_database_here"), "{e}");
    let mut admin = postgres::Client::connect(&common::postgres_url(), postgres::NoTls).unwrap();
    let ns = common::unique_namespace("bad");
    // A role that may not create schemas.
    let role = format!("{ns}_reader");
    admin
        .batch_execute(&format!("CREATE ROLE {role} LOGIN"))
        .unwrap();
    let base = common::postgres_url();
    let url = base.replacen("postgres@", &format!("{role}@"), 1);
    let e = open_err(&url, &ns);
    assert!(matches!(e, StoreError::Schema { .. }), "{e}");
    assert!(e.to_string().contains("42501"), "{e}");
    admin.batch_execute(&format!("DROP ROLE {role}")).unwrap();
    // A foreign table where the namespace keeps its records.
    admin
        .batch_execute(&format!(
            "CREATE SCHEMA {ns}; CREATE TABLE {ns}.records (id int); INSERT INTO {ns}.records VALUES (7);"
        ))
        .unwrap();
    let e = open_err(&base, &ns);
    assert!(matches!(e, StoreError::Schema { .. }), "{e}");
    assert!(e.to_string().contains(&format!("{ns}.records")), "{e}");
    let kept: i32 = admin
        .query_one(&format!("SELECT id FROM {ns}.records"), &[])
        .unwrap()
        .get(0);
    assert_eq!(kept, 7);
    admin
        .batch_execute(&format!("DROP SCHEMA {ns} CASCADE"))
        .unwrap();
}

#[cfg(feature = "mysql")]
#[test]
fn mariadb_unreachable_permissions_and_foreign_tables() {
    use mysql::prelude::Queryable;
    let e = open_err("mysql://root@127.0.0.1:1/test", "ns");
    assert!(matches!(e, StoreError::Connect { .. }), "{e}");
    let e = open_err("mysql://root@127.0.0.1:3306", "ns");
    assert!(matches!(e, StoreError::Url { .. }), "{e}");
    let base = common::mysql_url();
    let mut admin = mysql::Conn::new(mysql::Opts::from_url(&base).unwrap()).unwrap();
    let ns = common::unique_namespace("bad");
    // A user that may only read.
    let user = format!("{ns}_r");
    admin
        .query_drop(format!("CREATE USER '{user}'@'%'"))
        .unwrap();
    admin
        .query_drop(format!("GRANT SELECT ON test.* TO '{user}'@'%'"))
        .unwrap();
    let url = base.replacen("root@", &format!("{user}@"), 1);
    let e = open_err(&url, &ns);
    assert!(matches!(e, StoreError::Schema { .. }), "{e}");
    admin.query_drop(format!("DROP USER '{user}'@'%'")).unwrap();
    // A foreign table where the namespace keeps its records.
    admin
        .query_drop(format!("CREATE TABLE `{ns}_records` (id INT)"))
        .unwrap();
    admin
        .query_drop(format!("INSERT INTO `{ns}_records` VALUES (7)"))
        .unwrap();
    let e = open_err(&base, &ns);
    assert!(matches!(e, StoreError::Schema { .. }), "{e}");
    assert!(e.to_string().contains(&format!("{ns}_records")), "{e}");
    let kept: Option<i32> = admin
        .query_first(format!("SELECT id FROM `{ns}_records`"))
        .unwrap();
    assert_eq!(kept, Some(7));
    admin
        .query_drop(format!("DROP TABLE `{ns}_records`"))
        .unwrap();
    admin
        .query_drop(format!("DROP TABLE IF EXISTS `{ns}_meta`"))
        .unwrap();
}
