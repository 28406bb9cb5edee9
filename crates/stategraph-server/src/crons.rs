//! Crons: runs created on a schedule, as LangGraph's server creates them — on a thread (a
//! thread cron), or each on a new thread (a stateless cron, whose thread is deleted after its
//! run unless `on_run_completed` is `"keep"`).
//!
//! A cron is a record of the server's store ([`CronRecord`]), so it lives in the database the
//! server runs on and every process sharing that database sees it. Each process that
//! [started](crate::Server::start) runs a scheduler; a due tick is claimed in the run queue
//! ([`RunQueue::claim_once`](stategraph_runs::RunQueue::claim_once), keyed by the
//! cron and the tick), so however many processes see it due, one creates its run. After a
//! tick, the next one is the schedule's next time after it; when the server was down past
//! several ticks, they are not made up one by one: the first due tick fires once and the
//! schedule goes on from the present, as the reference's scheduler does.
//!
//! Schedules are standard cron expressions (five fields: minute, hour, day of month, month,
//! day of week, with names, ranges, steps and `@daily`-style nicknames), or six fields whose
//! last is the second, as Python's `croniter` reads them; they are evaluated in the cron's
//! `timezone` (an IANA name; UTC by default), daylight-saving changes included.

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, Timelike, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map as JsonMap, Value as Json};
use stategraph_checkpoint::{iso_from_unix_micros, now_iso};
use tokio::sync::Notify;

use crate::app::AppState;
use crate::error::ApiError;
use crate::records::{Kind, Object, Record, filter};
use crate::request::{RunBody, merge_objects};

/// How often, by default, a process's cron scheduler looks for due crons
/// ([`ServerBuilder::cron_poll`](crate::ServerBuilder::cron_poll)).
pub const DEFAULT_CRON_POLL: Duration = Duration::from_secs(1);

/// How late a tick may be found before the ticks after it are given up as missed (the server
/// was down): then the schedule goes on from the present.
const CATCH_UP_GRACE: Duration = Duration::from_secs(5);

/// A parsed schedule in its time zone.
#[derive(Debug, Clone)]
pub(crate) struct Schedule {
    cron: croner::Cron,
    tz: Option<chrono_tz::Tz>,
}

impl Schedule {
    /// Parses `schedule` (five fields, or six with the second last) for time zone
    /// `timezone` (UTC when `None`): 422 naming what does not fit, as LangGraph's server words it.
    pub(crate) fn parse(schedule: &str, timezone: Option<&str>) -> Result<Self, ApiError> {
        let tz = time_zone(timezone)?;
        let fields: Vec<&str> = schedule.split_whitespace().collect();
        // croniter's six fields end with the second; the parser's begin with it.
        let ordered = match fields.as_slice() {
            [minute, hour, dom, month, dow, second] => {
                format!("{second} {minute} {hour} {dom} {month} {dow}")
            }
            [_, _, _, _, _] | [_] => fields.join(" "),
            _ => {
                return Err(invalid_schedule(
                    schedule,
                    "it needs 5 fields (or 6 with seconds)",
                ));
            }
        };
        let cron = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Optional)
            .year(croner::parser::Year::Disallowed)
            .build()
            .parse(&ordered)
            .map_err(|e| invalid_schedule(schedule, &e.to_string()))?;
        Ok(Self { cron, tz })
    }

    /// The first time of the schedule strictly after `t`; `None` when there is none (a
    /// schedule of a day that never comes).
    pub(crate) fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // Whole seconds: the schedule's times are (the parser keeps a fraction it is given).
        let t = t.with_nanosecond(0)?;
        match self.tz {
            Some(tz) => self
                .cron
                .find_next_occurrence(&t.with_timezone(&tz), false)
                .ok()
                .map(|d| d.with_timezone(&Utc)),
            None => self.cron.find_next_occurrence(&t, false).ok(),
        }
    }
}

/// LangGraph's words for a schedule it cannot read (what the parser said is logged).
fn invalid_schedule(schedule: &str, why: &str) -> ApiError {
    tracing::debug!(schedule, why, "a cron schedule was refused");
    ApiError::invalid(format!(
        "Invalid cron schedule: '{schedule}'. Reason: Invalid cron schedule. Ensure the \
         schedule uses the standard cron format (minute hour day_of_month month \
         day_of_week). Example: '*/5 * * * *' for every 5 minutes."
    ))
}

