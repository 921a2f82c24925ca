//! `$(VAR)` expansion as upstream's `third_party/forked/golang/expansion`: a reference to a
//! known variable is replaced by its value, an unknown one is left as written, `$$` is an
//! escaped `$`, and an unterminated `$(` is copied verbatim.

/// Expands `$(NAME)` references in `input` with `mapping`. `mapping` returns `None` for an
/// unknown name, which leaves the reference untouched.
pub fn expand(input: &str, mut mapping: impl FnMut(&str) -> Option<String>) -> String {
    let bytes = input.as_bytes();
    let mut out = String::with_capacity(input.len());
    let mut checkpoint = 0;
    let mut cursor = 0;
    while cursor < bytes.len() {
        if bytes[cursor] == b'$' && cursor + 1 < bytes.len() {
            out.push_str(&input[checkpoint..cursor]);
            let rest = &input[cursor + 1..];
            let advance = match rest.as_bytes()[0] {
                // `$$` is an escaped `$`.
                b'$' => {
                    out.push('$');
                    1
                }
                b'(' => match rest.find(')') {
                    Some(close) => {
                        let name = &rest[1..close];
                        match mapping(name) {
                            Some(v) => out.push_str(&v),
                            None => {
                                out.push_str("$(");
                                out.push_str(name);
                                out.push(')');
                            }
                        }
                        close + 1
                    }
                    // An incomplete reference is copied as is.
                    None => {
                        out.push_str("$(");
                        1
                    }
                },
                // A `$` that does not start a reference stays, with the character after it.
                _ => {
                    let ch = rest.chars().next().map_or(1, char::len_utf8);
                    out.push('$');
                    out.push_str(&rest[..ch]);
                    ch
                }
            };
            cursor += advance;
            checkpoint = cursor + 1;
        }
        cursor += 1;
    }
    if checkpoint < input.len() {
        out.push_str(&input[checkpoint..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::expand;
    use std::collections::HashMap;

    fn vars() -> HashMap<&'static str, &'static str> {
        HashMap::from([("VAR_A", "A"), ("VAR_B", "B"), ("VAR_EMPTY", "")])
    }

    fn run(input: &str) -> String {
        let v = vars();
        expand(input, |k| v.get(k).map(|s| s.to_string()))
    }

    #[test]
    fn known_references_expand_and_unknown_ones_stay() {
        assert_eq!(run("$(VAR_A)"), "A");
        assert_eq!(run("___$(VAR_B)___"), "___B___");
        assert_eq!(run("$(VAR_A)-$(VAR_B)"), "A-B");
        assert_eq!(run("$(VAR_EMPTY)x"), "x");
        assert_eq!(run("$(NOPE)"), "$(NOPE)");
        assert_eq!(run("foo$(NOPE)bar"), "foo$(NOPE)bar");
    }

    #[test]
    fn double_dollar_escapes_a_reference() {
        assert_eq!(run("$$(VAR_A)"), "$(VAR_A)");
        assert_eq!(run("$$$(VAR_A)"), "$A");
        assert_eq!(run("$$$$(VAR_A)"), "$$(VAR_A)");
        assert_eq!(run("f00$$"), "f00$");
    }

    #[test]
    fn malformed_references_are_copied_verbatim() {
        assert_eq!(run("$(VAR_A"), "$(VAR_A");
        assert_eq!(run("$VAR_A"), "$VAR_A");
        assert_eq!(run("$"), "$");
        assert_eq!(run("x$"), "x$");
        assert_eq!(run("$()"), "$()");
        assert_eq!(run("$é$(VAR_B)"), "$éB");
    }
}
