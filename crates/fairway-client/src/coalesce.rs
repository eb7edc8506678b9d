//! Coalescing of concurrent single submissions: [`Client::submit`] calls that overlap in time
//! share `POST /v1/jobs/batch` requests, while each caller still gets its own job's answer.
//!
//! A producer that awaits many `submit` calls at once (64 tasks, say) would otherwise pay one
//! HTTP request per job on both sides: a connection each, a parse, a wake-up of the server's
//! writer, a reply. The server commits concurrent requests together anyway (group commit), so
//! what one job costs is mostly that request. Here the calls join a queue, and at most
//! [`ClientBuilder::coalesce`](crate::ClientBuilder::coalesce) requests carry it: each takes
//! every job queued when it is sent (up to [`MAX_BATCH`] jobs and [`BATCH_BYTES`] of JSON). A
//! lone call (one in flight, or a sequential producer) finds nothing queued and a request free,
//! and is sent at once, alone, on `POST /v1/jobs`, from the caller's own task: coalescing adds
//! no wait and no hand-off, it only fills requests that would have queued behind each other.
//! Like the Nagle-free batching of Kafka's producer or ioredis's auto-pipelining, but every
//! answer still follows the server's durable commit.
//!
//! **Callers answered together come back together.** When a request's answer wakes its
//! callers, they submit again within microseconds of each other. A sender therefore lets the
//! tasks that are ready to run go first ([`tokio::task::yield_now`]) before it takes the
//! queue, keeping its place meanwhile: the callers it just answered queue behind it and share
//! its next request. Without the yield the queue was still empty when the sender looked, so it
//! gave its place back, and the first caller back took it for its one job alone: half the
//! requests carried one job (64 in flight, machine W of BENCHMARKS.md, item 66).
//!
//! **What a caller sees is what `submit` alone would have answered.** The batch reply holds
//! one result per job, as the server would have answered that job alone (`BatchResult`). When
//! the request itself fails, each caller gets that failure: copied when it is the server's
//! answer (`429 busy`, `503`...); for a transport failure (no answer: outcome unknown) and for
//! `413` (a server whose limits are below this client's batches) each job is sent again
//! alone, once, so that each caller gets a failure of its own, or its job's answer. Submissions are idempotent by id, so the second send cannot
//! create a second job; a job the first request did create is answered `duplicate: true`.
//!
//! Bounded: at most [`MAX_QUEUED`] jobs wait in the queue; more callers wait for room.

use crate::client::{Client, Submitted};
use crate::error::Error;
use crate::types::{BatchSubmitReply, MAX_BATCH};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

/// The most JSON, in bytes, one coalesced request carries (the server's default body limit is
/// 16 MiB; a request this size is parsed in well under a millisecond).
pub(crate) const BATCH_BYTES: usize = 1 << 20;
/// A job whose JSON is larger than this is sent alone, on `POST /v1/jobs`.
pub(crate) const ALONE_BYTES: usize = 64 << 10;
/// The most jobs queued for coalescing at once; further callers wait for room.
pub(crate) const MAX_QUEUED: usize = 4 * MAX_BATCH;
/// The default number of requests that carry coalesced submissions at once: one being
/// committed while the next fills. On loopback with 64 calls in flight (BENCHMARKS.md, item
/// 20) 2 did as well as 3 or 4 and better than 8 or 16, whose smaller batches cost more
/// requests for the same jobs.
pub const DEFAULT_COALESCE: usize = 2;

/// The queue of one client (shared by its clones).
pub(crate) struct Coalescer {
    /// Requests carrying the queue at once (at least 1).
    requests: usize,
    room: Arc<Semaphore>,
    state: Mutex<Queue>,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Waiting>,
    /// Requests under way (or about to be sent) that take from `waiting`.
    senders: usize,
}

/// One queued submission.
struct Waiting {
    /// The job's id, as its JSON has it.
    id: String,
    /// The job's JSON, id included.
    json: String,
    reply: oneshot::Sender<Result<Submitted, Error>>,
    /// Room in the queue, given back when the job's answer is sent.
    _room: OwnedSemaphorePermit,
}

