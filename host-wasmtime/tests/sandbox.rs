//! The sandbox engine bounds the time of a call: a guest that loops forever is interrupted by
//! the epoch ticker and the call returns an error; the host and the engine stay usable.

use std::time::Duration;

use host_wasmtime::component::{sandbox_engine, EPOCH_TICK};
use wasmtime::component::{Component, Linker};
use wasmtime::Store;

/// A component whose `spin` export never returns, and whose `answer` returns 42.
const LOOPING: &str = r#"
(component
  (core module $m
    (func (export "spin") (loop $forever (br $forever)))
    (func (export "answer") (result i32) (i32.const 42)))
  (core instance $i (instantiate $m))
  (func (export "spin") (canon lift (core func $i "spin")))
  (func (export "answer") (result u32) (canon lift (core func $i "answer"))))
"#;

#[test]
fn a_looping_guest_is_interrupted_and_the_host_goes_on() {
    let engine = sandbox_engine().unwrap();
    let component = Component::new(&engine, LOOPING).unwrap();
    let mut store = Store::new(&engine, ());
    // 5 ticks: the loop is stopped after about 50 ms, whatever the machine's speed.
    store.set_epoch_deadline(5);
    let instance = Linker::new(&engine)
        .instantiate(&mut store, &component)
        .unwrap();
    let spin = instance
        .get_typed_func::<(), ()>(&mut store, "spin")
        .unwrap();
    let err = spin.call(&mut store, ()).unwrap_err();
    let trap = err.downcast_ref::<wasmtime::Trap>().copied();
    assert_eq!(trap, Some(wasmtime::Trap::Interrupt), "{err:?}");

    // A fresh instance on the same engine works normally.
    let mut store = Store::new(&engine, ());
    store.set_epoch_deadline(100);
    let instance = Linker::new(&engine)
        .instantiate(&mut store, &component)
        .unwrap();
    let answer = instance
        .get_typed_func::<(), (u32,)>(&mut store, "answer")
        .unwrap();
    assert_eq!(answer.call(&mut store, ()).unwrap(), (42,));
    assert!(EPOCH_TICK <= Duration::from_millis(50));
}
