// Package orchestrator implements the public AgentService: it owns every run — the
// ExecutionContract, the budgets, the state machine, the transcript, accounting and events —
// and drives the stage services over gRPC.
//
// The decision loop (DESIGN §6) is PRECHECK → INTENT → PLAN → [ASSEMBLE → INFER →
// VALIDATE_CALLS → EXECUTE → OBSERVE → COMMIT]* → TERMINATE. Every transition appends a
// transcript entry and gets a span; every turn ends in COMMIT, which evaluates the transition
// predicates in the Monolith order (interrupt/timeout → budgets → policy → context →
// success → continue); TERMINATE happens exactly once and publishes run_finished last.
//
// PLAN asks the planning stage for a dependency graph of steps, with the intent's task type
// and constraints; the run then tracks each step from the observations (planTracker), shows
// the model the current step and the plan's progress every turn, and, when a step fails
// beyond recovery or the model calls a tool no step uses, has the plan revised before the
// next turn, at most defaults.max_replans times (revisePlan). With tools.approve_plans a plan
// that requires human approval pauses the run for the pseudo call "plan" (approvePlan).
//
// INFER makes up to max_retries accounted attempts, one provider request each, round-robin
// over the targets; after each failure the recovery stage decides, told the targets
// rate-limited in the current cycle, those that refused the request and the run's time
// left. A final answer cut off at the output token limit is asked for again, and kept,
// flagged PARTIAL, when the last attempt is cut off too. Exit reasons and their canned
// messages are in outcome.go.
//
// The contract's tool_transport selects how tool calls travel (seed 000 §11): native provider
// tool calls; xml-final, where tools stay native but the final report is written in the XML
// final slot; or xml, where provider tool definitions are withheld and every tool is called
// in a numbered XML slot. In the XML modes a run holds one xmltransport.Session (a nonce fixed
// for the run, slots continuing across turns); each attempt ends with the ephemeral XML-NEXT
// message, the answer's valid tags become tool calls that share the native validation,
// approval, execution, observation and budgets, and their results return as the XML-PAST user
// message. With cache_responses the attempts may be answered from the generation stage's
// response cache (seed 002 §8): a miss streams as any attempt does, a cached answer emits no
// llm_delta.
//
// A run's conversation opens with the system message of the profile it names (prompts.go:
// system prompt, constitution, retrieval rules); INTENT adds the task type and constraints
// the intent stage found, which also go to planning, and accounts the intent model's request.
package orchestrator
