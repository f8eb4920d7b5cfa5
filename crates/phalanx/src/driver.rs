//! One driver loop for both ends of a session. A driver task is the only owner of a sans-IO
//! endpoint ([`phalanx_proto::Host`] or [`phalanx_proto::Client`]) and runs quinn's own
//! pattern (quinn `src/connection.rs`, `drive_timer`): wait for the first of an application
//! command, a network input or the endpoint's next timer; feed it in; fire due timers; drain
//! every datagram to send and every event; hand the game the turns it has room for.
//!
//! The two ends differ only in what a [`Side`] says: where an input comes from and what it
//! means, where a datagram goes, what an event does besides reaching the application, and
//! when the session is over. The application talks to a driver through a [`Handle`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use phalanx_proto::{
    CommandCodec, Snapshot, SnapshotError, SubmitError, Ticket, Turn, TurnBundle, TypedTurn,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use crate::session::NoTurn;
use crate::{Clock, SessionError};

/// Events kept for the application; see [`EventQueue`] for what happens past it.
const EVENTS_MAX: usize = 1_024;

/// Application commands waiting for the driver before `submit` and friends wait too.
const COMMANDS_MAX: usize = 256;

/// How long a driver sleeps when its endpoint has no timer armed, in milliseconds (a command
/// or an input wakes it sooner).
const IDLE_WAKE_MS: u64 = 60_000;

/// A message from the application to a driver: the commands both ends take, and `Own`, the
/// ones only this end takes.
pub(crate) enum Command<Own> {
    /// The game's state hash after a check turn.
    ReportHash(Turn, u64),
    /// The game's state after a turn the session wanted a snapshot of, with its hash.
    OfferSnapshot(Snapshot, oneshot::Sender<Result<(), SnapshotError>>),
    /// A command of this end only.
    Own(Own),
}

/// An encoded game command for our player, and where its ticket (or why it was refused) goes.
/// Submits have a channel of their own, so a [`Submitter`] can be handed to another thread
/// whatever the end.
type SubmitRequest = (Vec<u8>, oneshot::Sender<Result<Ticket, SubmitError>>);

/// Where a driver's network inputs come from (the host: its connection tasks; a client: its
/// one connection).
pub(crate) trait Inputs: Send {
    /// One input.
    type Item: Send;
    /// The next input; `None` once the source has ended (it is not asked again).
    fn next(&mut self) -> impl std::future::Future<Output = Option<Self::Item>> + Send;
}

impl<T: Send> Inputs for mpsc::Receiver<T> {
    type Item = T;

    async fn next(&mut self) -> Option<T> {
        self.recv().await
    }
}

/// The datagrams of a client's connection to the host (QUIC or raw UDP), then how it closed.
pub(crate) struct Datagrams {
    source: Source,
    closed: bool,
}

enum Source {
    #[cfg(feature = "quic")]
    Quic(quinn::Connection),
    #[cfg(feature = "udp")]
    Udp(crate::udp::UdpReceiver),
}

impl Datagrams {
    #[cfg(feature = "quic")]
    pub(crate) fn quic(connection: quinn::Connection) -> Datagrams {
        Datagrams { source: Source::Quic(connection), closed: false }
    }

    #[cfg(feature = "udp")]
    pub(crate) fn udp(receiver: crate::udp::UdpReceiver) -> Datagrams {
        Datagrams { source: Source::Udp(receiver), closed: false }
    }
}

/// What a client's connection delivers.
pub(crate) enum FromHost {
    /// A datagram.
    Datagram(Bytes),
    /// The host closed the connection on purpose, with this application code.
    Closed(u64),
}

impl Inputs for Datagrams {
    type Item = FromHost;

