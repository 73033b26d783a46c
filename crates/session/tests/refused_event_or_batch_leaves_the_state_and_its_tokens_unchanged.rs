//! A refused event, or an atomic batch refused part-way, leaves the session state exactly
//! as it was, including what a checkpoint holds: token estimates, usage ledger, pressure,
//! request seqs and message presence. The state then goes on like an untouched copy.

mod common;

use std::sync::Arc;

use common::{agent_step, agent_steps, open_first_step, replacing, user, AgentCursor};
use proptest::prelude::*;
use sessionlog_session::tokens::HeuristicCounter;
use sessionlog_session::{Error, FormatVersion, Session, SessionHeader};

fn measured_session() -> Session {
    open_first_step(Session::with_tokens(
        SessionHeader::new("s1", 1000, Some("/work")),
        FormatVersion::dsh_v0(),
        Arc::new(HeuristicCounter),
    ))
}

fn checkpoint(session: &Session) -> Vec<u8> {
    let mut bytes = Vec::new();
    session.state().encode_checkpoint(&mut bytes);
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn refused_batch_takes_back_tokens_requests_and_messages(
        history in prop::collection::vec(agent_step(), 0..40),
        batch in prop::collection::vec(agent_step(), 0..12),
    ) {
        let mut session = measured_session();
        let mut cursor = AgentCursor::in_first_step();
        agent_steps(&mut session, &mut cursor, &history);
        let before = session.clone();
        let bytes = checkpoint(&session);

        let result: Result<(), Error> = session.atomically(|s| {
            let mut inner = cursor.clone();
            agent_steps(s, &mut inner, &batch);
            // A replacement of a node that is not on the surface is always refused.
            s.try_append(replacing(user("bad", "x"), u64::MAX, u64::MAX, &[u64::MAX]))?;
            Ok(())
        });
        prop_assert!(result.is_err());
        prop_assert_eq!(session.state(), before.state());
        prop_assert_eq!(session.state().pressure(), before.state().pressure());
        prop_assert_eq!(session.state().token_view(), before.state().token_view());
        prop_assert_eq!(checkpoint(&session), bytes);

        // A single refused event changes nothing either.
        prop_assert!(session
            .try_append(replacing(user("bad", "x"), u64::MAX, u64::MAX, &[u64::MAX]))
            .is_err());
        prop_assert_eq!(checkpoint(&session), checkpoint(&before));

        // And the state goes on exactly like the untouched copy.
        let mut copy = before;
        let mut copy_cursor = cursor.clone();
        agent_steps(&mut copy, &mut copy_cursor, &batch);
        agent_steps(&mut session, &mut cursor, &batch);
        prop_assert_eq!(session.state(), copy.state());
        prop_assert_eq!(checkpoint(&session), checkpoint(&copy));
    }
}
