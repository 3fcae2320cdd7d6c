//! Fenced appends as the pool's groups write them (`pool.rs`): one request per call of
//! a session's writer, one statement per group.
//!
//! The group statement fences each session on its own: it moves a session's `next_seq`
//! only where the row still holds that writer's epoch and the seq its tail expects, and
//! inserts only the rows of the sessions it moved, all in one transaction. A group of
//! one uses the plain one-session statement (for one row, its form without arrays); an
//! append that takes posts in runs alone (it also deletes the posts, `fleet.rs`). A
//! group the server refuses (a foreign row, say) is written again one request at a
//! time, so one session's trouble never fails another's append.

use postgres::error::SqlState;
use postgres::types::ToSql;

use super::conn::{Connector, Stmt};
use super::pool::Conn;
use super::schema::{Sql, crc};
use crate::error::{Error, ErrorKind};
use crate::json;

/// The rows of one call of one session's writer, fenced on `(epoch, first)`.
pub(super) struct Request {
    pub id: String,
    pub epoch: i64,
    pub seqs: Vec<i64>,
    pub types: Vec<String>,
    pub lines: Vec<String>,
    /// Posts these rows take in, deleted from the mailbox in the same statement.
    pub posts: Vec<String>,
}

impl Request {
    /// The number of rows.
    pub fn rows(&self) -> usize {
        self.seqs.len()
    }

    /// The bytes of the lines.
    pub fn bytes(&self) -> usize {
        self.lines.iter().map(String::len).sum()
    }

    fn first(&self) -> i64 {
        self.seqs.first().copied().unwrap_or(0)
    }

    fn end(&self) -> i64 {
        self.first() + self.seqs.len() as i64
    }

    /// What failing to write it is called in messages.
    pub fn doing(&self) -> String {
        format!(
            "cannot append seq {}..{} to session {}",
            self.first(),
            self.end() - 1,
            json::quote(&self.id)
        )
    }
}

/// How a request's write ended.
pub(super) enum Outcome {
    /// Committed (durable as the store's mode says).
    Written,
    /// Its fence did not hold: nothing of it was written; the writer asks why.
    Refused,
    /// The statement failed; `sent` when it reached the server (a lost connection then
    /// leaves its outcome unknown; a refusal changed nothing).
    Failed { error: Error, sent: bool },
}

impl Outcome {
    /// The outcome of a request that never reached the server.
    pub fn unsent(error: &Error) -> Outcome {
        Outcome::Failed {
            error: Error::new(error.kind(), error.message()),
            sent: false,
        }
    }
}

/// Writes `group` on `conn`: one outcome per request, in order.
pub(super) fn run(
    conn: &mut Conn,
    sql: &Sql,
    connector: &Connector,
    group: &[Request],
) -> Vec<Outcome> {
    let plain: Vec<usize> = (0..group.len())
        .filter(|&i| group[i].posts.is_empty())
        .collect();
    let mut outcomes: Vec<Option<Outcome>> = group.iter().map(|_| None).collect();
    if plain.len() > 1 {
        let requests: Vec<&Request> = plain.iter().map(|&i| &group[i]).collect();
        match many(conn, sql, &requests) {
            Ok(written) => {
                for (&i, outcome) in plain.iter().zip(written) {
                    outcomes[i] = Some(outcome);
                }
            }
            Err(e) if e.as_db_error().is_none() => {
                // The connection failed: every request's outcome is unknown alike.
                for &i in &plain {
                    outcomes[i] = Some(failed(connector, &group[i], &e));
                }
            }
            // Refused: each request again on its own, below.
            Err(_) => {}
        }
    }
    for (i, request) in group.iter().enumerate() {
        if outcomes[i].is_none() {
            outcomes[i] = Some(one(conn, sql, connector, request));
        }
    }
    outcomes
        .into_iter()
        .map(|o| o.expect("every request ran"))
        .collect()
}