    async fn next(&mut self) -> Option<FromHost> {
        if self.closed {
            return None;
        }
        let next = match &mut self.source {
            #[cfg(feature = "quic")]
            Source::Quic(connection) => match connection.read_datagram().await {
                Ok(bytes) => return Some(FromHost::Datagram(bytes)),
                Err(quinn::ConnectionError::ApplicationClosed(close)) => {
                    Some(FromHost::Closed(close.error_code.into_inner()))
                }
                Err(_) => None,
            },
            #[cfg(feature = "udp")]
            Source::Udp(receiver) => {
                // After the join the host sends no messages: only datagrams count.
                while let Some(received) = receiver.next().await {
                    if let crate::udp::Received::Datagram(bytes) = received {
                        return Some(FromHost::Datagram(Bytes::from(bytes)));
                    }
                }
                match receiver.close_reason() {
                    Some(crate::udp::CloseReason::Peer(code)) => {
                        Some(FromHost::Closed(code.into()))
                    }
                    _ => None,
                }
            }
        };
        self.closed = true;
        next
    }
}

/// One end of a session, as its driver sees it: the sans-IO endpoint and the connections it
/// sends on. Times are the driver's [`Clock`] milliseconds.
pub(crate) trait Side: Send + 'static {
    /// The commands only this end takes.
    type Command: Send;
    /// The network inputs it handles.
    type Inputs: Inputs;
    /// What it tells the application.
    type Event: Send;
    /// Whether the driver stops when its inputs end (the host: its accept side is gone).
    /// Otherwise the session's own timers end it (a client's idle timer: `HostLost`).
    const STOPS_WHEN_INPUTS_END: bool;

    /// The datagram buffer's capacity: the session's largest datagram.
    fn datagram_bytes_max(&self) -> usize;
    /// When the endpoint next needs [`handle_timeout`](Self::handle_timeout), if ever.
    fn poll_timeout(&self) -> Option<u64>;
    /// Submits an encoded game command for our player.
    fn submit(&mut self, now_ms: u64, bytes: &[u8]) -> Result<Ticket, SubmitError>;
    /// Takes the game's state hash after a check turn.
    fn report_state_hash(&mut self, turn: Turn, hash: u64);
    /// Whether the session wants a snapshot of the game's state after `turn`.
    fn wants_snapshot(&self, turn: Turn) -> bool;
    /// Takes the game's snapshot (a host keeps it; a client uploads it).
    fn offer_snapshot(&mut self, snapshot: Snapshot) -> Result<(), SnapshotError>;
    /// A rejoin's snapshot for the game to restore before the first turn it is handed.
    fn take_restore(&mut self) -> Option<Snapshot>;
    /// Handles a command of this end only.
    fn handle_command(&mut self, now_ms: u64, command: Self::Command);
    /// Handles one network input.
    fn handle_input(&mut self, now_ms: u64, input: <Self::Inputs as Inputs>::Item);
    /// Fires the timers due at `now_ms` (a no-op when none is).
    fn handle_timeout(&mut self, now_ms: u64);
    /// Sends the next datagram due, if one is (using `buf`); `false` when none is.
    fn transmit(&mut self, now_ms: u64, buf: &mut Vec<u8>) -> bool;
    /// The next event, after acting on it (closing a removed player's connection, publishing
    /// the end of the session).
    fn poll_event(&mut self) -> Option<Self::Event>;
    /// The next turn the game may execute.
    fn next_turn(&mut self, now_ms: u64) -> Option<TurnBundle>;
    /// Whether the next turn [`next_turn`](Self::next_turn) hands out is a past one, replayed
    /// to catch up after a rejoin or a late join.
    fn is_catching_up(&self) -> bool;
    /// Whether the session is over: the driver hands over what is left and stops.
    fn is_over(&self) -> bool;
    /// When the game's next turn is due, in driver milliseconds, if known.
    fn next_turn_due_ms(&self) -> Option<u64>;
}

/// The bounded queue of events for the application. Overflow policy: when it holds
/// [`EVENTS_MAX`] events, newer ones are dropped and counted (`events_dropped`) — the state
/// they describe is in the turn bundles and stats either way, and a game that never drains
/// events must not grow the host.
struct EventQueue<E> {
    sender: mpsc::Sender<E>,
    dropped: Arc<AtomicU64>,
}

