//! The writer thread and its queue: turns are queued with their share of [`QUEUE_BYTES`] and
//! written by a thread that owns the journal, every turn at hand in one batch (`batch.rs`).

use super::batch::{write_batch, BATCH_BYTES, BATCH_TURNS};
use super::cache::Recent;
use super::retain::{held, Held, Keep, Retained};
use super::Turn;
use salvage_journal::Journal;
use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{mpsc, Arc};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Where and how the writer writes.
#[derive(Debug, Clone, Default)]
pub struct WriterOptions {
    /// Captures go here (none when `None`).
    pub captures: Option<PathBuf>,
    /// `CHATCLI_*` settings in force, recorded in sessions and captures.
    pub settings: BTreeMap<String, String>,
    /// Keep only the sessions written last, within these bounds (an in-memory journal that
    /// serves captures only, `retain.rs`); none: every session is kept (a journal on disk).
    pub keep: Option<Keep>,
}

/// The bytes of turns the writer's queue holds at most (request bodies and rebuilt answers).
pub const QUEUE_BYTES: usize = 64 << 20;

enum Job {
    /// A turn and its share of the queue, given back once it is written.
    Turn(Box<Turn>, Option<OwnedSemaphorePermit>),
    Flush(mpsc::Sender<()>),
    /// What the journal holds, once the turns queued before are written.
    Held(mpsc::Sender<Result<Held, String>>),
}

/// The handle to the writer thread.
#[derive(Clone)]
pub struct Writer {
    tx: mpsc::Sender<Job>,
    room: Arc<Semaphore>,
    capacity: u32,
}

/// Room in the writer's queue, being waited for.
pub type Reserve = Pin<Box<dyn Future<Output = Option<OwnedSemaphorePermit>> + Send>>;

/// What the writer did, for the proxy's log lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// A turn was journaled.
    Turn {
        /// The session.
        session: String,
        /// The capture written, if any.
        capture: Option<PathBuf>,
    },
    /// Writing failed.
    Failed(String),
}

impl Writer {
    /// Starts the writer thread with a queue of [`QUEUE_BYTES`]; `report` receives one line per
    /// turn written (or failed).
    pub fn start(
        journal: Journal,
        options: WriterOptions,
        report: Box<dyn Fn(Written) + Send>,
    ) -> Result<Writer, std::io::Error> {
        Writer::with_queue(journal, options, report, QUEUE_BYTES)
    }

    /// Starts the writer thread with a queue holding turns of at most `queue_bytes` in all (a
    /// turn larger than that is queued alone).
    pub fn with_queue(
        mut journal: Journal,
        options: WriterOptions,
        report: Box<dyn Fn(Written) + Send>,
        queue_bytes: usize,
    ) -> Result<Writer, std::io::Error> {
        let capacity = u32::try_from(queue_bytes.clamp(1, Semaphore::MAX_PERMITS)).unwrap_or(u32::MAX);
        let (tx, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new().name("salvage-proxy-journal".into()).spawn(move || {
            let mut recent = Recent::default();
            let mut retained = options.keep.map(Retained::new);
            while let Ok(job) = rx.recv() {
                // Every turn already queued goes in one batch; a flush waits for those before it.
                let (mut turns, mut rooms, mut flush, mut count) = (Vec::new(), Vec::new(), None, None);
                let (mut next, mut weight) = (Some(job), 0usize);
                while let Some(job) = next.take() {
                    match job {
                        Job::Turn(t, room) => {
                            weight = weight.saturating_add(t.weight());
                            turns.push(*t);
                            rooms.push(room);
                        }
                        Job::Flush(done) => {
                            flush = Some(done);
                            break;
                        }
                        Job::Held(answer) => {
                            count = Some(answer);
                            break;
                        }
                    }
                    if turns.len() < BATCH_TURNS && weight < BATCH_BYTES {
                        next = rx.try_recv().ok();
                    }
                }
                for r in write_batch(&mut journal, &options, &mut recent, turns) {
                    match r {
                        Ok((session, capture)) => {
                            if let Some(r) = &mut retained {
                                r.touch(&session);
                            }
                            report(Written::Turn { session, capture })
                        }
                        Err(e) => report(Written::Failed(e.to_string())),
                    }
                }
                if let Some(Err(e)) = retained.as_mut().map(|r| r.trim(&mut journal)) {
                    report(Written::Failed(e.to_string()));
                }
                drop(rooms);
                if let Some(done) = flush {
                    let _ = done.send(());
                }
                if let Some(answer) = count {
                    let _ = answer.send(held(&journal).map_err(|e| e.to_string()));
                }
            }
        })?;
        Ok(Writer { tx, room: Arc::new(Semaphore::new(capacity as usize)), capacity })
    }

    fn share(&self, weight: usize) -> u32 {
        u32::try_from(weight).unwrap_or(u32::MAX).clamp(1, self.capacity)
    }

    /// Waits for room for a turn of `weight` bytes in the queue.
    pub fn reserve(&self, weight: usize) -> Reserve {
        let n = self.share(weight);
        let room = self.room.clone();
        Box::pin(async move { room.acquire_many_owned(n).await.ok() })
    }

    /// Waits while the queue is full (a new turn starts only when there is room for more).
    pub async fn not_full(&self) {
        drop(self.room.acquire().await);
    }

    /// Room for a turn of `weight` bytes, if there is some now.
    pub fn try_reserve(&self, weight: usize) -> Option<OwnedSemaphorePermit> {
        self.room.clone().try_acquire_many_owned(self.share(weight)).ok()
    }

    /// Queues a turn in the room reserved for it.
    pub fn send_reserved(&self, turn: Turn, room: Option<OwnedSemaphorePermit>) {
        let _ = self.tx.send(Job::Turn(Box::new(turn), room));
    }

    /// Queues a turn once there is room for it.
    pub async fn send(&self, turn: Turn) {
        let room = self.reserve(turn.weight()).await;
        self.send_reserved(turn, room);
    }

    /// The bytes of the turns queued and not yet written (at most the queue's size).
    pub fn queued_bytes(&self) -> usize {
        (self.capacity as usize).saturating_sub(self.room.available_permits())
    }

    /// What the journal holds once every turn queued before this call is written (for tests and
    /// diagnostics: it waits like [`Writer::flush`]).
    pub fn held(&self) -> Result<Held, String> {
        let (answer, wait) = mpsc::channel();
        self.tx.send(Job::Held(answer)).map_err(|_| "the journal writer has stopped".to_string())?;
        wait.recv().map_err(|_| "the journal writer has stopped".to_string())?
    }

    /// Waits until every turn queued before this call is written.
    pub fn flush(&self) {
        let (done, wait) = mpsc::channel();
        if self.tx.send(Job::Flush(done)).is_ok() {
            let _ = wait.recv();
        }
    }
}