impl Coalescer {
    pub(crate) fn new(requests: usize) -> Coalescer {
        Coalescer {
            requests: requests.max(1),
            room: Arc::new(Semaphore::new(MAX_QUEUED)),
            state: Mutex::new(Queue::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `json` (a job with its id, `id`) and waits for its answer. `client` sends the
    /// requests.
    pub(crate) async fn submit(
        self: &Arc<Self>,
        client: &Client,
        id: String,
        json: String,
    ) -> Result<Submitted, Error> {
        let room = self
            .room
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Error::Invalid("the submission queue is closed".to_string()))?;
        let alone = {
            let mut queue = self.lock();
            let alone = queue.waiting.is_empty() && queue.senders < self.requests;
            if alone {
                queue.senders += 1;
            }
            alone
        };
        if alone {
            // Sent from this task, holding a request's place so that calls made meanwhile
            // queue behind it. Cancelling this call cancels this job's request only, as it
            // would without coalescing.
            let _place = AloneSlot {
                coalescer: self,
                client,
            };
            let answer = client.submit_json(json).await;
            drop(room);
            return answer;
        }
        let (reply, answer) = oneshot::channel();
        let start_sender = {
            let mut queue = self.lock();
            queue.waiting.push_back(Waiting {
                id,
                json,
                reply,
                _room: room,
            });
            if queue.senders < self.requests {
                queue.senders += 1;
                true
            } else {
                false
            }
        };
        if start_sender {
            self.start_sender(client);
        }
        answer.await.unwrap_or_else(|_| {
            Err(Error::Protocol {
                status: 0,
                message: "the request carrying this submission ended without an answer for it \
                          (its outcome is unknown: submit the same id again)"
                    .to_string(),
            })
        })
    }

    /// Starts a sender, whose place among [`Coalescer::requests`] the caller took. A task of its
    /// own, so that a caller who stops waiting does not cancel the request that carries other
    /// callers' jobs.
    fn start_sender(self: &Arc<Self>, client: &Client) {
        let (this, client) = (self.clone(), client.clone());
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move { this.send_all(&client).await });
            }
            // No runtime left (it is shutting down): the queued calls end with it.
            Err(_) => this.lock().senders -= 1,
        }
    }

    /// Sends what is queued, request after request, until the queue is empty.
    async fn send_all(&self, client: &Client) {
        let mut slot = SenderSlot {
            coalescer: self,
            held: true,
        };
        loop {
            // The callers this sender's last answer woke (or the others woken with the caller
            // that started it) are ready to run and about to submit again: let them queue
            // first, so that they ride this request instead of the next.
            tokio::task::yield_now().await;
            let batch = {
                let mut queue = self.lock();
                let batch = take_batch(&mut queue.waiting);
                if batch.is_empty() {
                    // Under the same lock as the check: a caller queueing after this starts
                    // a sender of its own.
                    queue.senders -= 1;
                    slot.held = false;
                    return;
                }
                batch
            };
            if batch.len() == 1 {
                for job in batch {
                    let answer = client.submit_json(job.json).await;
                    let _ = job.reply.send(answer);
                }
                continue;
            }
            match client.submit_batch_json(batch_body(&batch)).await {
                Ok(reply) => answer_each(batch, reply),
                Err(error) => answer_failure(client, batch, error).await,
            }
        }
    }
}

/// The place among [`Coalescer::requests`] of a call sent alone from its own task. Given back
/// when the call ends (or is cancelled); jobs queued meanwhile then get a sender if none is
/// left to carry them.
struct AloneSlot<'a> {
    coalescer: &'a Arc<Coalescer>,
    client: &'a Client,
}

