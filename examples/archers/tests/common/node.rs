//! A demo process whose stdout lines arrive on a channel, for the tests that run `archers
//! host` and `archers client` over real sockets (included with `#[path]` where used).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

/// A child whose stdout lines arrive on a channel (a reader thread does the blocking reads, so
/// a silent child cannot hang the test).
pub(crate) struct Node {
    pub(crate) child: Child,
    lines: Receiver<String>,
}

impl Node {
    /// Starts the demo binary with `args`, stdout and stderr piped.
    pub(crate) fn spawn(args: &[&str]) -> Node {
        let mut command = Command::new(env!("CARGO_BIN_EXE_archers"));
        command.args(args);
        Node::from_command(command)
    }

    /// Starts `command`, stdout and stderr piped.
    pub(crate) fn from_command(mut command: Command) -> Node {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the process");
        let (tx, lines) = channel();
        let stdout = child.stdout.take().expect("piped stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Node { child, lines }
    }

    /// The next line starting with `prefix` (what follows it), or `None` at the deadline or
    /// when the child's stdout ends.
    pub(crate) fn line(&self, prefix: &str, deadline: Instant) -> Option<String> {
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let line = self.lines.recv_timeout(left).ok()?;
            if let Some(rest) = line.strip_prefix(prefix) {
                return Some(rest.trim().to_owned());
            }
        }
    }

    /// Waits for the exit (killing the child at the deadline); returns success and stderr.
    pub(crate) fn finish(mut self, deadline: Instant) -> (bool, String) {
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => break None,
            }
        };
        if status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
        }
        (status.is_some_and(|s| s.success()), stderr)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
