//! The quiet relay's repair paths, pinned (`SessionConfig::link.heartbeat_ms`). A host and two quiet
//! clients on 20 ms links run step by step on a virtual clock, and player 0 loses the first
//! datagrams to bring it turns T, T + 1... in a row.
//!
//! Player 0 first loses one datagram alone, long before T (the primer): the host repeats
//! earlier turns in its datagrams only on a link that lost something lately.
//!
//! Without an outage, the client reports each missing turn as it becomes overdue on its
//! playout schedule, and the host resends it at once. In an outage (everything to and from
//! player 0 lost until the first datagram after the losses) those reports are lost too. Each
//! datagram repeats the `link.redundant_turns` (2) turns before its newest, so T is lost for good
//! only when three are: T's, T + 1's and T + 2's; T + 3's then opens a gap (T missing, T + 1
//! held). Decoding what
//! each side sends (the wire module is crate-private, hence a unit test) shows the client
//! acknowledging at once with the gap flag, the host resending from T at once, and the missing
//! turns executing one round trip after the gap opened. The control run clears the gap flag
//! on its way to the host: T then waits for the host's retransmit timer, which allows for a
//! whole heartbeat.

use std::collections::BTreeMap;

use crate::wire::{
    decode_down, decode_up, put_up_command, put_up_header, put_varint, Limits, UpExtras,
};
use crate::{Client, ClientEvent, Host, Joined, PlayerId, SessionConfig, Ticket, Turn};

/// One-way latency of every link, both ways.
const LATENCY_MS: u64 = 20;
/// The quiet relay's heartbeat.
const HEARTBEAT_MS: u64 = 500;
/// The first turn player 0 loses: about 3 s in, the round trip long measured.
const T: Turn = Turn(30);
/// A turn whose first datagram player 0 loses long before T, alone: the host repeats earlier
/// turns in its datagrams only on a link that lost something lately.
const PRIMER: Turn = Turn(10);
/// The run's end: T's time plus four heartbeats.
const END_MS: u64 = 5_000;

/// A datagram the host sent: when, to which client, the turns it carried (`first`, `count`),
/// whether the network dropped it, and whether the host's retransmit timer sent it.
struct DownSent {
    at: u64,
    client: usize,
    first: Turn,
    count: u32,
    dropped: bool,
    by_timer: bool,
    /// The link's retransmissions so far, this one included.
    retransmits: u64,
    /// Dropped as part of the outage, not as one of the losses.
    in_outage: bool,
}

impl DownSent {
    /// The newest turn it carried, if any.
    fn newest(&self) -> Option<Turn> {
        self.count.checked_sub(1).map(|last| Turn(self.first.0 + last))
    }

    fn carries(&self, turn: Turn) -> bool {
        self.first <= turn && self.newest().is_some_and(|newest| turn <= newest)
    }
}

/// A datagram a client sent: when, who, what it acknowledged, the gap flag, and whether the
/// outage dropped it.
struct UpSent {
    at: u64,
    client: usize,
    turn_ack: Turn,
    gap: bool,
    dropped: bool,
}

enum Dest {
    Host(PlayerId),
    Client(usize),
}

/// The host, its clients, the datagrams in flight, and what happened.
struct Net {
    now: u64,
    limits: Limits,
    host: Host,
    clients: Vec<Client>,
    queue: BTreeMap<(u64, u64), (Dest, Vec<u8>)>,
    sent: u64,
    /// How many datagrams in a row player 0 loses: the first to bring it turns T, T + 1...
    lost: u32,
    /// The control: the gap flag is cleared from every datagram before the host reads it.
    clear_gap: bool,
    /// Whether the losses are an outage: from the first lost datagram until the first after
    /// the losses reaches player 0 (`healed_at`), everything to and from it is lost too — its
    /// heartbeats, its overdue reports, the host's retransmissions.
    outage: bool,
    outage_from: Option<u64>,
    healed_at: Option<u64>,
    /// The first gap report to get through the outage is lost as well.
    lose_first_gap: bool,
    downs: Vec<DownSent>,
    ups: Vec<UpSent>,
    /// Per client: when each turn executed.
    executed: Vec<BTreeMap<Turn, u64>>,
    /// When player 0 submits a command, if it does, and the ticket it got.
    submit_at: Option<u64>,
    /// When the host's operator pauses the game and resumes it, if they do.
    pause: Option<(u64, u64)>,
    ticket: Option<Ticket>,
    /// The turn player 0's command executed in, and whether it was told the command was late.
    command_executed: Option<Turn>,
    told_late: bool,
}

