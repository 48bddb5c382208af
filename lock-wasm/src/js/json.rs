//! A minimal JSON writer for the few structured answers of the JS face (events, inspection,
//! stats, error details, limits). Field names are camelCase, as JS users expect; the values are
//! numbers and strings only, so this is all the JSON the binding needs.

use std::fmt::Write;

/// Builds one JSON object, field by field.
pub struct Obj(String);

impl Obj {
    /// An empty object.
    pub fn new() -> Self {
        Obj(String::from("{"))
    }

    fn sep(&mut self, name: &str) {
        if self.0.len() > 1 {
            self.0.push(',');
        }
        self.0.push('"');
        self.0.push_str(name);
        self.0.push_str("\":");
    }

    /// Adds a number (u64 values become JS numbers; exact below 2^53).
    pub fn num(mut self, name: &str, value: u64) -> Self {
        self.sep(name);
        let _ = write!(self.0, "{value}");
        self
    }

    /// Adds a string.
    pub fn str(mut self, name: &str, value: &str) -> Self {
        self.sep(name);
        push_string(&mut self.0, value);
        self
    }

    /// Adds an already-encoded JSON value.
    pub fn raw(mut self, name: &str, json: &str) -> Self {
        self.sep(name);
        self.0.push_str(json);
        self
    }

    /// The finished object.
    pub fn done(mut self) -> String {
        self.0.push('}');
        self.0
    }
}

/// Appends `value` as a JSON string literal.
pub fn push_string(out: &mut String, value: &str) {
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A JSON array of already-encoded values.
pub fn array<I: IntoIterator<Item = String>>(items: I) -> String {
    let mut out = String::from("[");
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&item);
    }
    out.push(']');
    out
}

/// A JSON string literal.
pub fn string(value: &str) -> String {
    let mut out = String::new();
    push_string(&mut out, value);
    out
}

/// A snake_case name in camelCase (`max_waiters_per_key` → `maxWaitersPerKey`).
pub fn camel(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}
