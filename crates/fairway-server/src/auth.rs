//! Bearer tokens: who a caller is and what it may do.
//!
//! A token file is TOML:
//!
//! ```toml
//! [[token]]
//! secret = "a long random string"
//! role = "tenant"      # submit as this tenant, read and cancel its own jobs
//! tenant = "acme/etl"
//!
//! [[token]]
//! secret = "another"
//! role = "worker"      # lease (from `pool` only, when set), heartbeat, complete
//! pool = "gpu"
//!
//! [[token]]
//! secret = "and another"
//! role = "admin"       # everything, including PUT /v1/policy
//! ```
//!
//! Secrets are compared in constant time, against every token, so that the time a request
//! takes says nothing about how much of a secret it guessed or which token it matched.

use serde::Deserialize;
use std::fmt;
use toml::Spanned;

/// Shortest secret accepted: guessing 16 random characters is out of reach.
pub const MIN_SECRET_LEN: usize = 16;
/// Most tokens a file may hold (each request compares against all of them).
pub const MAX_TOKENS: usize = 10_000;

/// What a token allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Submit as its tenant; read and cancel that tenant's jobs.
    Tenant,
    /// Lease work (from its pool, when it names one), heartbeat and complete.
    Worker,
    /// Everything.
    Admin,
}

/// Who is calling, once the `Authorization` header has been checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// The server runs without a token file: anyone on loopback may do anything.
    Open,
    /// A tenant token.
    Tenant(String),
    /// A worker token, restricted to a pool when it names one.
    Worker(Option<String>),
    /// An admin token.
    Admin,
}

impl Caller {
    /// The tenant whose jobs this caller may see, or `None` for every tenant.
    pub fn tenant_scope(&self) -> Option<&str> {
        match self {
            Caller::Tenant(t) => Some(t),
            _ => None,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenFile {
    #[serde(default)]
    token: Vec<Spanned<TokenSpec>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenSpec {
    secret: String,
    role: Role,
    tenant: Option<String>,
    pool: Option<String>,
}

struct Token {
    secret: Vec<u8>,
    caller: Caller,
}

/// The tokens of a token file.
pub struct Tokens {
    tokens: Vec<Token>,
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print secrets.
        f.debug_struct("Tokens")
            .field("count", &self.tokens.len())
            .finish()
    }
}

impl Clone for Tokens {
    fn clone(&self) -> Self {
        Tokens {
            tokens: self
                .tokens
                .iter()
                .map(|t| Token {
                    secret: t.secret.clone(),
                    caller: t.caller.clone(),
                })
                .collect(),
        }
    }
}

impl Tokens {
    /// Parses a token file. Errors name the line and key (`name` is the file, for messages).
    pub fn parse(name: &str, text: &str) -> Result<Tokens, String> {
        let file: TokenFile = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| fairway_core::config::line_of(text, s.start))
                .map(|l| format!(":{l}"))
                .unwrap_or_default();
            format!("{name}{line}: {}", e.message().trim())
        })?;
        if file.token.is_empty() {
            return Err(format!("{name}: no [[token]] entries"));
        }
        if file.token.len() > MAX_TOKENS {
            return Err(format!("{name}: at most {MAX_TOKENS} tokens"));
        }
        let mut tokens: Vec<Token> = Vec::new();
        for spanned in &file.token {
            let line = fairway_core::config::line_of(text, spanned.span().start);
            let at = |key: &str, what: &str| format!("{name}:{line}: key `{key}`: {what}");
            let spec = spanned.get_ref();
            if spec.secret.len() < MIN_SECRET_LEN {
                return Err(at(
                    "secret",
                    &format!("must be at least {MIN_SECRET_LEN} characters"),
                ));
            }
            if tokens.iter().any(|t| t.secret == spec.secret.as_bytes()) {
                return Err(at("secret", "is used by another token"));
            }
            let caller = match spec.role {
                Role::Tenant => {
                    if spec.pool.is_some() {
                        return Err(at("pool", "only a worker token names a pool"));
                    }
                    let tenant = spec
                        .tenant
                        .clone()
                        .ok_or_else(|| at("tenant", "a tenant token must name its tenant"))?;
                    fairway_core::policy::check_tenant_name(&tenant)
                        .map_err(|e| at("tenant", &e))?;
                    Caller::Tenant(tenant)
                }
                Role::Worker => {
                    if spec.tenant.is_some() {
                        return Err(at("tenant", "only a tenant token names a tenant"));
                    }
                    if let Some(pool) = &spec.pool {
                        fairway_core::policy::check_name("pool", pool)
                            .map_err(|e| at("pool", &e))?;
                    }
                    Caller::Worker(spec.pool.clone())
                }
                Role::Admin => {
                    if spec.tenant.is_some() || spec.pool.is_some() {
                        return Err(at(
                            "role",
                            "an admin token names neither a tenant nor a pool",
                        ));
                    }
                    Caller::Admin
                }
            };
            tokens.push(Token {
                secret: spec.secret.as_bytes().to_vec(),
                caller,
            });
        }
        Ok(Tokens { tokens })
    }