impl Net {
    /// Two quiet clients joined and the game started at time 0.
    fn new(lost: u32, clear_gap: bool) -> Net {
        // The host's own repeat of new bundles off, as in the demo: once the primer was lost
        // it would send each turn twice.
        let mut config = SessionConfig::default();
        config.link.heartbeat_ms = HEARTBEAT_MS as u32;
        config.link.repeat_loss_permille = 1_000;
        let tokens = [100, 101];
        let mut host = Host::new(config.clone(), &tokens).expect("a valid config");
        let mut clients = Vec::new();
        for (index, &token) in tokens.iter().enumerate() {
            let (mut client, request) = Client::new(config.clone(), token).expect("valid");
            let response = host.handle_join(0, &request);
            let reply = response.reply.expect("a join always gets a reply");
            let joined = client.handle_join_reply(0, &reply).expect("seated");
            assert_eq!(joined, Joined::Player(PlayerId(index as u8)));
            clients.push(client);
        }
        host.start(0);
        Net {
            now: 0,
            limits: Limits::new(&config),
            host,
            clients,
            queue: BTreeMap::new(),
            sent: 0,
            lost,
            clear_gap,
            outage: true,
            outage_from: None,
            healed_at: None,
            lose_first_gap: false,
            downs: Vec::new(),
            ups: Vec::new(),
            executed: vec![BTreeMap::new(); tokens.len()],
            submit_at: None,
            pause: None,
            ticket: None,
            command_executed: None,
            told_late: false,
        }
    }

    fn run_until(&mut self, until_ms: u64) {
        while self.now <= until_ms {
            self.step();
            let queued = self.queue.keys().next().map(|&(at, _)| at);
            let timers = self.clients.iter().map(Client::poll_timeout);
            let submit = self.submit_at.filter(|&at| at > self.now);
            let pause = self.pause.iter().flat_map(|&(at, until)| [at, until]);
            let pause = pause.filter(|&at| at > self.now).min();
            let next = [self.host.poll_timeout(), queued, submit, pause];
            let next = timers.chain(next).flatten().min();
            self.now = next.unwrap_or(until_ms + 1).max(self.now + 1);
        }
    }

    /// Everything at `now`: deliveries, then the host's timers and datagrams, then each
    /// client's timers, turns and datagrams.
    fn step(&mut self) {
        let now = self.now;
        while let Some(entry) = self.queue.first_entry() {
            if entry.key().0 > now {
                break;
            }
            match entry.remove() {
                (Dest::Host(player), bytes) => {
                    let bytes = if self.clear_gap { self.without_gap(&bytes) } else { bytes };
                    self.host.handle_datagram(now, player, &bytes);
                }
                (Dest::Client(index), bytes) => self.clients[index].handle_datagram(now, &bytes),
            }
        }
        match self.pause {
            Some((at, _)) if at == now => self.host.pause(now),
            Some((_, until)) if until == now => self.host.resume(now),
            _ => {}
        }
        self.host.handle_timeout(now);
        let mut buf = Vec::new();
        while let Some(player) = self.host.poll_transmit(now, &mut buf) {
            self.send_down(usize::from(player.0), buf.clone());
        }
        for index in 0..self.clients.len() {
            let client = &mut self.clients[index];
            client.handle_timeout(now);
            while let Some(bundle) = client.next_turn(now) {
                self.executed[index].insert(bundle.turn, now);
                if index == 0 && !bundle.records.is_empty() {
                    self.command_executed = Some(bundle.turn);
                }
            }
            if index == 0 && self.submit_at == Some(now) {
                self.ticket = Some(client.submit(now, b"order").expect("a command fits"));
            }
            while let Some(event) = client.poll_event() {
                self.told_late |= matches!(event, ClientEvent::CommandLate { .. });
            }
            let mut out = Vec::new();
            while client.poll_transmit(now, &mut buf) {
                out.push(buf.clone());
            }
            for bytes in out {
                self.send_up(index, bytes);
            }
        }
    }

