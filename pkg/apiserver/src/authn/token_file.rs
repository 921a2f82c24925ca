//! The static token file (`--token-auth-file`), upstream's CSV: one line per token,
//! `token,user,uid` and optionally a quoted list of groups: `token,user,uid,"group1,group2"`.
//! Read once at start; a file that does not parse stops the server, naming the file, the line
//! and what was expected. As upstream, a line without a token is skipped with a warning and a
//! token given twice keeps its last line.

use super::UserToken;
use crate::auth::{AuthError, UserInfo};
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum TokenFileError {
    #[error("--token-auth-file {path}: reading it")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("--token-auth-file {path}: line {line}: {message}")]
    Syntax { path: PathBuf, line: usize, message: String },
}

/// The tokens of one file.
#[derive(Default)]
pub struct TokenFile {
    users: HashMap<String, UserInfo>,
}

/// Never the tokens themselves.
impl std::fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenFile({} tokens)", self.users.len())
    }
}

/// One CSV record and the line it starts on.
struct Record {
    line: usize,
    fields: Vec<String>,
}

/// RFC 4180 CSV as Go's `encoding/csv` reads it: fields separated by commas, a field in double
/// quotes may hold commas, newlines and `""` for a quote; blank lines are skipped.
fn records(text: &str) -> Result<Vec<Record>, (usize, String)> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut chars = text.chars().peekable();
    while chars.peek().is_some() {
        // Blank lines are not records.
        if matches!(chars.peek(), Some('\n' | '\r')) {
            if chars.next() == Some('\n') {
                line += 1;
            }
            continue;
        }
        let start = line;
        let mut fields = Vec::new();
        let mut field = String::new();
        loop {
            if chars.peek() == Some(&'"') {
                chars.next();
                loop {
                    match chars.next() {
                        None => return Err((start, "extraneous or missing \" in quoted-field".into())),
                        Some('"') if chars.peek() == Some(&'"') => {
                            chars.next();
                            field.push('"');
                        }
                        Some('"') => break,
                        Some(c) => {
                            if c == '\n' {
                                line += 1;
                            }
                            field.push(c);
                        }
                    }
                }
                match chars.peek() {
                    None | Some(',' | '\n' | '\r') => {}
                    Some(_) => return Err((line, "extraneous or missing \" in quoted-field".into())),
                }
            } else {
                while let Some(&c) = chars.peek() {
                    if matches!(c, ',' | '\n' | '\r') {
                        break;
                    }
                    if c == '"' {
                        return Err((line, "bare \" in non-quoted-field".into()));
                    }
                    field.push(c);
                    chars.next();
                }
            }
            fields.push(std::mem::take(&mut field));
            match chars.next() {
                Some(',') => continue,
                Some('\r') => {
                    if chars.peek() == Some(&'\n') {
                        chars.next();
                    }
                    line += 1;
                    break;
                }
                Some('\n') => {
                    line += 1;
                    break;
                }
                _ => break,
            }
        }
        out.push(Record { line: start, fields });
    }
    Ok(out)
}

impl TokenFile {
    pub fn load(path: &Path) -> Result<TokenFile, TokenFileError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| TokenFileError::Read { path: path.into(), source })?;
        Self::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<TokenFile, TokenFileError> {
        let syntax = |line, message| TokenFileError::Syntax { path: path.into(), line, message };
        let mut users = HashMap::new();
        for r in records(text).map_err(|(line, m)| syntax(line, m))? {
            if r.fields.len() < 3 {
                return Err(syntax(
                    r.line,
                    format!(
                        "expected at least 3 columns (token, user name, user uid) and optionally a quoted list of groups (token,user,uid,\"group1,group2\"), found {}",
                        r.fields.len()
                    ),
                ));
            }
            let token = &r.fields[0];
            if token.is_empty() {
                tracing::warn!(path = %path.display(), line = r.line, "empty token in the token file; line skipped");
                continue;
            }
            let groups = match r.fields.get(3) {
                Some(g) => g.split(',').filter(|g| !g.is_empty()).map(str::to_string).collect(),
                None => Vec::new(),
            };
            let user =
                UserInfo { name: r.fields[1].clone(), uid: r.fields[2].clone(), groups, extra: Default::default() };
            if users.insert(token.clone(), user).is_some() {
                tracing::warn!(path = %path.display(), line = r.line, "duplicate token in the token file; the last one counts");
            }
        }
        Ok(TokenFile { users })
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// The user `token` names.
    pub fn user(&self, token: &str) -> Option<&UserInfo> {
        self.users.get(token)
    }
}

impl UserToken for std::sync::Arc<TokenFile> {
    fn user<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Option<UserInfo>, AuthError>> {
        Box::pin(std::future::ready(Ok(TokenFile::user(self, token).cloned())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<TokenFile, TokenFileError> {
        TokenFile::parse(Path::new("/etc/k1s/tokens.csv"), text)
    }

    #[test]
    fn lines_give_user_uid_and_quoted_groups() {
        let f = parse("t1,alice,u1,\"dev,ops\"\n\nt2,bob,u2\nt3,\"carol, the admin\",u3,admins\r\n").expect("valid");
        assert_eq!(f.len(), 3);
        let alice = f.user("t1").expect("alice");
        assert_eq!((alice.name.as_str(), alice.uid.as_str()), ("alice", "u1"));
        assert_eq!(alice.groups, ["dev", "ops"]);
        assert!(f.user("t2").expect("bob").groups.is_empty());
        assert_eq!(f.user("t3").expect("carol").name, "carol, the admin");
        assert_eq!(f.user("t3").expect("carol").groups, ["admins"]);
        assert!(f.user("t4").is_none());
    }

    #[test]
    fn empty_tokens_are_skipped_and_the_last_duplicate_counts() {
        let f = parse(",nobody,u0\nt1,alice,u1\nt1,eve,u2\n").expect("valid");
        assert_eq!(f.len(), 1);
        assert_eq!(f.user("t1").expect("t1").name, "eve");
    }

    #[test]
    fn a_malformed_file_names_the_line_and_what_was_expected() {
        let e = parse("t1,alice,u1\nt2,bob\n").expect_err("two columns").to_string();
        assert_eq!(
            e,
            "--token-auth-file /etc/k1s/tokens.csv: line 2: expected at least 3 columns (token, user name, user uid) and optionally a quoted list of groups (token,user,uid,\"group1,group2\"), found 2"
        );
        let e = parse("t1,alice,u1\n\nt2,b\"ob,u2\n").expect_err("bare quote").to_string();
        assert_eq!(e, "--token-auth-file /etc/k1s/tokens.csv: line 3: bare \" in non-quoted-field");
        let e = parse("t1,alice,u1,\"dev\n").expect_err("open quote").to_string();
        assert!(e.contains("line 1: extraneous or missing \" in quoted-field"), "{e}");
    }
}
