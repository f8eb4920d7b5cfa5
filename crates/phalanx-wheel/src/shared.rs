//! The part of the public API both wheels share, written once.
//!
//! The two wheels differ only in where a deadline is filed and in how the clock moves to the
//! next slot with due entries. Everything else — the clock and size queries, starting,
//! cancelling, re-arming and looking up a timer, the poll loop and the drain iterator — is the
//! same code over each wheel's own store (the hashed wheel's
//! [`NodeStore`](crate::nodes::NodeStore), the hierarchical wheel's
//! [`Store`](crate::store::Store)), and [`wheel_api!`] generates it as
//! inherent methods (with their docs) of each wheel, so callers need no trait in scope and
//! every call is as direct as a hand-written method.

/// Generates the shared inherent methods of `$wheel<T>` and its `Drain` iterator, in the
/// invoking module.
///
/// `$wheel<T>` must have the fields
/// - `store: Store<T>`, holding its timers;
/// - `now: u64`, the clock;
/// - `horizon: u64`, a lower bound on every deadline not yet in the ready queue: while it is
///   past `until` and the ready queue is empty, `poll(until)` can move the clock to `until`
///   without looking at any slot;
///
/// and the methods
/// - `fn place(&mut self, r: Ref)`, filing a reference with `r.deadline >= now` into the list
///   it belongs in (the store's ready queue when it is due at `now`) and lowering `horizon` as
///   needed;
/// - `fn step(&mut self, until: u64)`, called with the ready queue empty and `now < until`:
///   moving the clock forward, never past `until`, to the next tick that may have due entries
///   (leaving those due at the new `now` in the ready queue) and keeping `horizon` a lower
///   bound. `poll` calls it until something is due or the clock reads `until`.
macro_rules! wheel_api {
    ($wheel:ident) => {
        impl<T> $wheel<T> {
            /// The wheel's current tick: the latest tick handed to [`poll`](Self::poll), or
            /// while a drain is under way, the tick whose entries are being handed out.
            pub fn now(&self) -> u64 {
                self.now
            }

            /// How many timers are pending (including due ones not yet handed out).
            pub fn len(&self) -> usize {
                self.store.len()
            }

            /// Whether no timer is pending.
            pub fn is_empty(&self) -> bool {
                self.store.len() == 0
            }

            /// Makes room for `additional` more timers without allocating later, and for
            /// tombstones their cancellations may leave. A hierarchical wheel: slab entries (16
            /// bytes each for a 4-byte value, plus an 8-byte start sequence) and list links (16
            /// bytes, up to four a timer: room for every tombstone); a hashed wheel: its
            /// entries, which are the list nodes (20 bytes for a `u32` value, and a 4-byte
            /// generation), one a timer plus one a tombstone for every four timers (more
            /// tombstones, up to three a timer, grow the slab once), written now so that a
            /// start does not even fault in a page.
            pub fn reserve(&mut self, additional: usize) {
                self.store.reserve(additional);
            }

            /// Starts a timer due at tick `deadline` (any `u64`).
            ///
            /// A deadline equal to [`now`](Self::now) is due at once: the next `poll` hands it
            /// out, after every entry already due at this tick. A deadline before `now` is
            /// refused with [`InsertError::DeadlineElapsed`](crate::InsertError::DeadlineElapsed)
            /// and nothing is stored.
            #[inline(always)]
            pub fn insert(
                &mut self,
                deadline: u64,
                value: T,
            ) -> Result<$crate::TimerHandle, $crate::InsertError> {
                if deadline < self.now {
                    return Err($crate::InsertError::DeadlineElapsed { deadline, now: self.now });
                }
                let (r, handle) =
                    self.store.alloc(deadline, value).ok_or($crate::InsertError::Full)?;
                self.place(r);
                Ok(handle)
            }

            /// Stops a timer and returns its value, or `None` if the handle is stale (the timer
            /// already fired or was cancelled). A stale handle never touches another timer.
            /// O(1): the timer ends at once, and its place in the slot list is left as a
            /// tombstone to be dropped when the slot is next visited.
            #[inline]
            pub fn cancel(&mut self, handle: $crate::TimerHandle) -> Option<T> {
                let index = self.store.resolve(handle)?;
                Some(self.store.cancel(index))
            }

            /// Stops a timer without handing back its value: `true` if it was pending, `false`
            /// if the handle is stale. Otherwise like [`cancel`](Self::cancel). A hashed wheel
            /// drops the value when it frees the timer's node: when its slot is next visited,
            /// or at once in a wheel that never held more than 16 timers; a large one touches
            /// only the timer's 4-byte generation here, where a cancel also reads its node for
            /// the value. A hierarchical wheel drops the value at once.
            #[inline]
            pub fn discard(&mut self, handle: $crate::TimerHandle) -> bool {
                let Some(index) = self.store.resolve(handle) else {
                    return false;
                };
                self.store.discard(index);
                true
            }

            /// Re-arms a pending timer to `deadline`, keeping its handle and value. The timer
            /// counts as newly started: it takes a fresh start sequence. A hierarchical
            /// wheel files the timer afresh and leaves its old place as a tombstone, O(1); a
            /// hashed wheel moves the timer's entry, which walks its old slot's newer entries.
            #[inline]
            pub fn reset(
                &mut self,
                handle: $crate::TimerHandle,
                deadline: u64,
            ) -> Result<(), $crate::ResetError> {
                let index = self.store.resolve(handle).ok_or($crate::ResetError::NotFound)?;
                if deadline < self.now {
                    return Err($crate::ResetError::DeadlineElapsed { deadline, now: self.now });
                }
                let r = self.store.renew(index, deadline);
                self.place(r);
                Ok(())
            }

            /// The value of a pending timer.
            pub fn get(&self, handle: $crate::TimerHandle) -> Option<&T> {
                self.store.resolve(handle).map(|index| self.store.value(index))
            }

            /// The value of a pending timer, mutably.
            pub fn get_mut(&mut self, handle: $crate::TimerHandle) -> Option<&mut T> {
                let index = self.store.resolve(handle)?;
                Some(self.store.value_mut(index))
            }

            /// The deadline of a pending timer.
            pub fn deadline(&self, handle: $crate::TimerHandle) -> Option<u64> {
                self.store.resolve(handle).map(|index| self.store.deadline(index))
            }

            /// Hands out the next timer due at or before `until`, advancing the wheel's clock
            /// as far as needed, or returns `None` once nothing more is due by `until` (the
            /// clock then reads `until`). Entries come out in `(deadline, start sequence)`
            /// order.
            ///
            /// An `until` before [`now`](Self::now) does not move the clock back; it only hands
            /// out entries already due.
            #[inline]
            pub fn poll(&mut self, until: u64) -> Option<$crate::Expired<T>> {
                if self.idle_until(until) {
                    return None;
                }
                self.poll_due(until)
            }

            /// Whether nothing can be due by `until` (the common empty tick, in O(1)); if so,
            /// the clock moves to `until`. Inline, so that a caller's loop checks it without
            /// a call.
            #[inline(always)]
            fn idle_until(&mut self, until: u64) -> bool {
                let idle = self.store.ready_is_empty() && self.horizon > until;
                if idle {
                    self.now = self.now.max(until);
                }
                idle
            }

            /// With the ready queue empty: moves the clock to the next tick with due entries
            /// (into the ready queue) and returns `true`, or to `until` and returns `false`
            /// when nothing more is due by then.
            #[inline(always)]
            fn refill(&mut self, until: u64) -> bool {
                if self.horizon > until || self.now >= until {
                    self.now = self.now.max(until);
                    return false;
                }
                self.step(until);
                true
            }

            /// [`poll`](Self::poll) when something may be due (kept out of line so that the
            /// empty check inlines into a caller's loop).
            #[inline(never)]
            fn poll_due(&mut self, until: u64) -> Option<$crate::Expired<T>> {
                loop {
                    if let Some(expired) = self.store.pop_ready() {
                        return Some(expired);
                    }
                    if !self.refill(until) {
                        return None;
                    }
                }
            }

            /// An iterator of [`poll`](Self::poll)`(until)`: every timer due by `until`, in
            /// order.
            ///
            /// Consuming it with [`for_each`](Iterator::for_each) (or anything else built on
            /// [`Iterator::fold`], such as `count`) hands the due timers out in one loop
            /// instead of a `poll` call each; a `for` loop calls `poll`. Both give the same
            /// timers in the same order; `for_each` is the faster when many are due (the
            /// `fire` rows of `docs/measurements/wheel.md` measure it).
            ///
            /// ```
            /// use phalanx_wheel::HashedWheel;
            ///
            /// let mut wheel = HashedWheel::new(0, 64).unwrap();
            /// for (tick, name) in [(3, "archer"), (1, "scout"), (3, "catapult")] {
            ///     wheel.insert(tick, name).unwrap();
            /// }
            /// let mut fired = Vec::new();
            /// wheel.drain(3).for_each(|expired| fired.push(expired.value));
            /// assert_eq!(fired, ["scout", "archer", "catapult"]);
            /// ```
            pub fn drain(&mut self, until: u64) -> Drain<'_, T> {
                Drain { wheel: self, until }
            }
        }

        #[doc = concat!("The iterator returned by [`", stringify!($wheel), "::drain`].")]
        #[derive(Debug)]
        pub struct Drain<'a, T> {
            wheel: &'a mut $wheel<T>,
            until: u64,
        }

        impl<T> Iterator for Drain<'_, T> {
            type Item = $crate::Expired<T>;

            #[inline]
            fn next(&mut self) -> Option<$crate::Expired<T>> {
                self.wheel.poll(self.until)
            }

            /// Hands out every due timer in one loop: `poll`'s work without a call per
            /// timer.
            #[inline]
            fn fold<B, F>(self, init: B, f: F) -> B
            where
                F: FnMut(B, $crate::Expired<T>) -> B,
            {
                if self.wheel.idle_until(self.until) {
                    return init;
                }
                self.fold_due(init, f)
            }
        }

        impl<T> Drain<'_, T> {
            /// [`Iterator::fold`] when something may be due (kept out of line so that the
            /// empty check inlines into a caller's loop).
            #[inline(never)]
            fn fold_due<B, F>(self, init: B, mut f: F) -> B
            where
                F: FnMut(B, $crate::Expired<T>) -> B,
            {
                let mut acc = init;
                loop {
                    while let Some(expired) = self.wheel.store.pop_ready() {
                        acc = f(acc, expired);
                    }
                    if !self.wheel.refill(self.until) {
                        return acc;
                    }
                }
            }
        }
    };
}

pub(crate) use wheel_api;