    /// How many tokens there are.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether there are none (a parsed file always has at least one).
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The caller a presented secret belongs to. Compares against every token, in constant
    /// time each, and never stops early.
    pub fn lookup(&self, presented: &[u8]) -> Option<Caller> {
        let mut found: Option<&Caller> = None;
        for token in &self.tokens {
            if constant_time_eq(&token.secret, presented) {
                found = Some(&token.caller);
            }
        }
        found.cloned()
    }
}

/// Whether `a` and `b` are equal, in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().max(b.len());
    let mut diff = (a.len() ^ b.len()) as u64;
    for i in 0..n {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= u64::from(x ^ y);
    }
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[token]]
secret = "tenant-secret-0123456789"
role = "tenant"
tenant = "acme"

[[token]]
secret = "worker-secret-0123456789"
role = "worker"
pool = "gpu"

[[token]]
secret = "admin-secret-0123456789"
role = "admin"
"#;

    #[test]
    fn tokens_map_secrets_to_callers() {
        let tokens = Tokens::parse("tokens.toml", FILE).unwrap();
        assert_eq!(tokens.len(), 3);
        assert_eq!(
            tokens.lookup(b"tenant-secret-0123456789"),
            Some(Caller::Tenant("acme".into()))
        );
        assert_eq!(
            tokens.lookup(b"worker-secret-0123456789"),
            Some(Caller::Worker(Some("gpu".into())))
        );
        assert_eq!(
            tokens.lookup(b"admin-secret-0123456789"),
            Some(Caller::Admin)
        );
        assert_eq!(tokens.lookup(b"admin-secret-012345678"), None);
        assert_eq!(tokens.lookup(b""), None);
        assert!(!format!("{tokens:?}").contains("secret-0"));
    }

    #[test]
    fn bad_token_files_name_the_line_and_key() {
        let err = Tokens::parse(
            "t.toml",
            "[[token]]\nsecret = \"short\"\nrole = \"admin\"\n",
        )
        .unwrap_err();
        assert!(err.starts_with("t.toml:1: key `secret`"), "{err}");
        let err = Tokens::parse(
            "t.toml",
            "[[token]]\nsecret = \"0123456789abcdefgh\"\nrole = \"tenant\"\n",
        )
        .unwrap_err();
        assert!(err.contains("key `tenant`"), "{err}");
        let err = Tokens::parse(
            "t.toml",
            "[[token]]\nsecret = \"0123456789abcdefgh\"\nrole = \"boss\"\n",
        )
        .unwrap_err();
        assert!(err.starts_with("t.toml:3"), "{err}");
        assert!(Tokens::parse("t.toml", "").is_err());
    }

    #[test]
    fn constant_time_eq_is_equality() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
        assert!(constant_time_eq(b"", b""));
    }
}