    fn enqueue(&mut self, dest: Dest, bytes: Vec<u8>) {
        self.sent += 1;
        self.queue.insert((self.now + LATENCY_MS, self.sent), (dest, bytes));
    }

    /// Logs a datagram to client `client`; drops it if it is the first to bring player 0
    /// one of the `lost` turns from T on.
    fn send_down(&mut self, client: usize, bytes: Vec<u8>) {
        let down = decode_down(&bytes, &self.limits).expect("the host's datagrams decode");
        let stats = self.host.peer_stats(PlayerId(client as u8)).expect("a remote player");
        let retransmits = stats.link.retransmits;
        let before = self.downs.iter().rev().find(|d| d.client == client);
        let mut sent = DownSent {
            at: self.now,
            client,
            first: down.first_turn,
            count: down.bundles.len() as u32,
            dropped: false,
            by_timer: retransmits > before.map_or(0, |d| d.retransmits),
            retransmits,
            in_outage: false,
        };
        let newest = sent.newest();
        let lost = newest.is_some_and(|newest| T <= newest && newest.since(T) < self.lost);
        let again = self.downs.iter().any(|d| d.client == client && d.newest() == newest);
        let primer = newest == Some(PRIMER);
        sent.dropped = client == 0 && (lost || primer) && !again;
        if sent.dropped && primer {
            self.downs.push(sent);
            return;
        }
        if sent.dropped {
            self.outage_from.get_or_insert(self.now);
        } else if client == 0 && self.in_outage() {
            let after = newest.is_some_and(|newest| T <= newest && newest.since(T) >= self.lost);
            if after {
                self.healed_at = Some(self.now + LATENCY_MS);
            } else {
                (sent.dropped, sent.in_outage) = (true, true);
            }
        }
        if !sent.dropped {
            self.enqueue(Dest::Client(client), bytes);
        }
        self.downs.push(sent);
    }

    fn send_up(&mut self, client: usize, bytes: Vec<u8>) {
        let up = decode_up(&bytes, &self.limits).expect("the clients' datagrams decode");
        let (turn_ack, gap) = (up.turn_ack, up.extras.gap);
        let healed = self.healed_at.filter(|&healed| healed <= self.now);
        let first_gap = gap
            && self.lose_first_gap
            && healed.is_some_and(|healed| !self.ups.iter().any(|up| up.gap && up.at >= healed));
        let dropped = client == 0 && (self.in_outage() || first_gap);
        self.ups.push(UpSent { at: self.now, client, turn_ack, gap, dropped });
        if dropped {
            return;
        }
        self.enqueue(Dest::Host(PlayerId(client as u8)), bytes);
    }

    /// Whether player 0 is in the outage now.
    fn in_outage(&self) -> bool {
        let started = self.outage && self.outage_from.is_some_and(|from| from <= self.now);
        started && self.healed_at.is_none_or(|healed| self.now < healed)
    }

    /// The same Up datagram with the gap flag cleared (the control run).
    fn without_gap(&self, bytes: &[u8]) -> Vec<u8> {
        let up = decode_up(bytes, &self.limits).expect("the clients' datagrams decode");
        let extras = UpExtras { gap: false, ..up.extras };
        let mut out = Vec::new();
        put_up_header(&mut out, up.pn, up.ack, up.turn_ack, up.next_exec, up.first_seq, &extras);
        put_varint(&mut out, up.commands.len() as u64);
        for &command in &up.commands {
            put_up_command(&mut out, command);
        }
        out
    }

    /// When the first datagram carrying `turn` reached player 0.
    fn arrived_ms(&self, turn: Turn) -> u64 {
        let mut arrived = self.downs.iter().filter(|d| d.client == 0 && !d.dropped);
        let down = arrived.find(|d| d.carries(turn)).expect("the turn reached player 0");
        down.at + LATENCY_MS
    }