impl Drop for AloneSlot<'_> {
    fn drop(&mut self) {
        let start_sender = {
            let mut queue = self.coalescer.lock();
            queue.senders -= 1;
            let start = !queue.waiting.is_empty() && queue.senders < self.coalescer.requests;
            if start {
                queue.senders += 1;
            }
            start
        };
        if start_sender {
            self.coalescer.start_sender(self.client);
        }
    }
}

/// A sender's place among [`Coalescer::requests`], given back if its task ends early (a panic,
/// or the runtime shutting down) so that later callers still get a sender.
struct SenderSlot<'a> {
    coalescer: &'a Coalescer,
    held: bool,
}

impl Drop for SenderSlot<'_> {
    fn drop(&mut self) {
        if self.held {
            self.coalescer.lock().senders -= 1;
        }
    }
}

/// The request failed as a whole: every caller gets that failure, or an answer of its own
/// from sending its job again alone when the failure may not be its job's: no answer at all
/// (a transport failure), or `413` (a server whose body or batch limits are below this
/// client's batches would take each job alone).
async fn answer_failure(client: &Client, batch: Vec<Waiting>, error: Error) {
    let too_large = matches!(error, Error::Http { status: 413, .. });
    let copies: Option<Vec<Error>> = batch.iter().map(|_| error.copy_answer()).collect();
    if let Some(copies) = copies.filter(|_| !too_large) {
        for (job, copy) in batch.into_iter().zip(copies) {
            let _ = job.reply.send(Err(copy));
        }
        return;
    }
    tracing::debug!(jobs = batch.len(), error = %error, "a coalesced request failed as a whole; sending each job again alone");
    let mut resent = tokio::task::JoinSet::new();
    for job in batch {
        let client = client.clone();
        resent.spawn(async move {
            let answer = client.submit_json(job.json).await;
            let _ = job.reply.send(answer);
        });
    }
    while resent.join_next().await.is_some() {}
}

/// The jobs at the front of `waiting` that fit one request.
fn take_batch(waiting: &mut VecDeque<Waiting>) -> Vec<Waiting> {
    let mut batch = Vec::new();
    let mut bytes = 0;
    while let Some(next) = waiting.front() {
        let fits =
            batch.is_empty() || (batch.len() < MAX_BATCH && bytes + next.json.len() < BATCH_BYTES);
        if !fits {
            break;
        }
        bytes += next.json.len() + 1;
        batch.extend(waiting.pop_front());
    }
    batch
}

/// `{"jobs":[...]}` from the jobs' own JSON, not serialized again.
fn batch_body(batch: &[Waiting]) -> Vec<u8> {
    let len: usize = batch.iter().map(|w| w.json.len() + 1).sum();
    let written = crate::client::batch_envelope(batch.len(), len + 10, |i, body| {
        body.extend_from_slice(batch[i].json.as_bytes());
        Ok::<(), std::convert::Infallible>(())
    });
    let Ok(body) = written;
    body
}

