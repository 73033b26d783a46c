//! Every example under "Payload shapes" in format-spec/events.md is an envelope that parses,
//! has a typed view and carries its type's payload shape, so the documentation cannot drift
//! from the code.

use sessionlog_session::Event;

#[test]
fn every_payload_example_in_the_spec_is_a_valid_event() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../format-spec/events.md");
    let spec = std::fs::read_to_string(path).expect("format-spec/events.md is readable");
    let start = spec.find("## Payload shapes").expect("the section exists");
    let end = spec[start..]
        .find("## Validation rules")
        .map_or(spec.len(), |e| start + e);
    let mut examples = 0;
    let mut in_block = false;
    for line in spec[start..end].lines() {
        match line {
            "```json" => in_block = true,
            "```" => in_block = false,
            _ if in_block => {
                let event = Event::parse(line, 0)
                    .unwrap_or_else(|e| panic!("example does not parse: {e}\n{line}"));
                event
                    .view()
                    .unwrap_or_else(|e| panic!("example has no typed view: {e}\n{line}"));
                examples += 1;
            }
            _ => {}
        }
    }
    assert!(examples >= 15, "only {examples} examples found");
}