    fn executed_ms(&self, client: usize, turn: Turn) -> u64 {
        *self.executed[client].get(&turn).expect("the turn executed")
    }
}

/// A run where player 0 loses `lost` datagrams in a row, with the gap flag path or without
/// it (`clear_gap`). Checks the losses are the ones intended (the first datagrams with T,
/// T + 1..., the two after T's carrying copies of T) and returns the run.
fn run(lost: u32, clear_gap: bool) -> Net {
    let mut net = Net::new(lost, clear_gap);
    net.run_until(END_MS);
    let mut dropped = net.downs.iter().filter(|d| d.dropped && !d.in_outage);
    let primer = dropped.next().expect("the primer was lost");
    assert_eq!(primer.newest(), Some(PRIMER));
    let dropped: Vec<&DownSent> = dropped.collect();
    assert_eq!(dropped.len(), lost as usize, "exactly {lost} datagrams lost");
    for (index, down) in dropped.iter().enumerate() {
        assert_eq!(down.newest(), Some(Turn(T.0 + index as u32)), "lost in a row");
        assert!(index > 2 || down.carries(T), "{index} after T's: a copy of T lost too");
    }
    net
}

/// [`run`] with a gap: also returns when it opened, as T + `lost` (its datagram the first
/// to arrive after the losses) reached player 0 without T.
fn run_with_gap(lost: u32, clear_gap: bool) -> (Net, u64) {
    let net = run(lost, clear_gap);
    let opened = net.arrived_ms(Turn(T.0 + lost));
    assert!(opened < net.arrived_ms(T), "lost {lost}: T + {lost} arrived before T: a gap");
    (net, opened)
}

/// Two losses in a row in an outage open no gap: T + 2's datagram still carries T, and the
/// client's report that T is overdue is lost with the rest. Why the gap tests below lose three
/// datagrams or four.
#[test]
fn two_losses_in_a_row_are_covered_by_the_redundant_copies() {
    let net = run(2, false);
    assert_eq!(net.arrived_ms(T), net.arrived_ms(Turn(T.0 + 2)), "T came with T + 2");
    let mut reports = net.ups.iter().filter(|up| up.gap && up.turn_ack >= T);
    assert!(reports.clone().any(|up| up.dropped), "T was reported overdue");
    assert!(reports.all(|up| up.dropped), "no report reached the host");
}

/// On a clean link each turn goes once: player 1 loses nothing and gets no copies all game.
/// Player 0 gets none either until it loses the primer, which it reports overdue and the host
/// resends at once; from the acknowledgement that shows the loss on, each datagram repeats the
/// two turns before its newest (`link.redundant_turns`) that are not acknowledged.
#[test]
fn a_clean_link_gets_each_turn_once_until_it_loses_one() {
    let mut net = Net::new(0, false);
    net.run_until(END_MS);
    let turns = |client: usize| net.downs.iter().filter(move |d| d.client == client && !d.by_timer);
    assert!(turns(1).all(|down| down.count <= 1), "player 1: every turn once");
    let newest = |down: &DownSent| down.newest().unwrap_or(Turn(0));
    assert!(turns(0).filter(|d| newest(d) <= PRIMER).all(|d| d.count <= 1), "once, until then");
    let report = net.ups.iter().find(|up| up.client == 0 && up.gap && up.turn_ack == PRIMER);
    let report = report.expect("the primer was reported overdue");
    assert!(!report.dropped, "the report reached the host");
    let resent =
        net.downs.iter().find(|down| down.client == 0 && down.at == report.at + LATENCY_MS);
    let resent = resent.expect("resent as the report arrived");
    assert!(resent.carries(PRIMER) && !resent.by_timer, "resent by the report");
    // (Up to the two before the newest: those a heartbeat has not acknowledged yet.)
    let after: Vec<u32> = turns(0).filter(|d| newest(d) >= T).map(|d| d.count).collect();
    assert!(after.contains(&3) && after.iter().all(|&count| count <= 3), "copies: {after:?}");
}

