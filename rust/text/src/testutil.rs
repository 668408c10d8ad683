//! Helpers shared by the unit tests.

use std::io::Write;
use std::process::{Command, Stdio};

/// Runs a Python script (`$VRS_PYTHON` or `python3`) with `input` as JSON on stdin and
/// returns its stdout; panics with stderr when it fails.
pub(crate) fn python(script: &str, input: &serde_json::Value) -> String {
    let exe = std::env::var("VRS_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut child = Command::new(&exe)
        .args(["-c", script])
        .env("TOKENIZERS_PARALLELISM", "false")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {exe}: {e}"));
    let data = serde_json::to_vec(input).unwrap();
    child.stdin.take().unwrap().write_all(&data).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "python failed:\n{}\n{}",
        script,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
