// Package recovery implements agentmesh.recovery.v1.RecoveryService: given a stage failure, the
// number of retries already made and what the run knows (targets, timeout, alternative tools),
// it decides to retry, fall back, abort or ask the user.
//
// The decision is the strategy table of the stages contract ("timeout → retry with longer
// timeout, rate limit → wait and retry, tool error → try alternative tool, LLM error → fallback,
// unknown → ask user") reconciled with the error-handling contract of the ai-agent seed (auth and
// quota are fatal; a rate limit cycles to the next target at once, and only when every target
// was rate-limited in the same round-robin cycle (state.rate_limited) waits, for the largest
// Retry-After of the cycle, else 1 s → 60 s with ±20 % jitter (seed 002 §8), never more than
// 60 s; network, timeout and model
// errors move to the next target immediately; a target that refused the request as invalid is
// never chosen again in the turn, state.rejected_targets, and when every target has refused
// the turn aborts). The table is written out in rules.go; on top of it, any retry or fallback
// becomes an abort once retry_count reaches the retry budget (state.max_retries, else
// Options.MaxRetries, default 3: "max 3 retries per action"), the turn's last LLM attempt
// (state.last_attempt) ends the cycle over the targets, and a wait longer than the run's
// remaining time (state.time_left_ms) aborts instead of waiting into a timeout.
//
// Three rules depend on the run. A timed-out tool is retried with a longer timeout only when
// it is idempotent (state.idempotent): any other tool may have had its effect, so the model is
// told it timed out. An LLM failure that would abort falls back, for one attempt, to the
// run's simpler model (state.fallback_target, config models.fallback) unless that model is
// the one that failed. A result too large to observe (OBSERVATION_TOO_LARGE: it cannot be
// summarised adequately) asks the user for guidance, and a malformed tool result
// (PARSE_ERROR) aborts.
//
// Every decision carries a user-friendly user_message (the decision-engine seed's canned texts
// for LLM failure, rate limit and an over-complex request, verbatim) and a reason for logs and
// the transcript.
package recovery