/// Two losses in a row that are no outage: the client reports each missing turn as it is
/// overdue (on this jitter-free link, a margin of a thirty-second of a turn after the moment
/// it should have arrived: a turn due that very millisecond is not missing), the host resends it
/// at once, and it arrives one round trip later — not with the datagram after next, whose
/// copy is the last.
#[test]
fn an_overdue_turn_is_reported_and_resent_at_once() {
    let mut net = Net::new(2, false);
    net.outage = false;
    net.run_until(END_MS);
    for turn in [T, Turn(T.0 + 1)] {
        let on_time = net.executed_ms(1, turn);
        let report = net.ups.iter().find(|up| up.client == 0 && up.gap && up.turn_ack == turn);
        let report = report.unwrap_or_else(|| panic!("{turn:?} was reported"));
        let margin = (u64::from(SessionConfig::default().turns.length_ms) / 32).max(2);
        assert_eq!(report.at, on_time + margin, "{turn:?}: reported a margin past its time");
        let resent =
            net.downs.iter().find(|down| down.client == 0 && down.at == report.at + LATENCY_MS);
        let resent = resent.unwrap_or_else(|| panic!("{turn:?}: resent as the report arrived"));
        assert!(resent.carries(turn) && !resent.by_timer, "{turn:?}: resent by the report");
        let repaired = report.at + 2 * LATENCY_MS;
        assert_eq!(net.arrived_ms(turn), repaired, "{turn:?}: a round trip after the report");
    }
    // Each executes as it arrives. The resends are not news of the path, so they leave the
    // buffer alone (T's, as the newest turn of its resend, once widened it and T + 1 waited).
    for turn in [T, Turn(T.0 + 1)] {
        assert_eq!(net.executed_ms(0, turn), net.arrived_ms(turn), "{turn:?} on arrival");
    }
    assert_eq!(net.clients[0].stats().playout_ms, net.clients[1].stats().playout_ms);
}

/// The gap path with one turn missing (three datagrams lost: T) and with two (four lost: T and
/// T + 1): the client reports the gap the moment it opens, the host resends everything
/// unacknowledged the moment the report arrives, and the missing turns execute one round
/// trip (40 ms) after the gap opened — against a heartbeat of 500 ms and a retransmit
/// timeout of 560 ms.
#[test]
fn a_gap_is_reported_and_repaired_at_once() {
    for lost in [3, 4] {
        let (net, opened) = run_with_gap(lost, false);
        // 1. The client sends at once, the gap flag set and T named as missing. It was not its
        //    heartbeat (the last one left before the gap is less than a heartbeat old), and
        //    the other client, which got the same turns at the same time, sent nothing.
        let at_gap: Vec<&UpSent> = net.ups.iter().filter(|up| up.at == opened).collect();
        assert_eq!(at_gap.len(), 1, "lost {lost}: one datagram as the gap opened at {opened}");
        assert_eq!((at_gap[0].client, at_gap[0].turn_ack, at_gap[0].gap), (0, T, true));
        let mut before = net.ups.iter().filter(|up| up.client == 0 && up.at < opened);
        let heartbeat = before.next_back().expect("a heartbeat before the gap").at;
        assert!(opened < heartbeat + HEARTBEAT_MS, "lost {lost}: no heartbeat due at {opened}");
        // 2. The host resends from T to its newest turn as the report arrives: neither a new
        //    turn's datagram (it would start at T + `lost` - 2) nor the retransmit timer.
        let reported = opened + LATENCY_MS;
        let mut to_player = net.downs.iter().filter(|down| down.client == 0);
        let repair = to_player.find(|down| down.at == reported).expect("a datagram at once");
        assert_eq!((repair.first, repair.newest()), (T, Some(Turn(T.0 + lost))), "lost {lost}");
        assert!(!repair.by_timer, "lost {lost}: not the retransmit timer");
        // 3. Every missing turn executes as the repair arrives, one round trip after the gap
        //    opened: the turns are overdue on the playout schedule.
        let missing = (0..lost - 2).map(|offset| Turn(T.0 + offset));
        let executed: Vec<u64> = missing.map(|turn| net.executed_ms(0, turn)).collect();
        assert_eq!(executed, vec![reported + LATENCY_MS; executed.len()], "lost {lost}");
        // 4. Well before the client's next heartbeat and the host's retransmit timeout.
        let last = *executed.last().expect("a turn was missing");
        let rto = net.host.peer_stats(PlayerId(0)).expect("player 0 plays on").link.rto_ms;
        assert!(last < heartbeat + HEARTBEAT_MS, "lost {lost}: at {last}, before the heartbeat");
        assert!(last - opened < rto / 4, "lost {lost}: {} ms, the RTO {rto}", last - opened);
    }
}

