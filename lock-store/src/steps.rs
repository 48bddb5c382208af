//! The store-side steps: every script and statement the stores send, kept as files in
//! `lock-store/steps/` that every client loads unchanged (this crate includes them at build
//! time; the npm package ships the same files). `steps/README.md` gives the format; in short:
//!
//! - A `.sql` file holds named steps. A line `-- step: <name>` starts one; it runs to the next
//!   such line. Other lines that start with `--` are comments and are not sent; the step's text
//!   is its remaining lines, joined with `\n`, without leading or trailing blank lines.
//! - A `.lua` file is one Redis script, sent byte for byte (its SHA-1 names it in `EVALSHA`).
//! - `{name}` is a placeholder that the client fills (the namespace's checked identifier, the
//!   format); every other brace is SQL's own.

/// The Redis store's compare-and-set script.
#[cfg(feature = "redis")]
pub(crate) const REDIS_CAS: &str = include_str!("../steps/redis-cas.lua");

/// The PostgreSQL store's steps.
#[cfg(feature = "postgres")]
pub(crate) const POSTGRES: &str = include_str!("../steps/postgres.sql");

/// The MariaDB / MySQL store's steps.
#[cfg(feature = "mysql")]
pub(crate) const MYSQL: &str = include_str!("../steps/mysql.sql");

/// The SQLite store's steps.
#[cfg(feature = "sqlite")]
pub(crate) const SQLITE: &str = include_str!("../steps/sqlite.sql");

/// The marker line that starts a step.
const MARKER: &str = "-- step: ";

/// Every step of `file` as (name, text), in file order.
pub(crate) fn all(file: &str) -> Vec<(&str, String)> {
    let mut steps = Vec::new();
    let mut current: Option<(&str, Vec<&str>)> = None;
    for line in file.lines() {
        if let Some(name) = line.strip_prefix(MARKER) {
            steps.extend(current.take().map(|(n, lines)| (n, join(&lines))));
            current = Some((name.trim(), Vec::new()));
        } else if let Some((_, lines)) = current.as_mut() {
            if !line.trim_start().starts_with("--") {
                lines.push(line);
            }
        }
    }
    steps.extend(current.map(|(n, lines)| (n, join(&lines))));
    steps
}

fn join(lines: &[&str]) -> String {
    let first = lines.iter().position(|l| !l.trim().is_empty());
    let last = lines.iter().rposition(|l| !l.trim().is_empty());
    match (first, last) {
        (Some(first), Some(last)) => lines[first..=last].join("\n"),
        _ => String::new(),
    }
}

/// Step `name` of `file`, its placeholders filled from `values` (`("ns", "app")` fills
/// `{ns}`). A step that is not in the file is a fault of this build (a debug build, every test
/// run, stops on it; a release build sends an empty text, which does nothing and reads no row).
pub(crate) fn step(file: &str, name: &str, values: &[(&str, &str)]) -> String {
    let found = all(file).into_iter().find(|(n, _)| *n == name);
    debug_assert!(found.is_some(), "no step {name:?} in the steps file");
    fill(&found.map(|(_, text)| text).unwrap_or_default(), values)
}

/// `text` with each `{name}` of `values` replaced by its value.
pub(crate) fn fill(text: &str, values: &[(&str, &str)]) -> String {
    let mut out = text.to_owned();
    for (name, value) in values {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    out
}

#[cfg(test)]
/// What a client sends that is not a step: transaction control around steps, and the
/// drivers' own questions (the `mysql` crate asks for `max_allowed_packet` at each connection).
/// `steps/README.md` lists them too.
pub(crate) const FRAMING: [&str; 6] = [
    "START TRANSACTION",
    "BEGIN",
    "BEGIN IMMEDIATE",
    "COMMIT",
    "ROLLBACK",
    "SELECT @@max_allowed_packet",
];

#[cfg(test)]
/// Whether `text` is one of `steps`, one statement of one (a batch's part), or framing.
pub(crate) fn is_step(text: &str, steps: &[String]) -> bool {
    let norm = |t: &str| t.trim().trim_end_matches(';').trim().to_owned();
    let text = norm(text);
    FRAMING.contains(&text.as_str())
        || steps.iter().any(|step| {
            norm(step) == text
                || step
                    .split(';')
                    .any(|part| !norm(part).is_empty() && norm(part) == text)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_named_sections_without_comment_lines() {
        let file = "-- a file's comment\n-- step: one\n-- about it\nSELECT 1\n  -- inner\n\
                    FROM t\n\n-- step: two\n\nSELECT '{}', {ns}\n";
        assert_eq!(
            all(file),
            [
                ("one", "SELECT 1\nFROM t".into()),
                ("two", "SELECT '{}', {ns}".into())
            ]
        );
        assert_eq!(step(file, "two", &[("ns", "app")]), "SELECT '{}', app");
    }

    /// Every file parses into distinct names, none empty, and no placeholder is left that
    /// the clients do not fill.
    #[test]
    fn every_file_has_distinct_non_empty_steps() {
        let files: &[(&str, &str, &[&str])] = &[
            #[cfg(feature = "postgres")]
            ("postgres", POSTGRES, &["ns", "format", "channel"]),
            #[cfg(feature = "mysql")]
            ("mysql", MYSQL, &["ns", "format"]),
            #[cfg(feature = "sqlite")]
            ("sqlite", SQLITE, &["format"]),
        ];
        for (label, file, placeholders) in files {
            let steps = all(file);
            assert!(!steps.is_empty(), "{label}");
            let mut names: Vec<_> = steps.iter().map(|(n, _)| *n).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), steps.len(), "{label}: a name twice");
            for (name, text) in &steps {
                assert!(!text.is_empty(), "{label}: {name} is empty");
                let filled = fill(
                    text,
                    &placeholders.iter().map(|p| (*p, "x")).collect::<Vec<_>>(),
                );
                for p in ["{ns}", "{format}", "{channel}", "{table}"] {
                    assert!(!filled.contains(p), "{label}: {name} leaves {p}");
                }
            }
        }
    }
}
