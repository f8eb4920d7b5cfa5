//! The packet trace, folded into a digest as datagrams are sent: what makes two runs of one
//! seed comparable although TLS draws fresh keys (the bytes differ; time, endpoints, size
//! and fate do not).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;

/// The packet trace, folded as it happens.
#[derive(Debug)]
pub(crate) struct Trace {
    pub(crate) digest: u64,
    pub(crate) datagrams: u64,
    pub(crate) copies: u64,
    /// (source ip, destination ip) → (datagrams, bytes).
    flows: BTreeMap<(IpAddr, IpAddr), (u64, u64)>,
}

impl Trace {
    pub(crate) fn new() -> Trace {
        Trace { digest: 0xcbf2_9ce4_8422_2325, datagrams: 0, copies: 0, flows: BTreeMap::new() }
    }

    pub(crate) fn record(&mut self, from: SocketAddr, to: SocketAddr, len: usize, copies: usize) {
        let at = turmoil::elapsed().as_millis() as u64;
        let text = format!("{at} {from} {to} {len} {copies};");
        for byte in text.bytes() {
            self.digest = (self.digest ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.datagrams += 1;
        self.copies += copies as u64;
        let flow = self.flows.entry((from.ip(), to.ip())).or_default();
        flow.0 += 1;
        flow.1 += len as u64;
    }
}

/// Machine `p{machine}`'s flows so far: `(datagrams, bytes)` it sent, and the host sent it.
pub(crate) fn flows(trace: &Mutex<Trace>, machine: usize) -> ((u64, u64), (u64, u64)) {
    let mine = turmoil::lookup(format!("p{machine}"));
    let host = turmoil::lookup("host");
    let trace = trace.lock().expect("not poisoned");
    let up = trace.flows.get(&(mine, host)).copied().unwrap_or_default();
    let down = trace.flows.get(&(host, mine)).copied().unwrap_or_default();
    (up, down)
}

/// Machine `p{machine}`'s flows with every other machine: `(datagrams, bytes)` it sent and
/// it was sent.
pub(crate) fn flows_all(trace: &Mutex<Trace>, machine: usize) -> ((u64, u64), (u64, u64)) {
    let mine = turmoil::lookup(format!("p{machine}"));
    let trace = trace.lock().expect("not poisoned");
    let (mut sent, mut received) = ((0, 0), (0, 0));
    for (&(from, to), &(datagrams, bytes)) in &trace.flows {
        if from == mine {
            sent = (sent.0 + datagrams, sent.1 + bytes);
        }
        if to == mine {
            received = (received.0 + datagrams, received.1 + bytes);
        }
    }
    (sent, received)
}