/// An IANA time zone name, 422 as LangGraph's server answers one it does not know.
pub(crate) fn time_zone(name: Option<&str>) -> Result<Option<chrono_tz::Tz>, ApiError> {
    name.map(|n| {
        chrono_tz::Tz::from_str(n).map_err(|_| {
            ApiError::invalid(format!(
                "Invalid timezone: '{n}'. Use IANA timezone format (e.g. 'America/New_York')."
            ))
        })
    })
    .transpose()
}

/// A time as the records write them (Python's `isoformat()` of a UTC datetime).
pub(crate) fn iso(t: DateTime<Utc>) -> String {
    iso_from_unix_micros(t.timestamp_micros())
}

/// A time as given in a request or stored: RFC 3339, or without an offset (read as UTC).
pub(crate) fn parse_time(field: &str, s: &str) -> Result<DateTime<Utc>, ApiError> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    chrono::NaiveDateTime::from_str(s)
        .map(|t| t.and_utc())
        .map_err(|_| {
            ApiError::invalid(format!(
                "invalid body: `{field}`: '{s}' is not a date and time (ISO 8601, e.g. \
                 2026-12-31T23:59:59+00:00)"
            ))
        })
}

/// A cron, as `GET /runs/crons/{cron_id}` answers it.
#[derive(Clone, Debug, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = Cron)]
pub(crate) struct CronRecord {
    pub(crate) cron_id: String,
    pub(crate) assistant_id: String,
    #[serde(default)]
    pub(crate) thread_id: Option<String>,
    #[serde(default)]
    pub(crate) user_id: Option<String>,
    #[serde(default)]
    pub(crate) end_time: Option<String>,
    pub(crate) schedule: String,
    #[serde(default)]
    pub(crate) timezone: Option<String>,
    /// The run request each tick makes: the body the cron was created with (and its
    /// patches merged in), `config.configurable.cron_id` added.
    #[serde(default)]
    pub(crate) payload: Object,
    #[serde(default)]
    pub(crate) next_run_date: Option<String>,
    #[serde(default)]
    pub(crate) metadata: Object,
    /// What becomes of a stateless cron's thread after its run: `delete` or `keep` (`null`
    /// for a thread cron).
    #[serde(default)]
    pub(crate) on_run_completed: Option<OnRunCompleted>,
    #[serde(default = "enabled")]
    pub(crate) enabled: bool,
    pub(crate) created_at: String,
    pub(crate) updated_at: String,
}

fn enabled() -> bool {
    true
}

impl Record for CronRecord {
    const KIND: Kind = Kind::Cron;
    fn key(&self) -> String {
        self.cron_id.clone()
    }
}

/// What becomes of a stateless cron's thread after each run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum OnRunCompleted {
    /// Deleted with its run (the default).
    #[default]
    Delete,
    /// Kept, as any thread.
    Keep,
}

/// What a cron is created from (besides the run request it makes, read as [`RunBody`]).
pub(crate) struct NewCron {
    pub(crate) assistant_id: String,
    pub(crate) thread_id: Option<String>,
    pub(crate) schedule: String,
    pub(crate) timezone: Option<String>,
    pub(crate) end_time: Option<String>,
    pub(crate) enabled: bool,
    pub(crate) on_run_completed: Option<OnRunCompleted>,
    pub(crate) metadata: Object,
    pub(crate) payload: Object,
}

impl CronRecord {
    /// A new cron, its first run the schedule's first time after now.
    pub(crate) fn new(new: NewCron, schedule: &Schedule) -> Self {
        let cron_id = stategraph_checkpoint::uuid6(None);
        let mut payload = new.payload;
        payload.insert(
            "assistant_id".into(),
            Json::String(new.assistant_id.clone()),
        );
        set_cron_id(&mut payload, &cron_id);
        let now = now_iso();
        Self {
            assistant_id: new.assistant_id,
            on_run_completed: match new.thread_id {
                Some(_) => None,
                None => Some(new.on_run_completed.unwrap_or_default()),
            },
            thread_id: new.thread_id,
            user_id: None,
            end_time: new.end_time,
            next_run_date: schedule.next_after(Utc::now()).map(iso),
            schedule: new.schedule,
            timezone: new.timezone,
            payload,
            metadata: new.metadata,
            enabled: new.enabled,
            created_at: now.clone(),
            updated_at: now,
            cron_id,
        }
    }