impl<E> EventQueue<E> {
    /// The queue, the application's end of it, and its drop counter.
    fn new() -> (EventQueue<E>, mpsc::Receiver<E>, Arc<AtomicU64>) {
        let (sender, receiver) = mpsc::channel(EVENTS_MAX);
        let dropped = Arc::new(AtomicU64::new(0));
        (EventQueue { sender, dropped: dropped.clone() }, receiver, dropped)
    }

    /// Queues `event`, or drops and counts it when the queue is full (see the overflow policy).
    fn push(&self, event: E) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.sender.try_send(event) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A turn on its way to the game, with what the session asks of the game around it.
pub(crate) struct Handout {
    bundle: TurnBundle,
    restore: Option<Snapshot>,
    wants_snapshot: bool,
    catching_up: bool,
}

impl Handout {
    fn decode<C: DeserializeOwned, K: CommandCodec>(self) -> TypedTurn<C> {
        let mut turn = TypedTurn::decode::<K>(self.bundle);
        turn.restore = self.restore;
        turn.wants_snapshot = self.wants_snapshot;
        turn.catching_up = self.catching_up;
        turn
    }
}

/// The application's end of a driver task: commands in, turns and events out.
pub(crate) struct Handle<Own, Event> {
    commands: mpsc::Sender<Command<Own>>,
    submits: mpsc::Sender<SubmitRequest>,
    turns: mpsc::Receiver<Handout>,
    events: mpsc::Receiver<Event>,
    events_dropped: Arc<AtomicU64>,
    /// When the next turn is due (the driver updates it every wake).
    due: watch::Receiver<Option<tokio::time::Instant>>,
    /// Whether the last turn handed to the game was a catch-up turn.
    catching_up: bool,
}

/// Spawns the driver of `side`, fed by `inputs`, with room for `turns_max` turns the game has
/// not taken yet. `clock` is called first thing in the task: the driver's time starts there.
pub(crate) fn spawn<S: Side>(
    side: S,
    clock: impl FnOnce() -> Clock + Send + 'static,
    inputs: S::Inputs,
    turns_max: usize,
) -> (Handle<S::Command, S::Event>, JoinHandle<()>) {
    let (command_tx, commands) = mpsc::channel(COMMANDS_MAX);
    let (submit_tx, submits) = mpsc::channel(COMMANDS_MAX);
    let (turn_tx, turn_rx) = mpsc::channel(turns_max);
    let (events, event_rx, events_dropped) = EventQueue::new();
    let (due_tx, due) = watch::channel(None);
    let driver = tokio::spawn(async move {
        let channels =
            Channels { commands, submits, inputs, turns: Some(turn_tx), events, due: due_tx };
        drive(side, clock(), channels).await;
    });
    let handle = Handle {
        commands: command_tx,
        submits: submit_tx,
        turns: turn_rx,
        events: event_rx,
        events_dropped,
        due,
        catching_up: false,
    };
    (handle, driver)
}

/// A driver's ends of its channels.
struct Channels<S: Side> {
    commands: mpsc::Receiver<Command<S::Command>>,
    submits: mpsc::Receiver<SubmitRequest>,
    inputs: S::Inputs,
    /// `None` once the session is over.
    turns: Option<mpsc::Sender<Handout>>,
    events: EventQueue<S::Event>,
    due: watch::Sender<Option<tokio::time::Instant>>,
}

/// The driver loop. `biased;` keeps the order of the branches fixed (commands, submits, then
/// inputs, then the timer), so a seeded simulation replays exactly.
async fn drive<S: Side>(mut side: S, clock: Clock, mut channels: Channels<S>) {
    let mut buf = Vec::with_capacity(side.datagram_bytes_max());
    let (mut inputs_open, mut submits_open) = (true, true);
    // The first datagrams (a client's hello) go out before waiting for anything.
    while side.transmit(clock.now_ms(), &mut buf) {}
    loop {
        let wake = clock.instant(side.poll_timeout().unwrap_or(clock.now_ms() + IDLE_WAKE_MS));
        tokio::select! {
            biased;
            command = channels.commands.recv() => match command {
                None => break,
                Some(Command::ReportHash(turn, hash)) => side.report_state_hash(turn, hash),
                Some(Command::OfferSnapshot(snapshot, reply)) => {
                    let _ = reply.send(side.offer_snapshot(snapshot));
                }
                Some(Command::Own(command)) => side.handle_command(clock.now_ms(), command),
            },
            request = channels.submits.recv(), if submits_open => match request {
                Some((bytes, reply)) => {
                    let _ = reply.send(side.submit(clock.now_ms(), &bytes));
                }
                None => submits_open = false,
            },
            input = channels.inputs.next(), if inputs_open => match input {
                Some(input) => side.handle_input(clock.now_ms(), input),
                None if S::STOPS_WHEN_INPUTS_END => break,
                None => inputs_open = false,
            },
            () = tokio::time::sleep_until(wake) => {}
        }
        let now = clock.now_ms();
        side.handle_timeout(now);
        while side.transmit(now, &mut buf) {}
        // Only take a turn when the game has room for it: a game that falls behind holds the
        // session back through the window instead of queueing without bound.
        if let Some(turns) = &channels.turns {
            while turns.capacity() > 0 {
                // Asked before the turn is taken: whether it comes from a rejoin's catch-up.
                let catching_up = side.is_catching_up();
                let Some(bundle) = side.next_turn(now) else { break };
                let wants_snapshot = side.wants_snapshot(bundle.turn);
                let restore = side.take_restore();
                let handout = Handout { bundle, restore, wants_snapshot, catching_up };
                if turns.try_send(handout).is_err() {
                    break;
                }
            }
        }
        // Events after the turns: executing a turn raises some too (the end of the session
        // among them), and the side's queue keeps them in order.
        while let Some(event) = side.poll_event() {
            channels.events.push(event);
        }
        let due = side.next_turn_due_ms().filter(|_| channels.turns.is_some());
        channels.due.send_if_modified(|at| {
            let next = due.map(|ms| clock.instant(ms));
            std::mem::replace(at, next) != next
        });
        if side.is_over() {
            // Every turn was handed over: the game's next_turn returns None after the last.
            // The driver stays for the application's questions (stats, the replay) until it
            // lets go of its handle.
            channels.turns = None;
        }
    }
}

impl<Own, Event> Handle<Own, Event> {
    /// Encodes and submits a game command for our player.
    pub(crate) async fn submit<C: Serialize, K: CommandCodec>(
        &self,
        command: &C,
    ) -> Result<Ticket, SessionError> {
        submit::<C, K>(&self.submits, command).await
    }

