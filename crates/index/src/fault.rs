//! Fault injection shared by the store and the command log (built for this
//! crate's tests and, with the `fault-injection` feature, for other crates'
//! tests; never in a release build).

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a closed [`Gate`] holds an operation at most: a guard, so that
/// a test that fails before opening its gate ends instead of hanging.
const GUARD: Duration = Duration::from_secs(120);

/// A gate that stalls an operation (a store write, a command-log fsync)
/// for as long as a test keeps it closed. A test can then show what
/// happens *while* the operation is stalled — a deadline answered, a query
/// served — as an ordering, with no wall-clock bound that a busy machine
/// could break.
#[derive(Debug, Clone, Default)]
pub struct Gate(Arc<(Mutex<State>, Condvar)>);

#[derive(Debug, Default)]
struct State {
    closed: bool,
    /// Operations held at the gate now.
    waiting: usize,
}

impl Gate {
    /// Stalls every later [`Gate::pass`] until [`Gate::open`].
    pub fn close(&self) {
        self.0 .0.lock().unwrap_or_else(|p| p.into_inner()).closed = true;
    }

    /// Lets stalled and later operations through.
    pub fn open(&self) {
        self.0 .0.lock().unwrap_or_else(|p| p.into_inner()).closed = false;
        self.0 .1.notify_all();
    }

    /// How many operations the gate holds now: a test waits for one to
    /// arrive before it acts on "while the operation is stalled".
    pub fn waiting(&self) -> usize {
        self.0 .0.lock().unwrap_or_else(|p| p.into_inner()).waiting
    }

    /// Returns at once while open; while closed, when opened (or after
    /// two minutes, the guard against a test that never opens it).
    pub fn pass(&self) {
        let (state, cv) = &*self.0;
        let deadline = Instant::now() + GUARD;
        let mut g = state.lock().unwrap_or_else(|p| p.into_inner());
        g.waiting += 1;
        while g.closed {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else { break };
            g = cv.wait_timeout(g, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        g.waiting -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_gate_holds_until_opened() {
        let gate = Gate::default();
        gate.pass();
        gate.close();
        let (tx, rx) = std::sync::mpsc::channel();
        let g = gate.clone();
        let t = std::thread::spawn(move || {
            g.pass();
            tx.send(()).unwrap();
        });
        while gate.waiting() == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Held: nothing arrives while the gate is closed.
        assert!(rx.try_recv().is_err());
        assert_eq!(gate.waiting(), 1);
        gate.open();
        rx.recv_timeout(Duration::from_secs(60)).expect("passed once opened");
        t.join().unwrap();
    }
}