/// A gap report that is lost is made again: the later turns' datagrams find T still missing,
/// and the client reports it again a round trip after the first (with the next such datagram,
/// a turn later). The host resends at once, not on its retransmit timer. (With four losses
/// the timer, armed as the outage began, fires first.)
#[test]
fn a_lost_gap_report_is_made_again() {
    let lost = 3;
    let mut net = Net::new(lost, false);
    net.lose_first_gap = true;
    net.run_until(END_MS);
    let healed = net.healed_at.expect("the outage ended");
    let mut reports = net.ups.iter().filter(|up| up.client == 0 && up.gap && up.at >= healed);
    let first = reports.next().expect("T was reported after the outage");
    assert!(first.dropped && first.turn_ack == T, "the first report after the outage, lost");
    let again = reports.next().expect("T was reported again");
    assert!(!again.dropped && again.turn_ack == T, "the second reached the host");
    let turn_ms = u64::from(SessionConfig::default().turns.length_ms);
    let waited = again.at - first.at;
    assert!((2 * LATENCY_MS..=turn_ms).contains(&waited), "again after {waited} ms");
    let resent = net.downs.iter().find(|down| down.client == 0 && down.at == again.at + LATENCY_MS);
    let resent = resent.expect("resent as the report arrived");
    assert!(resent.carries(T) && !resent.by_timer, "resent by the report");
    assert_eq!(net.arrived_ms(T), again.at + 2 * LATENCY_MS, "a round trip after the report");
}

/// After a stall the schedule follows the host's new cadence, though the client reported each
/// late turn overdue before it came (so each might have been a resend). The host's operator
/// pauses for 330 ms: every later turn comes more than a quarter turn past its old due time.
/// After `SHIFT_SAMPLES` (3) of them the schedule has moved: the turns execute a turn length
/// apart again, and none is reported overdue.
#[test]
fn after_a_stall_the_schedule_follows_though_each_late_turn_was_reported() {
    let mut net = Net::new(0, false);
    net.pause = Some((2_500, 2_830));
    net.run_until(END_MS);
    let turn_ms = u64::from(SessionConfig::default().turns.length_ms);
    let resumed = net.downs.iter().find(|d| d.client == 0 && d.at >= 2_830 && d.count > 0);
    let first = resumed.expect("turns after the pause").newest().expect("a turn");
    let settled = Turn(first.0 + 3);
    let late = |up: &&UpSent| up.client == 0 && up.gap && up.turn_ack >= settled;
    let reports: Vec<u64> = net.ups.iter().filter(late).map(|up| up.at).collect();
    assert_eq!(reports, Vec::<u64>::new(), "no turn from {settled:?} on reported overdue");
    for turn in (settled.0..settled.0 + 10).map(Turn) {
        let gap = net.executed_ms(0, Turn(turn.0 + 1)) - net.executed_ms(0, turn);
        assert_eq!(gap, turn_ms, "{turn:?}: the next a turn length later");
        assert!(net.executed_ms(0, turn) >= net.arrived_ms(turn), "{turn:?}");
    }
}