    /// A handle that submits for our player from any task or thread.
    pub(crate) fn submitter<C, K: CommandCodec>(&self) -> Submitter<C, K> {
        Submitter { submits: self.submits.clone(), _types: std::marker::PhantomData }
    }

    /// The next turn, decoded; `None` once the session is over.
    pub(crate) async fn next_turn<C: DeserializeOwned, K: CommandCodec>(
        &mut self,
    ) -> Option<TypedTurn<C>> {
        let handout = self.turns.recv().await?;
        Some(self.take::<C, K>(handout))
    }

    /// Hands a turn to the game, decoded, noting whether it was a catch-up turn.
    fn take<C: DeserializeOwned, K: CommandCodec>(&mut self, handout: Handout) -> TypedTurn<C> {
        self.catching_up = handout.catching_up;
        handout.decode::<C, K>()
    }

    /// Whether the last turn handed to the game was a past one, replayed to catch up after a
    /// rejoin or a late join (see [`TypedTurn::catching_up`]).
    pub(crate) fn is_catching_up(&self) -> bool {
        self.catching_up
    }

    /// The next turn if one is waiting, decoded, without waiting.
    pub(crate) fn try_next_turn<C: DeserializeOwned, K: CommandCodec>(
        &mut self,
    ) -> Result<TypedTurn<C>, NoTurn> {
        match self.turns.try_recv() {
            Ok(handout) => Ok(self.take::<C, K>(handout)),
            Err(mpsc::error::TryRecvError::Empty) => Err(NoTurn::NotYet),
            Err(mpsc::error::TryRecvError::Disconnected) => Err(NoTurn::Over),
        }
    }

