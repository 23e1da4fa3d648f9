// Package recovery implements agentmesh.recovery.v1.RecoveryService: given a stage failure, the
// number of retries already made and what the run knows (targets, timeout, alternative tools),
// it decides to retry, fall back, abort or ask the user.
//
// The decision is the strategy table of the stages contract ("timeout → retry with longer
// timeout, rate limit → wait and retry, tool error → try alternative tool, LLM error → fallback,
// unknown → ask user") reconciled with the error-handling contract of the ai-agent seed (auth and
// quota are fatal; rate limits honour Retry-After, else back off 1 s → 60 s, and cycle to the
// next target; network, timeout and model errors move to the next target immediately). The
// table is written out in rules.go; on top of it, any retry or fallback becomes an abort once
// retry_count reaches the retry budget (state.max_retries, else Options.MaxRetries, default 3:
// "max 3 retries per action").
//
// Every decision carries a user-friendly user_message (the decision-engine seed's canned texts
// for LLM failure, rate limit and an over-complex request, verbatim) and a reason for logs and
// the transcript.
package recovery
