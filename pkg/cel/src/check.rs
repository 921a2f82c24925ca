//! What can be checked at compile time without a type checker: syntax (the parser's errors, in
//! cel-go's layout), identifiers that are not declared, and a result that is a literal.

use std::collections::BTreeSet;

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::{ParseErrors, Program};

use crate::CompileError;

/// Identifiers that name something without being declared: types and library namespaces.
pub(crate) const BUILTIN_IDENTS: &[&str] = &[
    "int",
    "uint",
    "double",
    "bool",
    "string",
    "bytes",
    "list",
    "map",
    "null_type",
    "type",
    "dyn",
    "optional",
    "strings",
    "math",
    "base64",
    "lists",
    "sets",
    "google",
    "duration",
    "timestamp",
    "optional_type",
    "net",
    "cel",
    "ip",
    "format",
];

/// The parser's errors as cel-go prints them: `ERROR: <input>:1:6: msg`, then ` | line` and
/// ` | ....^`.
///
/// Formatted here rather than by the `cel` crate's `Display`, which pads the caret with a format
/// width and so panics for a column past 65 535 (or a negative one).
pub(crate) fn format_parse_errors(errors: &ParseErrors) -> String {
    let formatted: Vec<String> = errors
        .errors
        .iter()
        .map(|e| {
            let (line, col) = e.pos;
            let mut text = format!("ERROR: <input>:{line}:{col}: {}", e.msg);
            let snippet = e
                .source_info
                .as_ref()
                .zip(usize::try_from(line - 1).ok())
                .and_then(|(info, l)| info.source.lines().nth(l));
            if let Some(snippet) = snippet {
                let dots = usize::try_from(col).unwrap_or(0).saturating_sub(1);
                text.push_str(&format!("\n | {snippet}\n | {}^", ".".repeat(dots)));
            }
            text
        })
        .collect();
    formatted.join("\n")
}

/// Fails on an identifier that is neither declared in `vars`, bound by a macro, nor built in.
/// Returns the declared variables the expression uses.
pub(crate) fn check(source: &str, program: &Program, vars: &[&str]) -> Result<BTreeSet<String>, CompileError> {
    let mut scope: Vec<String> = vars.iter().map(|v| (*v).to_owned()).collect();
    let mut errors = Vec::new();
    let mut used = BTreeSet::new();
    walk(program.expression(), &mut scope, &mut errors, &mut used, vars.len());
    let errors: BTreeSet<(u32, u32, String)> = errors
        .into_iter()
        .map(|(id, name)| {
            let offset = program.source_info().offset_for(id).map_or(0, |(start, _)| start);
            let (line, col) = line_col(source, offset as usize);
            (line, col, name)
        })
        .collect();
    if errors.is_empty() {
        return Ok(used);
    }
    let text: Vec<String> = errors
        .into_iter()
        .map(|(line, col, name)| {
            let snippet = source.lines().nth(line as usize - 1).unwrap_or_default();
            format!(
                "ERROR: <input>:{line}:{col}: undeclared reference to '{name}' (in container '')\n | {snippet}\n | {:.>width$}",
                "^",
                width = col as usize
            )
        })
        .collect();
    Err(CompileError::new(text.join("\n")))
}

/// The 1-based line and column (in characters) of a byte or character offset.
fn line_col(source: &str, offset: usize) -> (u32, u32) {
    let mut line = 1;
    let mut col = 1;
    for (i, c) in source.chars().enumerate() {
        if i == offset {
            break;
        }
        if c == '\n' {
            line += 1;
            col = 1;
        } else {
            col += 1;
        }
    }
    (line, col)
}

/// `scope` starts with the `declared` variables, then the macros' as they nest.
fn walk(
    e: &IdedExpr,
    scope: &mut Vec<String>,
    errors: &mut Vec<(u64, String)>,
    used: &mut BTreeSet<String>,
    declared: usize,
) {
    match &e.expr {
        Expr::Ident(name) => match scope.iter().rposition(|s| s == name) {
            Some(i) if i < declared => {
                used.insert(name.clone());
            }
            Some(_) => {}
            None if BUILTIN_IDENTS.contains(&name.as_str()) => {}
            None => errors.push((e.id, name.clone())),
        },
        Expr::Call(call) => {
            if let Some(t) = &call.target {
                walk(t, scope, errors, used, declared);
            }
            for a in &call.args {
                walk(a, scope, errors, used, declared);
            }
        }
        Expr::Comprehension(c) => {
            walk(&c.iter_range, scope, errors, used, declared);
            walk(&c.accu_init, scope, errors, used, declared);
            let depth = scope.len();
            scope.push(c.iter_var.clone());
            if let Some(v) = &c.iter_var2 {
                scope.push(v.clone());
            }
            scope.push(c.accu_var.clone());
            walk(&c.loop_cond, scope, errors, used, declared);
            walk(&c.loop_step, scope, errors, used, declared);
            scope.truncate(depth);
            scope.push(c.accu_var.clone());
            walk(&c.result, scope, errors, used, declared);
            scope.truncate(depth);
        }
        Expr::List(l) => l.elements.iter().for_each(|x| walk(x, scope, errors, used, declared)),
        Expr::Map(m) => {
            for entry in &m.entries {
                if let EntryExpr::MapEntry(me) = &entry.expr {
                    walk(&me.key, scope, errors, used, declared);
                    walk(&me.value, scope, errors, used, declared);
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &s.entries {
                if let EntryExpr::StructField(f) = &entry.expr {
                    walk(&f.value, scope, errors, used, declared);
                }
            }
        }
        Expr::Select(s) => walk(&s.operand, scope, errors, used, declared),
        Expr::Literal(_) | Expr::Unspecified => {}
    }
}
