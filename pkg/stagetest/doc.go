// Package stagetest is the conformance kit of the stage contracts: for every service of the
// mesh (the stages intent, planning, context, generation, action, observation, memory,
// recovery, and the orchestrator, whose contract is the public API,
// agentmesh.agent.v1.AgentService) a table of requests and the answers or errors its contract
// requires (seed 003, the proto comments of proto/agentmesh/*/v1 and, for the public API, the
// README's "The public API" and "Limits"): the answer's properties, or the gRPC code with the
// StageError detail code (pkg/stageerr) of each failure the orchestrator or an API client
// relies on, limits, invalid input (INVALID_ARGUMENT whose message names the field), and the
// gRPC health service reporting the service SERVING. Run runs a table against any address, so
// a replacement in any language can prove it keeps its contract; `agentmesh conformance` is its
// command.
//
// The cases hold for any correct implementation: they check properties (a plan is acyclic,
// uses only offered tools and keeps max_steps; a decision always carries a user message), never
// the wording of the project's own stages. Each case has its own deadline (CaseTimeout), and
// the identifiers it writes (run, call, user and memory ids) are unique to the run of the kit,
// so the kit can run again against the same stage.
//
// Some cases need what a deployment of the stage must provide:
//
//   - generation: the built-in deterministic provider "rules" (any model name), which answers
//     without network; a greeting ("Hello") is answered with a message, its arithmetic
//     question with the calculator offered with a calculator call, and Embed returns one
//     vector per input. With Options.ProviderAddr
//     (RunWith), a provider named ProviderName that sends to the kit's scripted provider, whose
//     failures the stage must classify.
//   - action: the built-in tools calculator (argument expression, a string) and current_time,
//     which run without network; a division by zero is a tool that ran and failed.
//   - memory: a store the kit may write to: it stores, searches, lists and deletes memories of
//     users named "stagetest-…", and saves and reads runs named "stagetest-…". Calls name the
//     user they act for in the agentmesh-user metadata, as the orchestrator's do.
//   - intent: a safety policy that refuses a request to write ransomware (INTENT_UNSAFE).
//   - context: nothing (memory_query is left empty, so no memory service is needed).
//   - orchestrator: the whole mesh behind it. Its runs ask the generation stage's rules
//     provider (overrides.targets), so no run calls a paid model unless a stage has one of
//     its own (models.intent, models.planning, models.memory, ...); "What is 6 times 7?"
//     must complete through a calculator call, so calculator must be available and need no
//     approval (tools.require_approval), with the default tool policy. The kit writes runs
//     named "stagetest-…" (most of them end at once, as EMPTY_INPUT) and leaves user_id
//     empty: with authentication off the runs are anonymous's, with it on the caller's, who
//     needs no role to run, read and cancel its own runs.
//
// A stage behind mutual TLS, or a public API that authenticates its callers, is reached with
// the caller's credentials: Run takes any *grpc.ClientConn.
package stagetest
