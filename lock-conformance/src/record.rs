//! Writing vector files: a session of operations (with the answers and events a runtime gave)
//! becomes a scenario that every runner accepts unchanged. The browser playground exports its
//! sessions with this.

use serde_json::{json, Map, Value};

use crate::format::LimitsSpec;
use crate::{hex, Answer, EventCase, Op};

/// One step in the file's JSON form: the operation's fields, its answer as the expectation, and
/// the events it produced.
#[must_use]
pub fn step(op: &Op, answer: &Answer, events: &[EventCase]) -> Value {
    // An internally tagged enum always serializes as an object.
    let mut s = match serde_json::to_value(op) {
        Ok(Value::Object(fields)) => fields,
        _ => Map::new(),
    };
    let mut put = |k: &str, v: Value| {
        s.insert(k.to_owned(), v);
    };
    match answer {
        Answer::Result(Ok(outcome)) => put("ok", json!(outcome)),
        Answer::Result(Err(e)) | Answer::Inspect(Err(e)) | Answer::Query(Err(e)) => {
            put("err", json!(e));
        }
        Answer::Query(Ok(page)) => put("expect", json!(page)),
        Answer::More(more) => put("expect", json!(more)),
        Answer::Count(n) => put("expect", json!(n)),
        Answer::Inspect(Ok(view)) => put("expect", json!(view)),
        Answer::Stats(stats) => put("expect", json!(stats)),
        Answer::Wakeup(at) => put("expect", json!(at)),
        Answer::Snapshot(bytes) => put("expect", json!(hex::encode(bytes))),
        // `Unexpected` never comes from the native table, the only one sessions are recorded
        // from; a step without an expectation is refused when the file is loaded.
        Answer::Nothing | Answer::Unexpected(_) => {}
    }
    if !events.is_empty() {
        put("events", json!(events));
    }
    Value::Object(s)
}

/// A whole vector file with one scenario, laid out like the files in `tests/vectors/` (one step
/// per line).
#[must_use]
pub fn file(description: &str, name: &str, limits: &LimitsSpec, steps: &[Value]) -> String {
    let mut out = String::from("{\n");
    out.push_str(&format!("  \"description\": {},\n", json!(description)));
    out.push_str("  \"scenarios\": [\n    {\n");
    out.push_str(&format!("      \"name\": {},\n", json!(name)));
    if *limits != LimitsSpec::default() {
        out.push_str(&format!("      \"limits\": {},\n", json!(limits)));
    }
    out.push_str("      \"steps\": [\n");
    for (i, s) in steps.iter().enumerate() {
        let comma = if i + 1 < steps.len() { "," } else { "" };
        out.push_str(&format!("        {s}{comma}\n"));
    }
    out.push_str("      ]\n    }\n  ]\n}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_file, run_loaded, Driver, NativeDriver};

    /// A recorded session parses back strictly and passes against the core it was recorded on.
    #[test]
    fn a_recorded_session_is_a_valid_passing_vector_file() {
        let ops = [
            Op::TryAcquire {
                now: 0,
                key: "job".into(),
                owner: "a".into(),
                ttl: 100,
                options: Default::default(),
            },
            Op::Acquire {
                now: 10,
                key: "job".into(),
                owner: "b".into(),
                ttl: 50,
                wait_deadline: 1000,
                options: Default::default(),
            },
            Op::TryAcquire {
                now: 20,
                key: "job".into(),
                owner: "c".into(),
                ttl: 10,
                options: Default::default(),
            },
            Op::Inspect {
                now: 20,
                key: "job".into(),
            },
            Op::HandleTimeout { now: 100 },
            Op::Extend {
                now: 120,
                key: "job".into(),
                owner: "b".into(),
                fence: 2,
                ttl: 100,
            },
            Op::Stats { now: 120 },
            Op::NextWakeup,
            Op::Snapshot { now: 130 },
            Op::Restore {
                bytes: Some(vec![1, 2, 3]),
            },
        ];
        let mut driver = NativeDriver::default();
        let limits = LimitsSpec {
            max_keys: Some(5),
            ..LimitsSpec::default()
        };
        driver.start(&limits.resolve()).unwrap();
        let steps: Vec<Value> = ops
            .iter()
            .map(|op| {
                let answer = driver.run(op).unwrap();
                let events = driver.drain_events().unwrap();
                step(op, &answer, &events)
            })
            .collect();
        let text = file("recorded", "session", &limits, &steps);
        let loaded = parse_file("recorded.json", &text).expect("a recorded file parses strictly");
        assert_eq!(loaded.file.scenarios[0].limits, limits);
        let report = run_loaded(&mut NativeDriver::default(), &loaded);
        assert!(report.failures.is_empty(), "{report}\n{text}");
        assert_eq!(report.steps, ops.len());
        assert!(text.contains("\"granted\""), "{text}");
        assert!(text.contains("\"held\""), "{text}");
    }
}