    /// Applies a `PATCH`: the fields given replace the cron's (`metadata` is merged, the
    /// run request's fields merged into its payload); a new schedule or time zone restarts
    /// the schedule from now.
    pub(crate) fn update(&mut self, patch: CronPatch, schedule: Option<&Schedule>) {
        if let Some(tz) = patch.timezone {
            self.timezone = Some(tz);
        }
        if let Some(s) = patch.schedule {
            self.schedule = s;
        }
        if let Some(schedule) = schedule {
            self.next_run_date = schedule.next_after(Utc::now()).map(iso);
        }
        match patch.end_time {
            Some(Json::Null) => self.end_time = None,
            Some(Json::String(t)) => self.end_time = Some(t),
            _ => {}
        }
        if let Some(on) = patch.enabled {
            self.enabled = on;
        }
        if let Some(on) = patch.on_run_completed {
            self.on_run_completed = Some(on);
        }
        if let Some(m) = patch.metadata {
            self.metadata.extend(m);
        }
        if !patch.payload.is_empty() {
            let assistant = self.payload.get("assistant_id").cloned();
            self.payload.extend(patch.payload);
            if let Some(a) = assistant {
                self.payload.insert("assistant_id".into(), a);
            }
            set_cron_id(&mut self.payload, &self.cron_id);
        }
        self.updated_at = now_iso();
    }

    /// Its next tick, if it is due at `now`: enabled, not past its end, its next run date
    /// reached.
    fn due(&self, now: DateTime<Utc>) -> Result<Option<DateTime<Utc>>, ApiError> {
        if !self.enabled {
            return Ok(None);
        }
        if let Some(end) = &self.end_time
            && parse_time("end_time", end)? < now
        {
            return Ok(None);
        }
        match &self.next_run_date {
            Some(next) => Ok(Some(parse_time("next_run_date", next)?).filter(|t| *t <= now)),
            None => Ok(None),
        }
    }

    /// The run request of one tick: the payload, with the cron's metadata under the
    /// payload's, and a stateless cron's thread kept if it says so.
    fn run_body(&self) -> Result<RunBody, ApiError> {
        let mut payload = self.payload.clone();
        let cron_metadata = Json::Object(self.metadata.clone());
        let metadata = merge_objects([Some(&cron_metadata), payload.get("metadata")]);
        payload.insert("metadata".into(), Json::Object(metadata));
        if self.thread_id.is_none() && self.on_run_completed == Some(OnRunCompleted::Keep) {
            payload
                .entry("on_completion")
                .or_insert_with(|| Json::String("keep".into()));
        }
        // A run cannot have both `context` and `configurable`: with a context, the cron's id
        // is not added to the configurable (as the reference drops it).
        if payload
            .get("context")
            .and_then(Json::as_object)
            .is_some_and(|c| !c.is_empty())
            && let Some(Json::Object(config)) = payload.get_mut("config")
            && let Some(Json::Object(c)) = config.get_mut("configurable")
        {
            c.remove("cron_id");
        }
        serde_json::from_value(Json::Object(payload))
            .map_err(|e| ApiError::invalid(format!("cron {}: its run request: {e}", self.cron_id)))
    }
}

/// `config.configurable.cron_id` of a payload.
fn set_cron_id(payload: &mut Object, cron_id: &str) {
    let config = payload
        .entry("config")
        .or_insert_with(|| Json::Object(JsonMap::new()));
    if !config.is_object() {
        *config = Json::Object(JsonMap::new());
    }
    if let Json::Object(config) = config {
        let configurable = config
            .entry("configurable")
            .or_insert_with(|| Json::Object(JsonMap::new()));
        if !configurable.is_object() {
            *configurable = Json::Object(JsonMap::new());
        }
        if let Json::Object(c) = configurable {
            c.insert("cron_id".into(), Json::String(cron_id.to_owned()));
        }
    }
}

/// A `PATCH /runs/crons/{cron_id}` body: the cron's own fields, and the run request's
/// fields to merge into its payload.
#[derive(Default)]
pub(crate) struct CronPatch {
    pub(crate) schedule: Option<String>,
    pub(crate) timezone: Option<String>,
    /// `Some(Null)` clears the end time.
    pub(crate) end_time: Option<Json>,
    pub(crate) enabled: Option<bool>,
    pub(crate) on_run_completed: Option<OnRunCompleted>,
    pub(crate) metadata: Option<Object>,
    pub(crate) payload: Object,
}

/// A process's cron scheduler: how often it looks, and the wake-up of a cron created or
/// changed here.
#[derive(Debug)]
pub(crate) struct Scheduler {
    poll: Duration,
    wake: Notify,
    started: AtomicBool,
}

impl Scheduler {
    pub(crate) fn new(poll: Duration) -> Self {
        Self {
            poll,
            wake: Notify::new(),
            started: AtomicBool::new(false),
        }
    }

    /// Makes the scheduler look at the crons now.
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }
}