    /// Reports the game's state hash after a check turn.
    pub(crate) async fn report_state_hash(
        &self,
        turn: Turn,
        hash: u64,
    ) -> Result<(), SessionError> {
        self.send(Command::ReportHash(turn, hash)).await
    }

    /// Gives the session the game's state after `turn`, as it wanted
    /// ([`TypedTurn::wants_snapshot`]).
    pub(crate) async fn offer_snapshot(
        &self,
        turn: Turn,
        hash: u64,
        state: Vec<u8>,
    ) -> Result<(), SessionError> {
        let snapshot = Snapshot { turn, hash, state: Bytes::from(state) };
        self.ask_with(|reply| Command::OfferSnapshot(snapshot, reply))
            .await?
            .map_err(SessionError::Snapshot)
    }

    /// How long until the next turn is due (zero when it is due already; `None` when unknown:
    /// before the first turn, paused, stalled, over).
    pub(crate) fn until_next_turn(&self) -> Option<std::time::Duration> {
        let at = (*self.due.borrow())?;
        Some(at.saturating_duration_since(tokio::time::Instant::now()))
    }

    /// How long ago the next turn fell due on the schedule, when it has (it is late, or the
    /// game has not taken it yet); `None` when it is not due yet or unknown.
    pub(crate) fn overdue(&self) -> Option<std::time::Duration> {
        let at = (*self.due.borrow())?;
        let now = tokio::time::Instant::now();
        (now > at).then(|| now - at)
    }

    /// Events dropped because the application did not take them (the queue holds
    /// [`EVENTS_MAX`]).
    pub(crate) fn events_dropped(&self) -> u64 {
        self.events_dropped.load(Ordering::Relaxed)
    }

    /// The next turn or event, whichever comes first (turns first when both are waiting);
    /// `None` once the session is over: its last turn was taken, and every event the driver
    /// queued up to then. (The driver itself stays up for questions such as stats, so a loop
    /// on this must not wait for it to stop.)
    pub(crate) async fn next_update<C: DeserializeOwned, K: CommandCodec>(
        &mut self,
    ) -> Option<Update<C, Event>> {
        tokio::select! {
            biased;
            bundle = self.turns.recv() => match bundle {
                Some(handout) => Some(Update::Turn(self.take::<C, K>(handout))),
                // Closed and every turn taken. The driver queues an iteration's events before
                // it closes the turns, so those queued now are all the game will get.
                None => self.events.try_recv().ok().map(Update::Event),
            },
            Some(event) = self.events.recv() => Some(Update::Event(event)),
        }
    }

    /// The next event, waiting for it; `None` once the driver has stopped.
    pub(crate) async fn next_event(&mut self) -> Option<Event> {
        self.events.recv().await
    }

    /// The next event, if one is waiting.
    pub(crate) fn try_event(&mut self) -> Option<Event> {
        self.events.try_recv().ok()
    }

    /// Sends a command of this end only.
    pub(crate) async fn tell(&self, command: Own) -> Result<(), SessionError> {
        self.send(Command::Own(command)).await
    }

    /// Sends a command of this end only that carries a reply channel, and waits for the answer.
    pub(crate) async fn ask<T>(
        &self,
        command: impl FnOnce(oneshot::Sender<T>) -> Own,
    ) -> Result<T, SessionError> {
        self.ask_with(|reply| Command::Own(command(reply))).await
    }

    async fn send(&self, command: Command<Own>) -> Result<(), SessionError> {
        self.commands.send(command).await.map_err(|_| SessionError::Closed)
    }

