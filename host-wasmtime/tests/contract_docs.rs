//! The component carries its contract's documentation: decoded from the `.wasm` alone (as
//! `wasm-tools component wit` does), the world shows every WIT file of the contract with its doc
//! comments, so a plugin host author with only the component reads how to use it.

#[test]
fn the_component_shows_its_contract_with_its_docs() {
    let decoded = wit_component::decode(host_wasmtime::LOCK_COMPONENT).unwrap();
    let resolve = decoded.resolve();
    let mut printer = wit_component::WitPrinter::default();
    printer.emit_docs(true);
    printer.print(resolve, decoded.package(), &[]).unwrap();
    let printed = printer.output.to_string();
    for file in ["table.wit", "types.wit"] {
        let source =
            std::fs::read_to_string(format!("{}/wit/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        // Every doc comment of the contract is in the component's documentation.
        for doc in source
            .lines()
            .map(str::trim)
            .filter(|l| l.starts_with("///"))
        {
            let text = doc.trim_start_matches('/').trim();
            assert!(
                printed.contains(text),
                "{file}: the component's docs lack {text:?}"
            );
        }
    }
    assert!(
        printed.contains("export expiring:lock/table@0.2.0;"),
        "{printed}"
    );
    assert!(printed.contains("it imports nothing"));
}