/// The control: the same runs with the gap flag cleared before the host reads it. The
/// client's report still goes out at once (and again each round trip while later datagrams
/// find T missing), but the host does not act on it: T comes again only when the host's
/// retransmit timer fires, more than a heartbeat after the gap opened (586-606 ms) where the
/// gap path takes one round trip (40 ms).
#[test]
fn without_the_gap_flag_the_missing_turn_waits_for_the_retransmit_timer() {
    for lost in [3, 4] {
        let (fast, opened) = run_with_gap(lost, false);
        let (slow, opened_too) = run_with_gap(lost, true);
        assert_eq!(opened, opened_too, "lost {lost}: the runs agree until the gap report");
        assert_eq!(fast.arrived_ms(T) - opened, 2 * LATENCY_MS, "lost {lost}: the gap path");
        let mut to_player = slow.downs.iter().filter(|down| down.client == 0 && !down.dropped);
        let resent = to_player.find(|down| down.carries(T)).expect("T comes again");
        assert!(resent.by_timer, "lost {lost}: the retransmit timer resent T");
        let rto = slow.host.peer_stats(PlayerId(0)).expect("player 0 plays on").link.rto_ms;
        let waited = slow.arrived_ms(T) - opened;
        assert!(waited >= HEARTBEAT_MS.max(rto), "lost {lost}: T after {waited} ms, RTO {rto}");
        assert_eq!(slow.executed_ms(0, T), slow.arrived_ms(T), "lost {lost}: executed then");
        // The later turns' datagrams found T still missing: the gap was reported again, no
        // more than once a round trip. (Its report that T was overdue went out in the outage
        // and was lost.)
        let reports = slow.ups.iter().filter(|up| up.gap && !up.dropped && up.turn_ack == T);
        let reports: Vec<u64> = reports.map(|up| up.at).collect();
        assert!(reports.len() >= 2, "lost {lost}: reported again: {reports:?}");
        let spaced = reports.windows(2).all(|pair| pair[1] - pair[0] >= 2 * LATENCY_MS);
        assert!(spaced, "lost {lost}: a round trip apart: {reports:?}");
    }
}

/// An outage's repair does not move the playout schedule. Player 0 loses eight datagrams in
/// a row (800 ms); T + 8's opens the gap and the repair brings T to T + 7 one round trip later,
/// each up to 800 ms late. They are resends, not news of the path: T + 8 executes with them,
/// and every later turn at the same moment as on player 1, whose link is the same and lost
/// nothing. (Counted as offsets, the burst had moved the schedule later: the late turns in a
/// row looked like the host stopping, and the copies riding with T + 8 grew the buffer.)
#[test]
fn an_outages_repair_leaves_the_playout_schedule_alone() {
    let lost = 8;
    let (net, opened) = run_with_gap(lost, false);
    let repaired = opened + 2 * LATENCY_MS;
    assert_eq!(net.executed_ms(0, Turn(T.0 + lost)), repaired, "T + {lost} with the repair");
    for turn in (T.0 + lost + 1..T.0 + lost + 10).map(Turn) {
        let (ours, theirs) = (net.executed_ms(0, turn), net.executed_ms(1, turn));
        assert_eq!(ours, theirs, "{turn:?}: executed at {ours} on player 0, {theirs} on player 1");
    }
}

/// A command submitted while the game waits for the repair is stamped from the playout
/// schedule, not from the turn the game is stuck on. Player 0 loses eight datagrams; 10 ms
/// after the gap opens it submits a command. The turns after T are sealed already, so a stamp
/// counted from T would miss its turn and execute later than its ticket says; counted from
/// the schedule (T + 9 is next on it) it reaches the host in time and executes in the turn its
/// ticket names, with no `CommandLate`. (Counted from T, it was stamped T and executed two
/// turns after T + 9.)
#[test]
fn a_command_submitted_while_behind_the_schedule_keeps_its_ticket() {
    let lost = 8;
    let opened = run_with_gap(lost, false).1;
    let submit_at = opened + 10;
    let mut net = Net::new(lost, false);
    net.submit_at = Some(submit_at);
    net.run_until(END_MS);
    let ticket = net.ticket.expect("the command was submitted");
    assert!(net.executed_ms(0, T) > submit_at, "submitted at {submit_at}, while T was missing");
    let delay = net.clients[0].pace().command_delay_turns;
    let from_schedule = Turn(T.0 + lost + 1 - 1 + delay);
    assert_eq!(ticket.turn, from_schedule, "stamped from T + 9, delay {delay}, opened {opened}");
    assert_eq!(net.command_executed, Some(ticket.turn), "executed where the ticket says");
    assert!(!net.told_late, "no CommandLate");
}
