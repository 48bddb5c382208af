//! A Node client of the shared stores (the npm package's `Locks.open`), driven line by line
//! from a Rust test through `tests/js/lib/node-client.mjs`, so that the Rust suites' throwaway
//! servers (TLS, restarts) test the Node client too. Only when `LOCKSTORE_NODE_WORKERS` is set
//! (`scripts/test.sh` sets it after building the npm engine); a run without says so.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// What the Node client answered when a request failed: its error's code and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeError {
    /// `StoreError`/`LockError` code (`connect`, `lost`, `held`, ...).
    pub code: String,
    /// Its message.
    pub message: String,
}

/// A running Node client (killed when dropped).
pub struct NodeClient {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl NodeClient {
    /// Starts one, or `None` (saying so) when `LOCKSTORE_NODE_WORKERS` is not set.
    pub fn start(test: &str) -> Option<NodeClient> {
        if std::env::var_os("LOCKSTORE_NODE_WORKERS").is_none() {
            println!("{test}: no Node client (LOCKSTORE_NODE_WORKERS is not set)");
            return None;
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        assert!(
            root.join("lock-wasm/js/engine/lock_wasm_bg.wasm").exists(),
            "LOCKSTORE_NODE_WORKERS is set but the npm engine is not built (scripts/build-npm.sh)"
        );
        let mut child = Command::new("node")
            .arg(root.join("tests/js/lib/node-client.mjs"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("node");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Some(NodeClient {
            child,
            stdin,
            stdout,
        })
    }

    /// Sends one request (its words) and reads the answer: the value, or the error.
    pub fn call(&mut self, words: &[&str]) -> Result<String, NodeError> {
        writeln!(self.stdin, "{}", words.join("\t")).expect("the Node client's stdin");
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .expect("the Node client's answer");
        let line = line.trim_end_matches('\n');
        let mut parts = line.splitn(3, '\t');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("ok"), value, None) => Ok(value.unwrap_or("").to_owned()),
            (Some("error"), Some(code), message) => Err(NodeError {
                code: code.to_owned(),
                message: message.unwrap_or("").to_owned(),
            }),
            _ => panic!("the Node client answered {line:?} to {words:?}"),
        }
    }
}

impl Drop for NodeClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
