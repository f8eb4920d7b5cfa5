//! A progress bar on stderr while the simulation runs, only if stderr is a terminal.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use archers::game::Observer;

/// The bar's thread; [`Progress::finish`] stops it and clears the line.
pub(crate) struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    /// Starts drawing `observer`'s progress towards `turns` (every 200 ms).
    pub(crate) fn start(observer: Arc<Observer>, turns: u32) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = std::io::stderr().is_terminal().then(|| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let started = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    let done = observer.progress.load(Ordering::Relaxed).min(turns);
                    let filled = (done as usize * 40) / turns.max(1) as usize;
                    eprint!(
                        "\r  [{}{}] {:3}%  turn {done}/{turns}  {:.0} s ",
                        "#".repeat(filled),
                        "-".repeat(40 - filled),
                        done as u64 * 100 / u64::from(turns.max(1)),
                        started.elapsed().as_secs_f64()
                    );
                    let _ = std::io::stderr().flush();
                    std::thread::sleep(Duration::from_millis(200));
                }
                eprint!("\r{}\r", " ".repeat(72));
            })
        });
        Progress { stop, thread }
    }

    /// Stops the bar and clears its line.
    pub(crate) fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
