//! What the VIS tests share: the completion forms and the segment layout.

use gex::{Client, Event, EventCategory, Flags, Segment, Team};

/// Bytes of each writer's region in every target's segment.
pub(crate) const REGION: usize = 1 << 16;

/// The completion forms of a call.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Form {
    Blocking,
    Nb,
    NbLeaf,
    Nbi,
    NbiLeaf,
}

pub(crate) const FORMS: [Form; 5] = [
    Form::Blocking,
    Form::Nb,
    Form::NbLeaf,
    Form::Nbi,
    Form::NbiLeaf,
];
pub(crate) const GET_FORMS: [Form; 3] = [Form::Blocking, Form::Nb, Form::Nbi];

impl Form {
    pub(crate) fn flags(self) -> Flags {
        match self {
            Form::NbLeaf | Form::NbiLeaf => Flags::ENABLE_LEAF_LC,
            _ => Flags::NONE,
        }
    }

    /// Synchronizes an operation of this form: its event (and its LC leaf), or the NBI
    /// categories.
    pub(crate) fn sync(self, e: Option<Event>) {
        match self {
            Form::Blocking => assert!(e.is_none()),
            Form::Nb | Form::NbLeaf => {
                let e = e.expect("an NB call returns an event");
                if let Form::NbLeaf = self {
                    e.query_leaf(EventCategory::LC).wait();
                }
                e.wait();
            }
            Form::Nbi | Form::NbiLeaf => {
                assert!(e.is_none());
                gex::nbi_wait(EventCategory::PUT | EventCategory::GET | EventCategory::LC);
            }
        }
    }
}

/// A strided shape: element size, counts, source and destination strides.
pub(crate) fn region(writer: u32) -> usize {
    writer as usize * REGION
}

pub(crate) fn init(name: &str) -> (Client, Team, Segment, Vec<usize>) {
    super::quiet_expected_panics();
    let (client, _ep, team) = Client::init(name, Flags::NONE).unwrap();
    let seg = Segment::attach(&team, REGION * team.size() as usize).unwrap();
    let bases = super::segment_bases(&team);
    (client, team, seg, bases)
}