/// Hands each caller its job's result.
fn answer_each(mut batch: Vec<Waiting>, reply: BatchSubmitReply) {
    match reply.into_results(batch.len(), |i| std::mem::take(&mut batch[i].id)) {
        Ok(results) => {
            for (job, result) in batch.into_iter().zip(results) {
                let _ = job.reply.send(result);
            }
        }
        Err(message) => {
            for job in batch {
                let _ = job.reply.send(Err(Error::Protocol {
                    status: 200,
                    message: message.clone(),
                }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn waiting(json: &str) -> (Waiting, oneshot::Receiver<Result<Submitted, Error>>) {
        let (reply, rx) = oneshot::channel();
        let room = Arc::new(Semaphore::new(1)).try_acquire_owned().unwrap();
        // The id as the job's JSON has it (some tests queue text that is not JSON: no id).
        let id = serde_json::from_str::<serde_json::Value>(json)
            .ok()
            .and_then(|v| v["id"].as_str().map(str::to_string))
            .unwrap_or_default();
        (
            Waiting {
                id,
                json: json.to_string(),
                reply,
                _room: room,
            },
            rx,
        )
    }

    #[test]
    fn a_batch_takes_the_front_of_the_queue_up_to_the_job_and_byte_limits() {
        let mut queue: VecDeque<Waiting> = (0..MAX_BATCH + 5)
            .map(|i| waiting(&format!("{{\"i\":{i}}}")).0)
            .collect();
        let first = take_batch(&mut queue);
        assert_eq!(first.len(), MAX_BATCH);
        assert_eq!(first[0].json, "{\"i\":0}");
        assert_eq!(take_batch(&mut queue).len(), 5);
        assert!(take_batch(&mut queue).is_empty());

        let big = "x".repeat(BATCH_BYTES / 2);
        let mut queue: VecDeque<Waiting> = (0..3).map(|_| waiting(&big).0).collect();
        assert_eq!(
            take_batch(&mut queue).len(),
            1,
            "two halves and a comma exceed the limit"
        );
        assert_eq!(queue.len(), 2);
        // A job over the limit on its own still goes, alone.
        let mut queue: VecDeque<Waiting> = [waiting(&"y".repeat(BATCH_BYTES + 1)).0]
            .into_iter()
            .collect();
        assert_eq!(take_batch(&mut queue).len(), 1);
    }

    /// A failure the server answered for the whole request (here `503 unavailable`) reaches
    /// every caller the request carried, as the same error; nothing is sent again.
    #[tokio::test]
    async fn an_answered_failure_of_the_request_reaches_every_caller() {
        let client = Client::new("http://127.0.0.1:1").unwrap();
        let (a, mut ra) = waiting("{}");
        let (b, mut rb) = waiting("{}");
        let error = Error::Http {
            status: 503,
            code: "unavailable".into(),
            message: "the store could not make the request durable".into(),
        };
        answer_failure(&client, vec![a, b], error).await;
        for rx in [&mut ra, &mut rb] {
            assert!(matches!(
                rx.try_recv().unwrap(),
                Err(Error::Http { status: 503, ref code, .. }) if code == "unavailable"
            ));
        }
    }

    /// Each request [`accepting_server`] answered: its path and how many jobs it carried.
    type Seen = Arc<Mutex<Vec<(String, usize)>>>;

    /// A loopback HTTP server that answers every submission `accepted` (one at a time per
    /// connection), the first request only after `first_delay`; it records each request's
    /// path and job count.
    async fn accepting_server(first_delay: Duration) -> (String, Seen) {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                let log = log.clone();
                tokio::spawn(async move {
                    let mut conn = BufReader::new(conn);
                    loop {
                        let (mut path, mut length) = (String::new(), 0);
                        let mut line = String::new();
                        if conn.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        path.push_str(line.split(' ').nth(1).unwrap_or_default());
                        loop {
                            line.clear();
                            conn.read_line(&mut line).await.unwrap();
                            if line == "\r\n" {
                                break;
                            }
                            if let Some(v) =
                                line.to_ascii_lowercase().strip_prefix("content-length:")
                            {
                                length = v.trim().parse().unwrap();
                            }
                        }
                        let mut body = vec![0; length];
                        conn.read_exact(&mut body).await.unwrap();
                        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
                        let accepted = |job: &serde_json::Value| serde_json::json!({"outcome": "accepted", "job_id": job["id"], "duplicate": false});
                        let (status, reply, jobs) = match body["jobs"].as_array() {
                            Some(jobs) => {
                                let results: Vec<_> = jobs
                                    .iter()
                                    .map(|j| {
                                        let mut r = accepted(j);
                                        r["status"] = 201.into();
                                        r
                                    })
                                    .collect();
                                (200, serde_json::json!({"results": results}), jobs.len())
                            }
                            None => (201, accepted(&body), 1),
                        };
                        let first = {
                            let mut log = log.lock().unwrap();
                            log.push((path, jobs));
                            log.len() == 1
                        };
                        if first {
                            tokio::time::sleep(first_delay).await;
                        }
                        let reply = reply.to_string();
                        let head = format!(
                            "HTTP/1.1 {status} OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                            reply.len()
                        );
                        conn.get_mut().write_all(head.as_bytes()).await.unwrap();
                        conn.get_mut().write_all(reply.as_bytes()).await.unwrap();
                    }
                });
            }
        });
        (url, seen)
    }

    /// A client of [`accepting_server`] with one request at a time, and a lone call ("lone")
    /// that holds it for 300 ms: once this returns, the server has it, and calls made now
    /// queue behind it.
    async fn one_request_held_by_a_lone_call() -> (
        Client,
        Seen,
        tokio::task::JoinHandle<Result<Submitted, Error>>,
    ) {
        let (url, seen) = accepting_server(Duration::from_millis(300)).await;
        let client = Client::builder(url).coalesce(1).build().unwrap();
        let lone = tokio::spawn({
            let client = client.clone();
            async move { client.submit(crate::JobSpec::new("t").id("lone")).await }
        });
        while seen.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        (client, seen, lone)
    }

    /// Awaits `all`, the test's calls; a call never answered fails the test after 10 s.
    async fn every_call_answered(all: impl std::future::Future<Output = ()>) {
        tokio::time::timeout(Duration::from_secs(10), all)
            .await
            .expect("every call answered");
    }

    /// A call with nothing queued and a request free goes at once, alone, from its own task;
    /// calls made while it is under way (here with one request at a time) queue, and are
    /// carried together once it ends. Without a sender started when the lone call's place is
    /// given back they would wait for ever (the timeout fails the test).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_queued_behind_a_lone_call_are_carried_when_it_ends() {
        let (client, seen, lone) = one_request_held_by_a_lone_call().await;
        let queued: Vec<_> = (0..5)
            .map(|i| {
                let client = client.clone();
                tokio::spawn(async move {
                    client
                        .submit(crate::JobSpec::new("t").id(format!("q{i}")))
                        .await
                })
            })
            .collect();
        let all = async {
            assert_eq!(lone.await.unwrap().unwrap().job_id(), "lone");
            for (i, call) in queued.into_iter().enumerate() {
                assert_eq!(call.await.unwrap().unwrap().job_id(), format!("q{i}"));
            }
        };
        every_call_answered(all).await;
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![
                ("/v1/jobs".to_string(), 1),
                ("/v1/jobs/batch?omit=accepted".to_string(), 5)
            ],
            "the lone call alone, then the five queued behind it in one request"
        );
    }

    /// Callers answered by one request submit again at once, and their next jobs share one
    /// request too: the sender lets them queue before it looks at the queue. Without that it
    /// found the queue empty, gave its place back, and the first caller back went alone (one
    /// job), the rest queueing behind it: requests of 1, 8, 1 and 7 jobs instead of 1, 8, 8.
    /// One thread, so that the order in which ready tasks run is the runtime's, not a race.
    #[tokio::test(flavor = "current_thread")]
    async fn callers_answered_together_share_their_next_request() {
        let (client, seen, lone) = one_request_held_by_a_lone_call().await;
        let producers: Vec<_> = (0..8)
            .map(|i| {
                let client = client.clone();
                tokio::spawn(async move {
                    for round in 0..2 {
                        let id = format!("p{i}-{round}");
                        let answer = client.submit(crate::JobSpec::new("t").id(id.clone()));
                        assert_eq!(answer.await.unwrap().job_id(), id);
                    }
                })
            })
            .collect();
        let all = async {
            lone.await.unwrap().unwrap();
            for producer in producers {
                producer.await.unwrap();
            }
        };
        every_call_answered(all).await;
        let sizes: Vec<usize> = seen.lock().unwrap().iter().map(|(_, n)| *n).collect();
        assert_eq!(
            sizes,
            vec![1, 8, 8],
            "the lone call, then each round in one request"
        );
    }

    #[test]
    fn the_batch_body_is_the_jobs_json_in_order() {
        let batch = vec![waiting("{\"id\":\"a\"}").0, waiting("{\"id\":\"b\"}").0];
        let body: serde_json::Value = serde_json::from_slice(&batch_body(&batch)).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"jobs": [{"id": "a"}, {"id": "b"}]})
        );
    }

    #[test]
    fn each_caller_gets_its_own_result_and_a_short_reply_fails_them_all() {
        let (a, mut ra) = waiting("{}");
        let (b, mut rb) = waiting("{}");
        let reply: BatchSubmitReply = serde_json::from_value(serde_json::json!({"results": [
            {"status": 201, "outcome": "accepted", "job_id": "a", "duplicate": false},
            {"status": 422, "outcome": "rejected_final", "reason": "unknown_class", "message": "no"}
        ]}))
        .unwrap();
        answer_each(vec![a, b], reply);
        assert_eq!(ra.try_recv().unwrap().unwrap().job_id(), "a");
        assert!(matches!(
            rb.try_recv().unwrap(),
            Err(Error::Rejected { retryable: false, ref reason, .. }) if reason == "unknown_class"
        ));

        let (a, mut ra) = waiting("{}");
        let (b, mut rb) = waiting("{}");
        answer_each(
            vec![a, b],
            BatchSubmitReply {
                results: vec![],
                omitted: None,
            },
        );
        assert!(matches!(
            ra.try_recv().unwrap(),
            Err(Error::Protocol { .. })
        ));
        assert!(matches!(
            rb.try_recv().unwrap(),
            Err(Error::Protocol { .. })
        ));
    }

    // Proves: with the accepted results left out (`omit=accepted`), each caller of a left-out
    // result gets its own id back as accepted and new, the listed ones get theirs by index, and
    // a reply that does not account for every job exactly once fails them all.
    #[test]
    fn left_out_results_are_the_callers_own_ids_accepted() {
        let three = || {
            ["a", "b", "c"]
                .map(|id| waiting(&format!("{{\"id\":\"{id}\"}}")))
                .into_iter()
                .unzip::<_, _, Vec<_>, Vec<_>>()
        };
        let (batch, mut rx) = three();
        let reply: BatchSubmitReply = serde_json::from_value(serde_json::json!({
            "omitted": 2,
            "results": [
                {"index": 1, "status": 200, "outcome": "accepted", "job_id": "b", "duplicate": true}
            ]
        }))
        .unwrap();
        answer_each(batch, reply);
        let got: Vec<(String, bool)> = rx
            .iter_mut()
            .map(|r| {
                let s = r.try_recv().unwrap().unwrap();
                (s.job_id().to_string(), s.duplicate())
            })
            .collect();
        assert_eq!(
            got,
            [("a".into(), false), ("b".into(), true), ("c".into(), false)]
        );

        for bad in [
            serde_json::json!({"omitted": 3, "results": [{"index": 1, "status": 201, "outcome": "accepted", "job_id": "b"}]}),
            serde_json::json!({"omitted": 1, "results": [
                {"index": 2, "status": 201, "outcome": "accepted", "job_id": "c"},
                {"index": 0, "status": 201, "outcome": "accepted", "job_id": "a"}]}),
            serde_json::json!({"omitted": 1, "results": [
                {"index": 1, "status": 201, "outcome": "accepted", "job_id": "b"},
                {"index": 1, "status": 201, "outcome": "accepted", "job_id": "b"}]}),
            serde_json::json!({"omitted": 2, "results": [{"index": 3, "status": 201, "outcome": "accepted", "job_id": "d"}]}),
            serde_json::json!({"omitted": 2, "results": [{"status": 201, "outcome": "accepted", "job_id": "b"}]}),
        ] {
            let (batch, mut rx) = three();
            answer_each(batch, serde_json::from_value(bad.clone()).unwrap());
            for r in &mut rx {
                assert!(
                    matches!(r.try_recv().unwrap(), Err(Error::Protocol { .. })),
                    "{bad}"
                );
            }
        }
    }
}