    async fn ask_with<T>(
        &self,
        command: impl FnOnce(oneshot::Sender<T>) -> Command<Own>,
    ) -> Result<T, SessionError> {
        let (reply, answer) = oneshot::channel();
        self.send(command(reply)).await?;
        answer.await.map_err(|_| SessionError::Closed)
    }

    /// A cloneable sender of this end's own commands, for a thread that is not the game's.
    pub(crate) fn control(&self) -> Control<Own> {
        Control { commands: self.commands.clone() }
    }
}

/// Sends a driver its end's own commands from any thread, blocking (not from inside an async
/// task: tokio refuses to block there).
pub(crate) struct Control<Own> {
    commands: mpsc::Sender<Command<Own>>,
}

impl<Own> Clone for Control<Own> {
    fn clone(&self) -> Self {
        Control { commands: self.commands.clone() }
    }
}

impl<Own> Control<Own> {
    /// Sends a command and waits until the driver has it.
    pub(crate) fn tell(&self, command: Own) -> Result<(), SessionError> {
        let command = Command::Own(command);
        self.commands.blocking_send(command).map_err(|_| SessionError::Closed)
    }

    /// Sends a command that carries a reply channel, and waits for the answer.
    pub(crate) fn ask<T>(
        &self,
        command: impl FnOnce(oneshot::Sender<T>) -> Own,
    ) -> Result<T, SessionError> {
        let (reply, answer) = oneshot::channel();
        self.tell(command(reply))?;
        answer.blocking_recv().map_err(|_| SessionError::Closed)
    }
}

async fn submit<C: Serialize, K: CommandCodec>(
    submits: &mpsc::Sender<SubmitRequest>,
    command: &C,
) -> Result<Ticket, SessionError> {
    let bytes = K::encode(command).map_err(SessionError::Codec)?;
    let (reply, answer) = oneshot::channel();
    submits.send((bytes, reply)).await.map_err(|_| SessionError::Closed)?;
    answer.await.map_err(|_| SessionError::Closed)?.map_err(SessionError::Submit)
}

/// Submits commands for a session's player from any task or thread, while another one takes
/// the turns (from [`Host::submitter`](crate::Host::submitter),
/// [`Client::submitter`](crate::Client::submitter) or
/// [`Session::submitter`](crate::Session::submitter)). Cheap to clone.
pub struct Submitter<C, K: CommandCodec = phalanx_proto::DefaultCodec> {
    submits: mpsc::Sender<SubmitRequest>,
    _types: std::marker::PhantomData<fn(C) -> K>,
}

impl<C, K: CommandCodec> Clone for Submitter<C, K> {
    fn clone(&self) -> Self {
        Submitter { submits: self.submits.clone(), _types: std::marker::PhantomData }
    }
}

impl<C: Serialize, K: CommandCodec> Submitter<C, K> {
    /// Submits a command for the session's player; the ticket says which turn it is stamped
    /// for.
    pub async fn submit(&self, command: &C) -> Result<Ticket, SessionError> {
        submit::<C, K>(&self.submits, command).await
    }

    /// The same from a thread that is not running async code (a game's input thread); it waits
    /// for the driver's answer. Must not be called from inside an async task.
    pub fn submit_blocking(&self, command: &C) -> Result<Ticket, SessionError> {
        let bytes = K::encode(command).map_err(SessionError::Codec)?;
        let (reply, answer) = oneshot::channel();
        self.submits.blocking_send((bytes, reply)).map_err(|_| SessionError::Closed)?;
        answer.blocking_recv().map_err(|_| SessionError::Closed)?.map_err(SessionError::Submit)
    }
}

/// What [`Host::next_update`](crate::Host::next_update) and
/// [`Client::next_update`](crate::Client::next_update) return: a turn to execute, or an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Update<C, E = crate::Event> {
    /// The next turn, in order.
    Turn(TypedTurn<C>),
    /// An event.
    Event(E),
}