/// Starts this process's cron scheduler (once).
pub(crate) fn spawn_scheduler(state: &Arc<AppState>) {
    if state.crons.started.swap(true, Ordering::SeqCst) {
        return;
    }
    tokio::spawn(scheduler_loop(Arc::clone(state)));
}

async fn scheduler_loop(state: Arc<AppState>) {
    let poll = state.crons.poll;
    loop {
        let wait = match fire_due(&state).await {
            Ok(Some(soonest)) => soonest.min(poll),
            Ok(None) => poll,
            Err(e) => {
                tracing::warn!(
                    error = e.detail,
                    "the cron scheduler could not read the crons"
                );
                poll
            }
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = state.crons.wake.notified() => {}
        }
    }
}

/// Fires the crons due now, each tick once across every process, and moves each to its next
/// tick; how long until the soonest next tick.
async fn fire_due(state: &Arc<AppState>) -> Result<Option<Duration>, ApiError> {
    let crons = state
        .records
        .search::<CronRecord>(filter("enabled", true))
        .await?;
    let now = Utc::now();
    let mut soonest: Option<DateTime<Utc>> = None;
    for cron in crons {
        let tick = match cron.due(now) {
            Ok(Some(tick)) => tick,
            Ok(None) => {
                let next = cron.next_run_date.as_deref().map(|t| parse_time("", t));
                if let Some(Ok(next)) = next
                    && next > now
                {
                    soonest = Some(soonest.map_or(next, |s| s.min(next)));
                }
                continue;
            }
            Err(e) => {
                tracing::warn!(
                    cron_id = cron.cron_id,
                    error = e.detail,
                    "a cron is damaged"
                );
                continue;
            }
        };
        let queue = &state.runs.queue;
        let key = format!("cron:{}:{}", cron.cron_id, tick.timestamp_micros());
        match queue.claim_once(&key).await {
            Ok(true) => match fire(state, &cron).await {
                Ok(run_id) => tracing::info!(
                    cron_id = cron.cron_id,
                    run_id,
                    tick = iso(tick),
                    "cron fired"
                ),
                Err(e) => {
                    metrics::counter!("stategraph_server_errors_total", "kind" => "cron")
                        .increment(1);
                    tracing::warn!(
                        cron_id = cron.cron_id,
                        tick = iso(tick),
                        error = e.detail,
                        "a cron's run could not be created"
                    );
                }
            },
            // Another process fired this tick.
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(cron_id = cron.cron_id, error = %e, "could not claim a cron's tick");
                continue;
            }
        }
        let next = match Schedule::parse(&cron.schedule, cron.timezone.as_deref()) {
            Ok(schedule) => {
                let after = schedule.next_after(tick);
                match after {
                    // Ticks missed while no scheduler ran are not made up one by one.
                    Some(a) if a + CATCH_UP_GRACE < now => schedule.next_after(now),
                    other => other,
                }
            }
            Err(e) => {
                tracing::warn!(
                    cron_id = cron.cron_id,
                    error = e.detail,
                    "a cron's schedule is damaged"
                );
                None
            }
        };
        advance(state, &cron.cron_id, cron.next_run_date.as_deref(), next).await?;
        if let Some(n) = next {
            soonest = Some(soonest.map_or(n, |s| s.min(n)));
        }
    }
    Ok(soonest.map(|s| (s - Utc::now()).to_std().unwrap_or_default()))
}

/// Moves a cron from tick `from` to `next` (none: it has no more), unless it changed since
/// it was read (a `PATCH`, or another process that moved it on).
async fn advance(
    state: &AppState,
    cron_id: &str,
    from: Option<&str>,
    next: Option<DateTime<Utc>>,
) -> Result<(), ApiError> {
    let Some(mut cron) = state.records.get::<CronRecord>(cron_id).await? else {
        return Ok(());
    };
    if cron.next_run_date.as_deref() != from {
        return Ok(());
    }
    cron.next_run_date = next.map(iso);
    state.records.put(&cron).await
}

/// Creates the run of one tick of `cron`; its id.
async fn fire(state: &Arc<AppState>, cron: &CronRecord) -> Result<String, ApiError> {
    let body = cron.run_body()?;
    let target = match &cron.thread_id {
        Some(t) => crate::run::plan::Target::Thread(t.clone()),
        None => crate::run::plan::Target::Stateless,
    };
    let follow = crate::run::start::Follow::Background;
    let started = crate::run::start::start(Arc::clone(state), target, body, follow).await?;
    Ok(started.run.run_id)
}

#[cfg(test)]
mod tests;
