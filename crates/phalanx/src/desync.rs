//! Desyncs: the report every peer gets on the same turn, the policy and reference that decide
//! what happens, and the forensics bundle that names the first divergent turn and both states
//! there (see [`Event::DesyncPinned`](crate::Event::DesyncPinned) and
//! [`Event::DesyncDiagnosed`](crate::Event::DesyncDiagnosed)).

pub use phalanx_proto::{
    DesyncBundle, DesyncPolicy, DesyncReference, DesyncReport, DiffError, PeerState,
    DESYNC_BUNDLE_FORMAT_VERSION,
};