/// One request alone (with its posts, if any).
fn one(conn: &mut Conn, sql: &Sql, connector: &Connector, request: &Request) -> Outcome {
    if conn.client.is_closed() {
        return Outcome::Failed {
            error: connector.closed(request.doing()),
            sent: false,
        };
    }
    let (first, end) = (request.first(), request.end());
    let crcs: Vec<i32> = request.lines.iter().map(|l| crc(l)).collect();
    let params: [&(dyn ToSql + Sync); 9] = [
        &request.id,
        &request.epoch,
        &first,
        &end,
        &request.seqs,
        &request.types,
        &request.lines,
        &crcs,
        &request.posts,
    ];
    let result = if !request.posts.is_empty() {
        conn.client.execute(sql.append_posted.as_str(), &params)
    } else if request.rows() == 1 {
        let row: [&(dyn ToSql + Sync); 6] = [
            &request.id,
            &request.epoch,
            &first,
            &request.types[0],
            &request.lines[0],
            &crcs[0],
        ];
        conn.prepared(&sql.append_row)
            .and_then(|statement| conn.client.execute(&statement, &row))
    } else {
        conn.prepared(&sql.append)
            .and_then(|statement| conn.client.execute(&statement, &params[..8]))
    };
    match result {
        Ok(n) if n == request.seqs.len() as u64 => Outcome::Written,
        Ok(0) => Outcome::Refused,
        Ok(n) => Outcome::Failed {
            error: Error::new(
                ErrorKind::Corrupt,
                format!(
                    "{}: {n} rows were inserted instead of {}",
                    request.doing(),
                    request.seqs.len()
                ),
            ),
            sent: true,
        },
        Err(e) => failed(connector, request, &e),
    }
}

/// Several requests in one statement: `Written` for each whose fence held (with all its
/// rows), `Refused` for the others.
fn many(
    conn: &mut Conn,
    sql: &Sql,
    requests: &[&Request],
) -> Result<Vec<Outcome>, postgres::Error> {
    let ids: Vec<&str> = requests.iter().map(|r| r.id.as_str()).collect();
    let epochs: Vec<i64> = requests.iter().map(|r| r.epoch).collect();
    let firsts: Vec<i64> = requests.iter().map(|r| r.first()).collect();
    let ends: Vec<i64> = requests.iter().map(|r| r.end()).collect();
    let total: usize = requests.iter().map(|r| r.rows()).sum();
    let (mut ks, mut seqs, mut types, mut lines, mut crcs) = (
        Vec::with_capacity(total),
        Vec::with_capacity(total),
        Vec::with_capacity(total),
        Vec::with_capacity(total),
        Vec::with_capacity(total),
    );
    for (k, request) in requests.iter().enumerate() {
        for i in 0..request.rows() {
            ks.push(k as i64 + 1);
            seqs.push(request.seqs[i]);
            types.push(request.types[i].as_str());
            lines.push(request.lines[i].as_str());
            crcs.push(crc(&request.lines[i]));
        }
    }
    let statement = conn.prepared(&sql.append_group)?;
    let rows = conn.client.query(
        &statement,
        &[
            &ids, &epochs, &firsts, &ends, &ks, &seqs, &types, &lines, &crcs,
        ],
    )?;
    let mut outcomes: Vec<Outcome> = requests.iter().map(|_| Outcome::Refused).collect();
    for row in rows {
        let (k, inserted): (i64, i64) = (row.get(0), row.get(1));
        let index = (k - 1) as usize;
        let request = requests[index];
        outcomes[index] = if inserted == request.rows() as i64 {
            Outcome::Written
        } else {
            Outcome::Failed {
                error: Error::new(
                    ErrorKind::Corrupt,
                    format!(
                        "{}: {inserted} rows were inserted instead of {}",
                        request.doing(),
                        request.rows()
                    ),
                ),
                sent: true,
            }
        };
    }
    Ok(outcomes)
}

/// The outcome of a statement that failed for `request`.
fn failed(connector: &Connector, request: &Request, e: &postgres::Error) -> Outcome {
    let doing = request.doing();
    let error = if e.code() == Some(&SqlState::UNIQUE_VIOLATION) {
        Error::new(
            ErrorKind::Corrupt,
            format!(
                "{doing}: rows at those seqs are already stored (a foreign writer); nothing \
                 was written and the session is poisoned"
            ),
        )
        .with_seq(request.first() as u64)
    } else {
        connector.fail(&doing, e, Stmt::Write)
    };
    Outcome::Failed { error, sent: true }
}
