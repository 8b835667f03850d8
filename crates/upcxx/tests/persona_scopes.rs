//! Persona scopes as the calls of §10.5.2 name them: `top_persona_scope` and
//! `default_persona_scope`.
use gex::testing::spmd;
use upcxx::{
    current_persona, default_persona, default_persona_scope, master_persona, top_persona_scope,
    Persona, PersonaScope,
};

mod common;

/// §10.5.2 ¶16–¶20: the top scope is the one that pushed the current persona, the
/// default scope holds the default persona, on the thread that called `init` (where
/// `init` pushed the master persona) and on any other.
#[test]
fn top_and_default_scopes_name_the_stack_ends() {
    spmd(1, || {
        upcxx::init();
        assert_eq!(top_persona_scope().persona(), master_persona());
        assert_eq!(default_persona_scope().persona(), default_persona());
        assert_ne!(top_persona_scope(), default_persona_scope());

        let p = Persona::new();
        let outer = top_persona_scope();
        let scope = PersonaScope::new(&p);
        assert_eq!(top_persona_scope(), scope.scope_ref());
        assert_eq!(top_persona_scope().persona(), p);
        assert_eq!(current_persona(), p);
        assert_eq!(outer.persona(), master_persona(), "an outer scope lasts");
        let inner = top_persona_scope();
        drop(scope);
        assert_eq!(top_persona_scope(), outer);
        let ended = common::panic_text(|| drop(inner.persona()));
        assert!(ended.contains("has ended"), "{ended}");

        let thread_default = std::thread::spawn(|| {
            // A new thread: its implicit scope is both the top and the bottom one.
            assert_eq!(top_persona_scope(), default_persona_scope());
            assert_eq!(default_persona_scope().persona(), default_persona());
            default_persona()
        })
        .join()
        .unwrap();
        assert_ne!(thread_default, default_persona());
        upcxx::finalize();
    });
}

/// §10.5.2 ¶17: after `liberate_master_persona`, the default scope is the top one again,
/// and a scope holding the master persona is the top one while it lasts.
#[test]
fn the_master_scope_moves_with_the_master_persona() {
    spmd(1, || {
        upcxx::init();
        upcxx::liberate_master_persona();
        assert_eq!(top_persona_scope(), default_persona_scope());
        let scope = PersonaScope::new(&master_persona());
        assert_eq!(top_persona_scope(), scope.scope_ref());
        assert_eq!(top_persona_scope().persona(), master_persona());
        upcxx::finalize();
        drop(scope);
    });
}
